package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Tokens per member (`[[token]]`): each member's token reaches only the
// profiles it is bound to, by path or header, and its sessions stay its
// own; http_token stays the key to every view; what shows a token is its
// name, never its value.

const (
	adminKey = "admin-key-0123456789"
	aliceKey = "alice-key-0123456789"
	bobKey   = "bob-key-0123456789"
)

// startTeamMux serves two backends (f, g), the profiles readonly (f) and
// ops (g), http_token, and the tokens alice (every view) and bob
// (readonly only), writing its audit log to the path it returns.
func startTeamMux(t *testing.T) (*httpMux, string) {
	t.Helper()
	statusDir(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := testkit.WriteConfig(t, `log_level = "debug"
http_token = "${MUX_ADMIN_TOKEN}"
audit_log = `+strconv.Quote(auditPath), []string{"f", "-name", "f"}, []string{"g", "-name", "g"})
	src, _ := os.ReadFile(cfg)
	src = append(src, `
[profile.readonly]
backends = ["f"]

[profile.ops]
backends = ["g"]

[[token]]
name = "alice"
value = "${MUX_ALICE_TOKEN}"

[[token]]
name = "bob"
value = "${MUX_BOB_TOKEN}"
profiles = ["readonly"]
`...)
	os.WriteFile(cfg, src, 0o644)
	h := startHTTPMux(t, cfg, "MUX_ADMIN_TOKEN="+adminKey, "MUX_ALICE_TOKEN="+aliceKey, "MUX_BOB_TOKEN="+bobKey)
	return h, auditPath
}

// sessionTools lists the tools a session sees.
func sessionTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// backendsOf are the prefixes (backends) of names.
func backendsOf(names []string) []string {
	var out []string
	for _, n := range names {
		if b, _, ok := strings.Cut(n, "__"); ok && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// connectEra connects the go-sdk client to url with token, in the
// handshake era (2025-11-25) or the current one.
func connectEra(t *testing.T, url, token string, current bool) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "team-member", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withBearer{token}}}
	var opts *mcp.ClientSessionOptions
	if !current {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	cs, err := c.Connect(context.Background(), tr, opts)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// rawPost POSTs an initialize to url with hdr and returns the status, the
// body and the response's Mcp-Session-Id.
func rawPost(t *testing.T, url string, hdr map[string]string, body string) (int, string, string) {
	t.Helper()
	if body == "" {
		body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	}
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Mcp-Session-Id")
}

func TestHTTPTokensAreBoundToTheirProfiles(t *testing.T) {
	h, _ := startTeamMux(t)
	base := h.url
	for _, era := range []struct {
		name    string
		current bool
	}{{"handshake era", false}, {"current era", true}} {
		t.Run(era.name, func(t *testing.T) {
			for _, tc := range []struct {
				who, token, path string
				want             []string // the backends it sees; nil: refused
			}{
				{"bob at /mcp gets his first profile", bobKey, "", []string{"f"}},
				{"bob at his profile", bobKey, "/readonly", []string{"f"}},
				{"bob at another's profile", bobKey, "/ops", nil},
				{"bob at a profile that does not exist", bobKey, "/nosuch", nil},
				{"alice at /mcp sees every backend", aliceKey, "", []string{"f", "g"}},
				{"alice at ops", aliceKey, "/ops", []string{"g"}},
				{"http_token at ops", adminKey, "/ops", []string{"g"}},
				{"http_token at /mcp", adminKey, "", []string{"f", "g"}},
			} {
				cs, err := connectEra(t, base+tc.path, tc.token, era.current)
				switch {
				case tc.want == nil && err == nil:
					t.Errorf("%s: connected, and sees %v", tc.who, backendsOf(sessionTools(t, cs)))
				case tc.want == nil:
				case err != nil:
					t.Errorf("%s: %v\nstderr:\n%s", tc.who, err, h.stderr)
				default:
					if got := backendsOf(sessionTools(t, cs)); !slices.Equal(got, tc.want) {
						t.Errorf("%s: sees the backends %v, want %v", tc.who, got, tc.want)
					}
				}
			}
		})
	}

	// The refusal is a 403 that names nothing the token cannot see: not the
	// profile asked for, not the token's own.
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
	}{
		{"by path", "/ops", nil},
		{"by header", "", map[string]string{"Mcp-Mux-Profile": "ops"}},
		{"by header at its own path", "/readonly", map[string]string{"Mcp-Mux-Profile": "ops"}},
		{"an unknown profile", "/nosuch", nil},
	} {
		hdr := map[string]string{"Authorization": "Bearer " + bobKey}
		for k, v := range tc.hdr {
			hdr[k] = v
		}
		code, body, _ := rawPost(t, base+tc.path, hdr, "")
		if code != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403; body %q", tc.name, code, body)
		}
		for _, hidden := range []string{"ops", "readonly", "nosuch", "f", "g"} {
			if slices.Contains(strings.FieldsFunc(strings.ToLower(body), func(r rune) bool { return !(r >= 'a' && r <= 'z') }), hidden) {
				t.Errorf("%s: the refusal names %q: %q", tc.name, hidden, body)
			}
		}
	}
	if code, _, _ := rawPost(t, base, map[string]string{"Authorization": "Bearer not-a-token"}, ""); code != http.StatusUnauthorized {
		t.Errorf("an unknown token: status %d, want 401", code)
	}
}

// A session stays the token's that made it: another token's request on its
// Mcp-Session-Id is answered as a session that does not exist (404).
func TestHTTPSessionStaysWithItsToken(t *testing.T) {
	h, _ := startTeamMux(t)
	code, body, sid := rawPost(t, h.url, map[string]string{"Authorization": "Bearer " + aliceKey}, "")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("alice's initialize: %d %q (session %q)", code, body, sid)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"bob", bobKey, http.StatusNotFound},
		{"http_token", adminKey, http.StatusNotFound},
		{"alice", aliceKey, http.StatusOK},
	} {
		hdr := map[string]string{"Authorization": "Bearer " + tc.token, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
		if code, body, _ := rawPost(t, h.url, hdr, list); code != tc.want {
			t.Errorf("%s on alice's session: status %d, want %d; body %q", tc.who, code, tc.want, body)
		} else if tc.want != http.StatusOK && strings.Contains(body, "tools") {
			t.Errorf("%s on alice's session got an answer: %q", tc.who, body)
		}
	}
	// The event stream and DELETE are the session's too.
	for _, method := range []string{"GET", "DELETE"} {
		req, _ := http.NewRequest(method, h.url, nil)
		req.Header.Set("Authorization", "Bearer "+bobKey)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Accept", "text/event-stream")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob's %s on alice's session: status %d, want 404", method, resp.StatusCode)
		}
	}
	hdr := map[string]string{"Authorization": "Bearer " + aliceKey, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	if code, body, _ := rawPost(t, h.url, hdr, list); code != http.StatusOK {
		t.Errorf("alice's session after bob's DELETE: status %d; body %q", code, body)
	}
}

// The audit log, the metrics and status show a token's name, never its
// value, nor does the log.
func TestHTTPTokenNameShowsWhereTheUserLooks(t *testing.T) {
	h, auditPath := startTeamMux(t)
	bob, err := connectEra(t, h.url, bobKey, false)
	if err != nil {
		t.Fatal(err)
	}
	modern, err := connectEra(t, h.url, bobKey, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range []*mcp.ClientSession{bob, modern} {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"text": "hi"}}); err != nil || res.IsError {
			t.Fatalf("f__echo: %v %+v", err, res)
		}
	}
	var audit string
	testkit.Eventually(t, 5*time.Second, "two audit lines", func() bool {
		b, _ := os.ReadFile(auditPath)
		audit = string(b)
		return strings.Count(audit, "\n") >= 2
	})
	for _, line := range strings.Split(strings.TrimSpace(audit), "\n") {
		if !strings.Contains(line, `"token":"bob"`) {
			t.Errorf("an audit line does not name bob's token: %s", line)
		}
	}

	req, _ := http.NewRequest("GET", strings.TrimSuffix(h.url, "/mcp")+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `mcp_mux_sessions{transport="http",token="bob"} 1`) {
		t.Errorf("the metrics do not count bob's session:\n%s", grepLines(string(metrics), "mcp_mux_sessions"))
	}
	if !strings.Contains(string(metrics), `mcp_mux_sessions{transport="http",token="alice"} 0`) {
		t.Errorf("the metrics have no series of alice's token:\n%s", grepLines(string(metrics), "mcp_mux_sessions"))
	}

	status, _, _ := runStatus(t)
	if !strings.Contains(status, "token bob") {
		t.Errorf("status does not show bob's token on his session:\n%s", status)
	}
	statusJSON, _, _ := runStatus(t, "--json")
	if !strings.Contains(statusJSON, `"token": "bob"`) && !strings.Contains(statusJSON, `"token":"bob"`) {
		t.Errorf("status --json does not show bob's token:\n%s", statusJSON)
	}
	for what, text := range map[string]string{"the log": h.stderr.String(), "the audit log": audit, "the metrics": string(metrics), "status": status + statusJSON} {
		for _, key := range []string{adminKey, aliceKey, bobKey} {
			if strings.Contains(text, key) {
				t.Errorf("%s holds a token's value", what)
			}
		}
	}
}

// grepLines are the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A [[token]] that is not usable stops serve --http (exit 1, FILE:LINE and
// the variable), as an unusable http_token does; check names a profile it
// lacks, with the one meant.
func TestHTTPTokenMistakesAreNamed(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"f", "-name", "f"})
	src, _ := os.ReadFile(cfg)
	src = append(src, "[profile.readonly]\nbackends = [\"f\"]\n\n[[token]]\nname = \"bob\"\nvalue = \"${MUX_TEST_UNSET_BOB}\"\nprofiles = [\"readonyl\"]\n"...)
	os.WriteFile(cfg, src, 0o644)
	lineOf := func(prefix string) int {
		for i, l := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(l, prefix) {
				return i + 1
			}
		}
		return 0
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MUX_TEST_") })

	cmd := exec.Command(testkit.MuxBin(t), "serve", "--config", cfg, "--http", "127.0.0.1:0")
	cmd.Env = env
	out, err := runRefusal(t, cmd)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve --http: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{fmt.Sprintf("%s:%d", cfg, lineOf("value")), "MUX_TEST_UNSET_BOB", "not set"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}

	cmd = exec.Command(testkit.MuxBin(t), "check", "--config", cfg)
	cmd.Env = append(env, "MUX_TEST_UNSET_BOB=bob-key-0123456789")
	out, err = cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("check passed a token whose profile does not exist:\n%s", out)
	}
	if want := fmt.Sprintf(`%s:%d: token #1 (bob).profiles #1: unknown profile "readonyl"; did you mean "readonly"?`, cfg, lineOf("profiles")); !strings.Contains(string(out), want) {
		t.Errorf("check does not say %q:\n%s", want, out)
	}
	if strings.Contains(string(out), "bob-key-0123456789") {
		t.Errorf("check shows the token's value:\n%s", out)
	}
}

// /metrics shows every backend: a token bound to profiles may not read it.
func TestHTTPMetricsAreForTheKeysOfEveryView(t *testing.T) {
	h, _ := startTeamMux(t)
	for _, tc := range []struct {
		who, token string
		want       int
	}{{"http_token", adminKey, 200}, {"alice (every view)", aliceKey, 200}, {"bob (readonly)", bobKey, 403}} {
		req, _ := http.NewRequest("GET", strings.TrimSuffix(h.url, "/mcp")+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: /metrics status %d, want %d", tc.who, resp.StatusCode, tc.want)
		}
		if tc.want == 403 && strings.Contains(string(body), "backend") {
			t.Errorf("%s: the refusal shows the metrics: %q", tc.who, body)
		}
	}
}

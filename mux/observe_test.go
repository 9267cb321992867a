package mux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// scrape GETs url (a /metrics) with token (if not "") and parses the
// Prometheus text it answers.
func scrape(t testing.TB, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return families
}

// sample is the value of family's series with exactly labels (a
// histogram's: its count), or -1 if there is none.
func sample(families map[string]*dto.MetricFamily, family string, labels ...string) float64 {
	f := families[family]
	if f == nil {
		return -1
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)/2
		for i := 0; match && i+1 < len(labels); i += 2 {
			match = got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// /metrics counts what agents asked of each backend, by method and how it
// ended: an answer, a JSON-RPC error, a tool's own error, mux's timeout
// and the agent's cancellation; with each backend's state, the sessions
// and the notifications sent.
func TestMetricsCountRequestsByOutcome(t *testing.T) {
	slow := fixture(t, "slow")
	slow.RequestTimeout.Duration = 300 * time.Millisecond
	m := startMux(t, fixture(t, "f"), slow, fixture(t, "g"))
	url := strings.TrimSuffix(serveHTTP(t, m, door.HTTPOptions{}), door.HTTPPath) + MetricsPath
	progressed := make(chan struct{}, 10)
	cs := connect(t, m, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case progressed <- struct{}{}:
			default:
			}
		},
	})
	ctx := testkit.CtxT(t)

	for range 3 {
		callText(t, cs, "f__echo", map[string]any{"x": 1})
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__fail", Arguments: map[string]any{"code": -32050}}); err == nil {
		t.Fatal("f__fail did not fail")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__fail", Arguments: map[string]any{"tool_error": true}})
	if err != nil || !res.IsError {
		t.Fatalf("f__fail with tool_error: %v %+v", err, res)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fixture://f/res/1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "f__greet", Arguments: map[string]string{"name": "Zed"}}); err != nil {
		t.Fatal(err)
	}
	// Past slow's request_timeout.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow__sleep", Arguments: map[string]any{"ms": 60000}}); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("slow__sleep: %v, want a timeout", err)
	}
	// Cancelled by the agent once it reached g.
	came := arrived(t, cs, "g__stats")
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "g__sleep", Arguments: map[string]any{"ms": 60000}})
		errc <- err
	}()
	testkit.Eventually(t, 10*time.Second, "g__sleep to reach g", came)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call succeeded")
	}
	// Notifications mux sends the agent: the backend's progress.
	progress := &mcp.CallToolParams{Name: "f__progress", Arguments: map[string]any{"steps": 2}}
	progress.SetProgressToken("p1")
	if _, err := cs.CallTool(ctx, progress); err != nil {
		t.Fatal(err)
	}
	select {
	case <-progressed:
	case <-ctx.Done():
		t.Fatal("no progress reached the agent")
	}

	var fams map[string]*dto.MetricFamily
	testkit.Eventually(t, 10*time.Second, "the cancelled call counted", func() bool {
		fams = scrape(t, url, "")
		return sample(fams, "mcp_mux_requests_total", "backend", "g", "method", "tools/call", "outcome", "cancelled") == 1
	})
	for _, c := range []struct {
		want   float64
		labels []string
	}{
		{4, []string{"backend", "f", "method", "tools/call", "outcome", "ok"}}, // echo ×3, progress
		{1, []string{"backend", "f", "method", "tools/call", "outcome", "error"}},
		{1, []string{"backend", "f", "method", "tools/call", "outcome", "tool_error"}},
		{0, []string{"backend", "f", "method", "tools/call", "outcome", "timeout"}},
		{1, []string{"backend", "f", "method", "resources/read", "outcome", "ok"}},
		{1, []string{"backend", "f", "method", "prompts/get", "outcome", "ok"}},
		{1, []string{"backend", "slow", "method", "tools/call", "outcome", "timeout"}},
		{0, []string{"backend", "slow", "method", "tools/call", "outcome", "error"}},
	} {
		if got := sample(fams, "mcp_mux_requests_total", c.labels...); got != c.want {
			t.Errorf("mcp_mux_requests_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := sample(fams, "mcp_mux_request_duration_seconds", "backend", "f", "method", "tools/call"); got != 6 {
		t.Errorf("tools/call durations observed at f: %v, want 6", got)
	}
	for _, name := range []string{"f", "slow", "g"} {
		if got := sample(fams, "mcp_mux_backend_up", "backend", name); got != 1 {
			t.Errorf("mcp_mux_backend_up{backend=%q} = %v, want 1", name, got)
		}
		if got := sample(fams, "mcp_mux_backend_restarts_total", "backend", name); got != 0 {
			t.Errorf("mcp_mux_backend_restarts_total{backend=%q} = %v, want 0", name, got)
		}
	}
	if got := sample(fams, "mcp_mux_sessions", "transport", "stdio"); got != 1 {
		t.Errorf("stdio sessions = %v, want 1", got)
	}
	if got := sample(fams, "mcp_mux_notifications_total", "kind", "progress"); got != 2 {
		t.Errorf("progress notifications = %v, want 2", got)
	}
	// No tool name, URI or session id is a label.
	for name, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if v := l.GetValue(); strings.Contains(v, "echo") || strings.Contains(v, "fixture://") || strings.HasPrefix(v, "s1") {
					t.Errorf("%s has label %s=%q", name, l.GetName(), v)
				}
			}
		}
	}
}

// The HTTP door's fast path counts its calls as the stdio door's, and a
// backend down counts as down, its restart as a restart.
func TestMetricsOfTheHTTPDoorAndARestart(t *testing.T) {
	m := startMux(t, fixture(t, "f"))
	endpoint := serveHTTP(t, m, door.HTTPOptions{})
	url := strings.TrimSuffix(endpoint, door.HTTPPath) + MetricsPath
	cs := connectHTTPClient(t, endpoint)
	toolNames(t, cs) // the first list is over: calls take the fast path (http.go)
	callText(t, cs, "f__echo", nil)
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__fail", Arguments: map[string]any{"tool_error": true}})
	if err != nil || !res.IsError {
		t.Fatalf("f__fail with tool_error: %v %+v", err, res)
	}
	fams := scrape(t, url, "")
	if got := sample(fams, "mcp_mux_requests_total", "backend", "f", "method", "tools/call", "outcome", "ok"); got != 1 {
		t.Errorf("ok calls over HTTP = %v, want 1", got)
	}
	if got := sample(fams, "mcp_mux_requests_total", "backend", "f", "method", "tools/call", "outcome", "tool_error"); got != 1 {
		t.Errorf("tool errors over HTTP = %v, want 1", got)
	}
	if got := sample(fams, "mcp_mux_sessions", "transport", "http"); got != 1 {
		t.Errorf("HTTP sessions = %v, want 1", got)
	}

	cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__crash", Arguments: map[string]any{"code": 3}})
	testkit.Eventually(t, 10*time.Second, "the restart counted, and f up again", func() bool {
		fams := scrape(t, url, "")
		return sample(fams, "mcp_mux_backend_restarts_total", "backend", "f") == 1 &&
			sample(fams, "mcp_mux_backend_up", "backend", "f") == 1
	})
}

// connectHTTPClient is a go-sdk client session with m over HTTP at endpoint.
func connectHTTPClient(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "http-agent", Version: "1"}, nil)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// auditLines reads the audit log at path, one decoded line each.
func auditLines(t testing.TB, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line is not JSON: %q", sc.Bytes())
		}
		out = append(out, l)
	}
	return out
}

// The audit log has a line per call, read and prompt: who, where, how
// long, how it ended, and the arguments' names, never their values.
func TestAuditLogLinesNameArgumentsButHoldNoValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	cfg := testConfig(fixture(t, "f"))
	cfg.Mux.AuditLog = path
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	ctx := testkit.CtxT(t)

	callText(t, cs, "f__echo", map[string]any{"secret": "hunter2-value", "count": 42017})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__fail", Arguments: map[string]any{"message": "sensitive-message-arg"}}); err == nil {
		t.Fatal("f__fail did not fail")
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fixture://f/res/2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "f__greet", Arguments: map[string]string{"name": "Zed-the-prompt-value"}}); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	testkit.Eventually(t, 10*time.Second, "4 audit lines", func() bool {
		lines = auditLines(t, path)
		return len(lines) >= 4
	})
	if len(lines) != 4 {
		t.Fatalf("%d audit lines, want 4: %v", len(lines), lines)
	}
	data, _ := os.ReadFile(path)
	for _, v := range []string{"hunter2-value", "42017", "sensitive-message-arg", "Zed-the-prompt-value"} {
		if bytes.Contains(data, []byte(v)) {
			t.Errorf("the audit log holds the argument value %q:\n%s", v, data)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 && runtime.GOOS != "windows" {
		t.Errorf("audit log mode: %v %v, want 0600", fi.Mode(), err)
	}

	want := []map[string]any{
		{"method": "tools/call", "tool": "f__echo", "outcome": "ok", "argument_names": []any{"count", "secret"}},
		{"method": "tools/call", "tool": "f__fail", "outcome": "error", "argument_names": []any{"message"}},
		{"method": "resources/read", "uri": "fixture://f/res/2", "outcome": "ok"},
		{"method": "prompts/get", "prompt": "f__greet", "outcome": "ok", "argument_names": []any{"name"}},
	}
	for i, l := range lines {
		for k, v := range want[i] {
			if got, _ := json.Marshal(l[k]); string(got) != string(must(json.Marshal(v))) {
				t.Errorf("line %d: %s = %s, want %s\n%v", i+1, k, got, must(json.Marshal(v)), l)
			}
		}
		if l["backend"] != "f" || l["session"] != "s1" || l["agent"] != "test-agent" {
			t.Errorf("line %d: backend, session, agent = %v %v %v, want f s1 test-agent", i+1, l["backend"], l["session"], l["agent"])
		}
		if d, ok := l["duration_ms"].(float64); !ok || d <= 0 {
			t.Errorf("line %d: duration_ms = %v", i+1, l["duration_ms"])
		}
		ts, _ := l["time"].(string)
		if tm, err := time.Parse(time.RFC3339Nano, ts); err != nil || time.Since(tm) > time.Minute || len(ts) != len("2006-01-02T15:04:05.000Z") {
			t.Errorf("line %d: time %q is not RFC 3339 with ms, of now: %v", i+1, ts, err)
		}
		if _, ok := l["arguments"]; ok {
			t.Errorf("line %d has the arguments' values: %v", i+1, l)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// audit_arguments = true puts the arguments' values in the log too; a
// reload that changes audit_log writes the new file from then on.
func TestAuditArgumentsOptInAndReloadToAnotherFile(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.log"), filepath.Join(dir, "second.log")
	fix := testkit.FixtureBin(t)
	write := func(path string, withArgs bool) string {
		src := "[mux]\naudit_log = " + quote(path) + "\n"
		if withArgs {
			src += "audit_arguments = true\n"
		}
		src += "[[backend]]\nname = \"f\"\ncommand = " + quote(fix) + "\nargs = [\"-name\", \"f\"]\n"
		cfgPath := filepath.Join(dir, "mcp-mux.toml")
		if err := os.WriteFile(cfgPath, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfgPath
	}
	cfg, err := config.Load(write(first, true))
	if err != nil {
		t.Fatal(err)
	}
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	callText(t, cs, "f__echo", map[string]any{"q": "opted-in-value"})
	testkit.Eventually(t, 10*time.Second, "the first line", func() bool { return len(auditLines(t, first)) == 1 })
	l := auditLines(t, first)[0]
	if got, _ := json.Marshal(l["arguments"]); string(got) != `{"q":"opted-in-value"}` {
		t.Errorf("arguments = %s, want the values", got)
	}

	write(second, false)
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	callText(t, cs, "f__echo", map[string]any{"q": "not-kept-value"})
	testkit.Eventually(t, 10*time.Second, "a line in the new file", func() bool { return len(auditLines(t, second)) == 1 })
	if n := len(auditLines(t, first)); n != 1 {
		t.Errorf("the first file has %d lines after the reload, want 1", n)
	}
	if data, _ := os.ReadFile(second); bytes.Contains(data, []byte("not-kept-value")) {
		t.Errorf("the new file holds values, audit_arguments being off:\n%s", data)
	}
}

func quote(s string) string { return string(must(json.Marshal(s))) }

// A write to the audit log that fails is logged once and never fails the
// call (an audit log that cannot be opened at all is another matter:
// TestAnAuditLogThatCannotBeWrittenRefusesWhatItWouldAudit).
func TestAuditWriteFailureIsLoggedOnceAndNeverFailsTheCall(t *testing.T) {
	for _, tc := range []struct{ name, path, logged string }{
		{"a write fails", "/dev/full", "a write failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.path == "/dev/full" && runtime.GOOS != "linux" {
				t.Skip("/dev/full is Linux's")
			}
			var logs testkit.SyncBuffer
			cfg := testConfig(fixture(t, "f"))
			cfg.Mux.AuditLog = tc.path
			m := New(cfg, log.New(&logs), "test")
			m.Start()
			t.Cleanup(m.Close)
			cs := connect(t, m, nil)
			for i := range 5 {
				if got := callText(t, cs, "f__echo", map[string]any{"i": i}); got != `{"i":`+string(rune('0'+i))+`}` {
					t.Fatalf("call %d: %q", i, got)
				}
			}
			testkit.Eventually(t, 10*time.Second, "the failure logged", func() bool { return strings.Contains(logs.String(), tc.logged) })
			for i := range 5 {
				callText(t, cs, "f__echo", map[string]any{"i": i})
			}
			m.Close() // every line written (or not)
			if n := strings.Count(logs.String(), "audit log"); n != 1 {
				t.Errorf("the audit log's failure logged %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

// An audit log the config asks for and mcp-mux cannot write (its
// directory is missing: a mistake serving forgives; or it cannot be
// opened) fails closed: the calls, reads and prompts it would have a line
// for are refused with the reason, at FILE:LINE where there is one, and
// logged; the lists still work. Saving the file once it can be written
// lets them through, audited.
func TestAnAuditLogThatCannotBeWrittenRefusesWhatItWouldAudit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fromFile bool
		why      string
	}{
		{"a mistake in the file", true, `mcp-mux.toml:2: mux.audit_log: directory`},
		{"cannot be opened", false, "audit_log: open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			logDir := filepath.Join(dir, "logs")
			auditPath := filepath.Join(logDir, "audit.log")
			cfgPath := filepath.Join(dir, "mcp-mux.toml")
			src := "[mux]\naudit_log = " + quote(auditPath) + "\n[[backend]]\nname = \"f\"\ncommand = " + quote(testkit.FixtureBin(t)) + "\nargs = [\"-name\", \"f\"]\n"
			if err := os.WriteFile(cfgPath, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.LoadForServing(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.fromFile {
				cfg.Mux.AuditLog, cfg.Invalid, cfg.Warnings = auditPath, nil, nil // as if the directory went between check and open
			}
			var logs testkit.SyncBuffer
			m := New(cfg, log.New(&logs), "test")
			m.Start()
			t.Cleanup(m.Close)
			cs := connect(t, m, nil)
			ctx := testkit.CtxT(t)

			if tools := toolNames(t, cs); !strings.Contains(strings.Join(tools, " "), "f__echo") {
				t.Fatalf("tools/list: %v", tools)
			}
			refused := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Errorf("%s went through unaudited", what)
				} else if !strings.Contains(err.Error(), "audit log") || !strings.Contains(err.Error(), tc.why) {
					t.Errorf("%s: %v, want the audit log's reason %q", what, err, tc.why)
				}
			}
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"x": 1}})
			refused("tools/call", err)
			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fixture://f/res/2"})
			refused("resources/read", err)
			_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "f__greet", Arguments: map[string]string{"name": "x"}})
			refused("prompts/get", err)
			if !strings.Contains(logs.String(), tc.why) {
				t.Errorf("the log does not say %q:\n%s", tc.why, logs.String())
			}

			if err := os.Mkdir(logDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := m.Reload(); err != nil {
				t.Fatal(err)
			}
			callText(t, cs, "f__echo", map[string]any{"x": 1})
			testkit.Eventually(t, 10*time.Second, "the call audited", func() bool { return len(auditLines(t, auditPath)) == 1 })
		})
	}
}

// A backend a reload removes takes its series with it.
func TestMetricsOfARemovedBackendGo(t *testing.T) {
	dir := t.TempDir()
	fix := testkit.FixtureBin(t)
	cfgPath := filepath.Join(dir, "mcp-mux.toml")
	write := func(names ...string) {
		var sb strings.Builder
		for _, n := range names {
			sb.WriteString("[[backend]]\nname = " + quote(n) + "\ncommand = " + quote(fix) + "\nargs = [\"-name\", " + quote(n) + "]\n")
		}
		if err := os.WriteFile(cfgPath, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("f", "g")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	m := startMuxConfig(t, cfg)
	url := strings.TrimSuffix(serveHTTP(t, m, door.HTTPOptions{}), door.HTTPPath) + MetricsPath
	cs := connect(t, m, nil)
	callText(t, cs, "f__echo", nil)
	callText(t, cs, "g__echo", nil)
	if got := sample(scrape(t, url, ""), "mcp_mux_requests_total", "backend", "g", "method", "tools/call", "outcome", "ok"); got != 1 {
		t.Fatalf("g's calls = %v, want 1", got)
	}
	write("f")
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, url, "")
	for _, family := range []string{"mcp_mux_requests_total", "mcp_mux_request_duration_seconds", "mcp_mux_backend_up", "mcp_mux_backend_restarts_total"} {
		for _, mt := range fams[family].GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "backend" && l.GetValue() == "g" {
					t.Errorf("%s still has backend g after the reload removed it", family)
				}
			}
		}
	}
	if got := sample(fams, "mcp_mux_requests_total", "backend", "f", "method", "tools/call", "outcome", "ok"); got != 1 {
		t.Errorf("f's calls = %v, want 1", got)
	}
}

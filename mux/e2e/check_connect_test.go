package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// What `check --connect` shows while backends come up and in its report,
// and what a serving mcp-mux logs.

// TestCheckConnectReportsABackendThatExitsAsFailed: a command that exits 0
// at once is failed (check restarts nothing) and says why.
func TestCheckConnectReportsABackendThatExitsAsFailed(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
	data, _ := os.ReadFile(cfg)
	quits := "command = \"/bin/true\"\n"
	if runtime.GOOS == "windows" {
		quits = "command = \"cmd\"\nargs = [\"/d\", \"/c\", \"exit 0\"]\n"
	}
	os.WriteFile(cfg, append(data, []byte("[[backend]]\nname = \"quits\"\n"+quits)...), 0o644)
	out, errOut, code := runBin(t, testkit.MuxBin(t), "check", "--connect", "--config", cfg)
	if code != 1 || !regexp.MustCompile(`backend quits\n  state +failed\n  error +.*exited during initialize: exit status 0`).MatchString(out) || strings.Contains(out, "restarting") {
		t.Errorf("exit %d, want 1 and quits failed with its exit status:\n%s", code, out)
	}
	if !strings.Contains(errOut, "backend quits: failed: ") {
		t.Errorf("no progress line for quits on stderr:\n%s", errOut)
	}
	jout, _, _ := runBin(t, testkit.MuxBin(t), "check", "--connect", "--json", "--config", cfg)
	var rep struct {
		Backends []struct{ Name, State string } `json:"backends"`
	}
	json.Unmarshal([]byte(jout), &rep)
	if len(rep.Backends) != 2 || rep.Backends[1].State != "failed" {
		t.Errorf("json: %s", jout)
	}
}

// TestCheckConnectQuotesWhatABackendPrintedInsteadOfJSONRPC: a server that
// logs to stdout fails its start with the first line it printed, cut.
func TestCheckConnectQuotesWhatABackendPrintedInsteadOfJSONRPC(t *testing.T) {
	banner := "Starting server on port 8080, " + strings.Repeat("with a very long line of options, ", 10)
	cfg := testkit.WriteConfig(t, "startup_timeout = \"1s\"", []string{"logs", "-stdout-junk", banner})
	out, _, code := runBin(t, testkit.MuxBin(t), "check", "--connect", "--config", cfg)
	want := `error +did not initialize within 1s; it printed on stdout instead of JSON-RPC: "` + regexp.QuoteMeta(banner[:120]) + `…"`
	if code != 1 || !regexp.MustCompile(want).MatchString(out) {
		t.Errorf("exit %d, want 1 and an error quoting the first line, cut to 120 bytes:\n%s", code, out)
	}
}

// TestCheckConnectPrintsEachBackendAsItComesUp: piped, one plain line per
// backend as soon as it is ready or has failed, not when the slowest is.
func TestCheckConnectPrintsEachBackendAsItComesUp(t *testing.T) {
	cfg := testkit.WriteConfig(t, "",
		[]string{"slow", "-name", "slow", "-start-delay", "2500ms"},
		[]string{"fast", "-name", "fast", "-tools", "a,b"},
		[]string{"broken", "-fail-start"},
	)
	cmd := exec.Command(testkit.MuxBin(t), "check", "--connect", "--config", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type line struct {
		text string
		at   time.Time
	}
	var lines []line
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, line{sc.Text(), time.Now()})
	}
	cmd.Wait()
	exited := time.Now()
	var got []string
	for _, l := range lines {
		got = append(got, l.text)
	}
	t.Logf("stderr:\n%s", strings.Join(got, "\n"))
	want := []*regexp.Regexp{
		regexp.MustCompile(`^starting slow, fast, broken…$`),
		regexp.MustCompile(`^backend (fast|broken): `),
		regexp.MustCompile(`^backend (fast|broken): `),
		regexp.MustCompile(`^backend slow: ready \(16 tools, 1 prompt, 3 resources, 1 template\)`),
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines on stderr, want %d", len(lines), len(want))
	}
	for i, re := range want {
		if !re.MatchString(lines[i].text) {
			t.Errorf("line %d %q, want %s", i, lines[i].text, re)
		}
	}
	all := strings.Join(got, "\n")
	for _, w := range []string{"backend fast: ready (17 tools, 1 prompt, 3 resources, 1 template)", "backend broken: failed: ", "failing on purpose"} {
		if !strings.Contains(all, w) {
			t.Errorf("missing %q", w)
		}
	}
	if d := exited.Sub(lines[1].at); d < time.Second {
		t.Errorf("the first backend's line came %v before the end, want it as the backend came up", d)
	}
	if !strings.Contains(stdout.String(), "backend slow\n") || strings.Contains(stdout.String(), "\x1b") {
		t.Errorf("stdout:\n%q", stdout.String())
	}
}

// TestCheckConnectListShowsTheNamesTheAgentSees: prefixed, and without the
// names a backend lost to a collision.
func TestCheckConnectListShowsTheNamesTheAgentSees(t *testing.T) {
	cfg := testkit.WriteConfig(t, "",
		[]string{"notes", "-name", "notes", "-tools", "", "-prompts", "hello"},
		// Unprefixed, and one of its tools has a name notes has taken.
		[]string{"copy", "-name", "copy", "-uri-base", "fixture://copy/", "-tools", "notes__stats,extra"},
	)
	data, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, bytes.Replace(data, []byte(`name = "copy"`), []byte("name = \"copy\"\nprefix = \"\""), 1), 0o644)

	out, errOut, code := runBin(t, testkit.MuxBin(t), "check", "--connect", "--list", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	notes, copyPart, _ := strings.Cut(out, "backend copy\n")
	copyPart, _, _ = strings.Cut(copyPart, "collisions:")
	for _, w := range []string{"  tool names (15):\n", "    notes__stats\n", "  prompt names (2):\n", "    notes__hello\n", "    notes__greet\n"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes: missing %q in\n%s", w, notes)
		}
	}
	for _, w := range []string{"  tool names (16):\n", "    extra\n", "    stats\n", "    greet\n"} {
		if !strings.Contains(copyPart, w) {
			t.Errorf("copy: missing %q in\n%s", w, copyPart)
		}
	}
	if strings.Contains(copyPart, "notes__stats") {
		t.Errorf("copy lists the name notes took:\n%s", copyPart)
	}
	if plain, _, _ := runBin(t, testkit.MuxBin(t), "check", "--connect", "--config", cfg); strings.Contains(plain, "tool names") {
		t.Errorf("names listed without --list:\n%s", plain)
	}

	jout, _, _ := runBin(t, testkit.MuxBin(t), "check", "--list", "--json", "--config", cfg)
	var rep struct {
		Offered []struct {
			Backend        string
			Tools, Prompts []string
		} `json:"offered"`
	}
	if err := json.Unmarshal([]byte(jout), &rep); err != nil || len(rep.Offered) != 2 || len(rep.Offered[1].Tools) != 16 ||
		!slices.Contains(rep.Offered[1].Tools, "extra") || slices.Contains(rep.Offered[1].Tools, "notes__stats") || !slices.Equal(rep.Offered[1].Prompts, []string{"greet"}) {
		t.Errorf("json --list (%v): %s", err, jout)
	}
}

// snakeKeys reports every object key in a JSON document that is not
// snake_case.
func snakeKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("not JSON (%v): %s", err, doc)
	}
	re := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var bad []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !re.MatchString(k) {
					bad = append(bad, k)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return bad
}

// TestJSONKeysAreSnakeCase: check --json (a broken config, a good one,
// --connect --list) and mcp-mux://backends use one key style.
func TestJSONKeysAreSnakeCase(t *testing.T) {
	good := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
	bad := testkit.WriteConfig(t, "bogus_key = 1", []string{"notes", "-name", "notes"})
	for _, args := range [][]string{{"--config", bad}, {"--config", good}, {"--connect", "--list", "--config", good}} {
		out, errOut, _ := runBin(t, testkit.MuxBin(t), append([]string{"check", "--json"}, args...)...)
		if keys := snakeKeys(t, []byte(out)); len(keys) > 0 {
			t.Errorf("check --json %v: keys not in snake_case: %v\n%s%s", args, keys, out, errOut)
		}
	}
	r := runMux(t, good)
	r.backendPIDs(t)
	res, err := r.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	if keys := snakeKeys(t, []byte(res.Contents[0].Text)); len(keys) > 0 {
		t.Errorf("mcp-mux://backends: keys not in snake_case: %v\n%s", keys, res.Contents[0].Text)
	}
}

// TestSessionLogsNoSDKChatter: at log_level info, one session with a
// subscription logs the config, the backend coming up and mux's own
// events, not the go-sdk's connect/initialize/subscribe chatter.
func TestSessionLogsNoSDKChatter(t *testing.T) {
	cfg := testkit.WriteConfig(t, `log_level = "info"`, []string{"notes", "-name", "notes"})
	r := runMux(t, cfg)
	if _, err := r.cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := r.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "fixture://notes/res/1"}); err != nil {
		t.Fatal(err)
	}
	r.stdin.Close()
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("mcp-mux still running 10 s after stdin EOF")
	}
	log := r.stderr.String()
	t.Logf("stderr:\n%s", log)
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "go-sdk:") && strings.Contains(l, "INFO") {
			t.Errorf("go-sdk INFO line: %s", l)
		}
	}
	for _, w := range []string{fmt.Sprintf("config loaded path=%s", cfg), "backend ready backend=notes"} {
		if !strings.Contains(log, w) {
			t.Errorf("missing %q", w)
		}
	}
}

// TestCheckConnectStartsTheOthersWhenOneBackendHasAMistake: an unset
// ${VAR} in one backend (an imported config often has one) costs that
// backend, not the check: every other backend is started and reported,
// the broken one is named with FILE:LINE and why, and the check fails
// because of it.
func TestCheckConnectStartsTheOthersWhenOneBackendHasAMistake(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}, []string{"slack", "-name", "slack"})
	data, _ := os.ReadFile(cfg)
	data = append(data, []byte("env = { SLACK_BOT_TOKEN = \"${"+unsetVar+"}\" }\n")...)
	os.WriteFile(cfg, data, 0o644)
	at := fmt.Sprintf("%s:%d: backend #2 (slack).env.SLACK_BOT_TOKEN: ${%s} is not set", cfg, bytes.Count(data, []byte("\n")), unsetVar)

	out, errOut, code := runBin(t, testkit.MuxBin(t), "check", "--connect", "--config", cfg)
	if code != 1 {
		t.Errorf("exit %d, want 1 (a backend has a mistake)", code)
	}
	if !regexp.MustCompile(`backend notes\n  state +ready\n`).MatchString(out) {
		t.Errorf("notes not started and reported:\n%s\nstderr:\n%s", out, errOut)
	}
	if !regexp.MustCompile(`backend slack\n  state +failed\n  error +` + regexp.QuoteMeta(at)).MatchString(out) {
		t.Errorf("slack not reported failed with %q:\n%s", at, out)
	}
	if !strings.Contains(errOut, "backend notes: ready") || !strings.Contains(errOut, "backend slack: failed: "+at) {
		t.Errorf("progress on stderr lacks notes ready and slack failed at its line:\n%s", errOut)
	}

	jout, _, code := runBin(t, testkit.MuxBin(t), "check", "--connect", "--json", "--config", cfg)
	var rep struct {
		OK       bool `json:"ok"`
		Backends []struct {
			Name      string `json:"name"`
			State     string `json:"state"`
			LastError string `json:"last_error"`
		} `json:"backends"`
		Problems []struct {
			File string `json:"file"`
			Line int    `json:"line"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(jout), &rep); err != nil || code != 1 || rep.OK || len(rep.Backends) != 2 ||
		rep.Backends[0].State != "ready" || rep.Backends[1].State != "failed" || !strings.HasPrefix(rep.Backends[1].LastError, at) ||
		len(rep.Problems) != 1 || rep.Problems[0].File != cfg || rep.Problems[0].Line != bytes.Count(data, []byte("\n")) {
		t.Errorf("json (exit %d, %v):\n%s", code, err, jout)
	}

	// Without --connect check stays strict: nothing is started.
	out, errOut, code = runBin(t, testkit.MuxBin(t), "check", "--config", cfg)
	if code != 1 || out != "" || !strings.Contains(errOut, at) {
		t.Errorf("check without --connect: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestCheckConnectNamesADuplicateByItsPlace: a second backend named like
// the first is named by its place and what it called itself, in the
// progress line and the report, as the instructions name it: never
// "backend backend #2".
func TestCheckConnectNamesADuplicateByItsPlace(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}, []string{"notes", "-name", "again"})
	out, errOut, code := runBin(t, testkit.MuxBin(t), "check", "--connect", "--config", cfg)
	label := `backend #2 ("notes", a duplicate name)`
	if code != 1 || strings.Contains(out+errOut, "backend backend") ||
		!strings.Contains(out, "\n"+label+"\n  state ") || !strings.Contains(errOut, label+": failed: ") {
		t.Errorf("exit %d, want 1 and the duplicate named %s:\nstdout:\n%s\nstderr:\n%s", code, label, out, errOut)
	}
}

// TestCheckConnectFailsOnAMistakeOutsideTheBackends: a mistake in [mux]
// leaves every backend able to start, and still fails the check, by name.
func TestCheckConnectFailsOnAMistakeOutsideTheBackends(t *testing.T) {
	cfg := testkit.WriteConfig(t, `log_level = "loud"`, []string{"notes", "-name", "notes"})
	out, errOut, code := runBin(t, testkit.MuxBin(t), "check", "--connect", "--config", cfg)
	want := cfg + ":3: mux.log_level: must be one of"
	if code != 1 || !regexp.MustCompile(`backend notes\n  state +ready\n`).MatchString(out) || !strings.Contains(out, "ERROR: "+want) {
		t.Errorf("exit %d, want 1, notes ready, and %q on stdout:\n%s\nstderr:\n%s", code, want, out, errOut)
	}
	if strings.Contains(errOut, "warning: "+want) {
		t.Errorf("the mistake is called a warning:\n%s", errOut)
	}
}

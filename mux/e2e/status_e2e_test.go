package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// End-to-end tests of `mcp-mux status`: a stdio mcp-mux, as an agent runs
// it, found through its control endpoint by another mcp-mux process.

// statusDir gives the mcp-mux processes the test starts (and its status
// commands) a control directory of the test's own, so that neither the
// user's nor another test's mcp-mux is seen. It is short: a socket's path
// has about 100 bytes.
func statusDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "mms")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	t.Setenv("MCP_MUX_CONTROL_DIR", filepath.Join(d, "c"))
	return filepath.Join(d, "c")
}

// runStatus runs `mcp-mux status ARGS` and returns its stdout, stderr
// and exit code.
func runStatus(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), append([]string{"status"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// statusRow is the row of backend in status's table, split into fields
// (LAST ERROR is the rest of the line, one field).
func statusRow(out, backend string) []string {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) >= 9 && f[0] == backend {
			return append(f[:8:8], strings.Join(f[8:], " "))
		}
	}
	return nil
}

// TestStatusShowsAStdioMuxItsBackendsAndCounts: status finds the stdio
// mcp-mux the test started, with its config, its agent's session and per
// backend its state, pid, calls, errors and latency, and a failed one's
// error; --json has the same, as one document of the documented shape;
// --pid picks it; once it exited, status says none runs and exits 0.
func TestStatusShowsAStdioMuxItsBackendsAndCounts(t *testing.T) {
	statusDir(t)
	cfg := testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha", "-tools", "echo,ping"}, []string{"beta", "-name", "beta", "-tools", "pong"})
	src, _ := os.ReadFile(cfg)
	src = append(src, "[[backend]]\nname = \"gone\"\ncommand = \"/nonexistent/mcp-server\"\n"...)
	os.WriteFile(cfg, src, 0o644)
	r := runMux(t, cfg)
	ctx := testkit.CtxT(t)
	tools, err := r.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	toolOf := func(backend, name string) string {
		for _, tl := range tools.Tools {
			if strings.HasSuffix(tl.Name, name) && (tl.Name == name || strings.Contains(tl.Name, backend)) {
				return tl.Name
			}
		}
		t.Fatalf("no tool %s of %s in %d tools", name, backend, len(tools.Tools))
		return ""
	}
	for _, name := range []string{"ping", "echo"} {
		if _, err := r.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolOf("alpha", name), Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolOf("alpha", "fail"), Arguments: map[string]any{"code": -32050, "message": "boom"}}); err == nil {
		t.Fatal("fail did not fail")
	}
	if _, err := r.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolOf("beta", "pong"), Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	muxPID := r.cmd.Process.Pid
	abs, _ := filepath.Abs(cfg)

	// The plain table: its backends' pids are those mcp-mux://backends has.
	var out, errOut string
	testkit.Eventually(t, 10*time.Second, "both fixture backends ready in status", func() bool {
		out, errOut, _ = runStatus(t)
		a, b := statusRow(out, "alpha"), statusRow(out, "beta")
		return a != nil && b != nil && a[1] == "ready" && b[1] == "ready"
	})
	if errOut != "" {
		t.Errorf("stderr: %s", errOut)
	}
	if !strings.Contains(out, fmt.Sprintf("mcp-mux pid %d, up ", muxPID)) || !strings.Contains(out, ", config "+abs+"\n") {
		t.Errorf("no line for mcp-mux %d with config %s:\n%s", muxPID, abs, out)
	}
	if !strings.Contains(out, "  session s1: e2e 1 (uses alpha, beta)\n") {
		t.Errorf("the agent's session is not shown:\n%s", out)
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Errorf("escape codes off a terminal:\n%q", out)
	}
	pids := pidsByName(t, r)
	alpha, beta, gone := statusRow(out, "alpha"), statusRow(out, "beta"), statusRow(out, "gone")
	// BACKEND STATE PID RESTARTS CALLS ERRORS P50 P95 LAST-ERROR
	if alpha == nil || atoi(alpha[2]) != pids["alpha"] || pids["alpha"] == 0 || alpha[3] != "0" || alpha[4] != "3" || alpha[5] != "1" ||
		!strings.HasSuffix(alpha[6], "ms") || !strings.HasSuffix(alpha[7], "ms") || alpha[8] != "-" {
		t.Errorf("alpha's row %q, want ready, pid %v, 3 calls, 1 error, latencies:\n%s", alpha, pids, out)
	}
	if beta == nil || atoi(beta[2]) != pids["beta"] || pids["beta"] == 0 || beta[4] != "1" || beta[5] != "0" {
		t.Errorf("beta's row %q, want its own pid, 1 call, 0 errors:\n%s", beta, out)
	}
	// Its error is cut to the column's width (with Windows' longer
	// temporary paths, before "not found"; --json has it whole).
	if gone == nil || gone[1] != "failed" || gone[2] != "-" || gone[4] != "0" || gone[6] != "-" || !strings.Contains(gone[8], "(gone).command: command") {
		t.Errorf("gone's row %q, want failed, no pid, no calls, why:\n%s", gone, out)
	}

	// --json: one document, every field named as the README says.
	js, _, code := runStatus(t, "--json")
	if code != 0 {
		t.Fatalf("status --json exited %d", code)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("status --json is not one JSON document: %v\n%s", err, js)
	}
	procs, _ := doc["processes"].([]any)
	if doc["version"] != 1.0 || len(procs) != 1 {
		t.Fatalf("status --json: %s", js)
	}
	p := procs[0].(map[string]any)
	wantKeys(t, "process", p, "version", "pid", "config", "started", "uptime_seconds", "threads", "sessions", "backends")
	if p["pid"] != float64(muxPID) || p["config"] != abs || p["uptime_seconds"].(float64) < 0 {
		t.Errorf("process %v", p)
	}
	sessions := p["sessions"].([]any)
	if len(sessions) != 1 || sessions[0].(map[string]any)["client"] != "e2e 1" || sessions[0].(map[string]any)["id"] != "s1" {
		t.Errorf("sessions %v", sessions)
	}
	bs := p["backends"].([]any)
	var names []string
	for _, b := range bs {
		names = append(names, b.(map[string]any)["name"].(string))
	}
	if !slices.Equal(names, []string{"alpha", "beta", "gone"}) {
		t.Fatalf("backends %v, want in config order", names)
	}
	a := bs[0].(map[string]any)
	wantKeys(t, "backend", a, "name", "state", "since", "pid", "restarts", "calls", "errors", "p50_ms", "p95_ms")
	if a["state"] != "ready" || a["calls"] != 3.0 || a["errors"] != 1.0 || a["p50_ms"].(float64) <= 0 || a["p95_ms"].(float64) < a["p50_ms"].(float64) {
		t.Errorf("alpha %v", a)
	}
	g := bs[2].(map[string]any)
	if g["state"] != "failed" || !strings.Contains(fmt.Sprint(g["last_error"]), "not found") {
		t.Errorf("gone %v", g)
	}

	// --pid picks it; a pid with no mcp-mux is an error.
	if out, _, code := runStatus(t, "--pid", strconv.Itoa(muxPID)); code != 0 || statusRow(out, "alpha") == nil {
		t.Errorf("status --pid %d: exit %d\n%s", muxPID, code, out)
	}
	if _, errOut, code := runStatus(t, "--pid", strconv.Itoa(os.Getpid())); code != 1 || !strings.Contains(errOut, fmt.Sprintf("no mcp-mux of yours with pid %d is running", os.Getpid())) {
		t.Errorf("status --pid of no mcp-mux: exit %d, stderr %q", code, errOut)
	}

	// The agent goes away: mcp-mux exits and takes its endpoint along.
	r.stdin.Close()
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("mcp-mux still running 10 s after stdin EOF")
	}
	out, errOut, code = runStatus(t)
	if code != 0 || out != "no mcp-mux is running\n" || errOut != "" {
		t.Errorf("status with none running: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if js, _, _ := runStatus(t, "--json"); strings.Join(strings.Fields(js), "") != `{"version":1,"processes":[]}` {
		t.Errorf("status --json with none running: %s", js)
	}
}

// pidsByName reads the backends' pids from mcp-mux://backends.
func pidsByName(t *testing.T, r *running) map[string]int {
	t.Helper()
	res, err := r.cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Backends []struct {
			Name string `json:"name"`
			PID  int    `json:"pid"`
		} `json:"backends"`
	}
	json.Unmarshal([]byte(res.Contents[0].Text), &v)
	pids := map[string]int{}
	for _, b := range v.Backends {
		pids[b.Name] = b.PID
	}
	return pids
}

// wantKeys fails t unless obj has every one of keys.
func wantKeys(t *testing.T, what string, obj map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			t.Errorf("%s has no %q: %v", what, k, obj)
		}
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestServingRunsOnOneThreadUnlessGOMAXPROCSSays: a serving mcp-mux runs
// its Go code on one thread (threads.go), as status shows; GOMAXPROCS in
// its environment wins. Its backends' environment is not touched: the
// fixture sees no GOMAXPROCS (mcp-mux's own is not among what a backend
// inherits, and the one thread is not set through the environment).
func TestServingRunsOnOneThreadUnlessGOMAXPROCSSays(t *testing.T) {
	statusDir(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx", "-env-tool"})
	for _, tc := range []struct {
		env  []string
		want float64
	}{{nil, 1}, {[]string{"GOMAXPROCS=3"}, 3}} {
		t.Setenv("GOMAXPROCS", "") // the test's own, if any, is not mcp-mux's
		os.Unsetenv("GOMAXPROCS")
		r := runMuxEnv(t, cfg, tc.env...)
		res, err := r.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "fx__env", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("env: %v %+v", err, res)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; strings.Contains(text, "GOMAXPROCS") {
			t.Errorf("with %v the backend's environment is %s", tc.env, text)
		}
		js, _, code := runStatus(t, "--json", "--pid", strconv.Itoa(r.cmd.Process.Pid))
		var doc struct {
			Processes []map[string]any `json:"processes"`
		}
		if code != 0 || json.Unmarshal([]byte(js), &doc) != nil || len(doc.Processes) != 1 {
			t.Fatalf("status --json: exit %d\n%s", code, js)
		}
		if got := doc.Processes[0]["threads"]; got != tc.want {
			t.Errorf("with %v in its environment, mcp-mux runs on %v threads, want %v", tc.env, got, tc.want)
		}
		r.stdin.Close()
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("mcp-mux still running 10 s after stdin EOF")
		}
	}
}

package agents_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// runTimeout bounds one agent run: its start, the servers', two or three
// model turns and its exit.
const runTimeout = 90 * time.Second

// plan is the fake model's script of a run: call the target tool (found
// by its description, whatever the agent named it), or, where only
// mcp-mux's search_tools is offered, search for it and call what was
// found; then end the turn with text.
type plan struct {
	target func(testkit.ModelTool) bool
	args   map[string]any
	query  string // search_tools' query

	mu    sync.Mutex
	step  string
	steps []string  // what the model did, in order
	ended time.Time // when it ended the turn
}

const endText = "All done."

func (p *plan) script(turn int, reqs []*testkit.ModelRequest) testkit.ModelReply {
	p.mu.Lock()
	defer p.mu.Unlock()
	req := reqs[turn]
	end := func(why string) testkit.ModelReply {
		p.steps = append(p.steps, why)
		p.ended = time.Now()
		return testkit.ModelReply{Text: endText}
	}
	call := func(step string, tl testkit.ModelTool, args map[string]any) testkit.ModelReply {
		p.step = step
		p.steps = append(p.steps, step+" "+tl.Name)
		return testkit.ModelReply{Call: &testkit.ModelCall{Namespace: tl.Namespace, Name: tl.Name, Args: args}}
	}
	if turn >= 5 {
		return end("gave up")
	}
	target, hasTarget := find(req.Tools, p.target)
	search, hasSearch := find(req.Tools, func(tl testkit.ModelTool) bool { return strings.HasSuffix(tl.Name, "search_tools") })
	wrapper, hasWrapper := find(req.Tools, func(tl testkit.ModelTool) bool {
		return strings.HasSuffix(tl.Name, "call_tool") && !strings.HasSuffix(tl.Name, "read_only_tool")
	})
	switch p.step {
	case "":
		switch {
		case hasTarget:
			return call("call", target, p.args)
		case hasSearch:
			return call("search", search, map[string]any{"query": p.query})
		}
		return end("no target tool and no search_tools")
	case "search":
		found := foundName(req.Results)
		switch {
		case hasTarget:
			return call("call found", target, p.args)
		case hasWrapper && found != "":
			return call("call_tool", wrapper, map[string]any{"name": found, "arguments": p.args})
		}
		return end(fmt.Sprintf("dead end after search_tools (found %q; call_tool offered: %v)", found, hasWrapper))
	case "call_tool":
		// A wrapper that says to call the tool by its name: the model tries,
		// if the agent offers it under one.
		if hasTarget && len(req.Results) > 0 && strings.Contains(req.Results[len(req.Results)-1], "by its name") {
			return call("call by name", target, p.args)
		}
	}
	return end("end")
}

// find is the first tool of tools that f accepts.
func find(tools []testkit.ModelTool, f func(testkit.ModelTool) bool) (testkit.ModelTool, bool) {
	for _, tl := range tools {
		if f(tl) {
			return tl, true
		}
	}
	return testkit.ModelTool{}, false
}

// foundName is the name search_tools gave the echo tool, as a model reads
// it from the result.
func foundName(results []string) string {
	if len(results) == 0 {
		return ""
	}
	res := results[len(results)-1]
	loc := regexp.MustCompile(`[A-Za-z0-9_.-]*server-everything[A-Za-z0-9_.-]*echo\b`).FindStringIndex(res)
	if loc == nil {
		return ""
	}
	// In a result the agent JSON-escaped (Gemini's), "\n" before the name
	// is not part of it.
	if loc[0] > 0 && res[loc[0]-1] == '\\' {
		loc[0]++
	}
	return res[loc[0]:loc[1]]
}

// ran is what one run of an agent gave.
type ran struct {
	label  string // direct, mux cold, mux warm
	turns  []*testkit.ModelRequest
	side   int
	steps  []string
	exitMs int64    // from the model's last reply to the last process of the run gone
	left   []string // processes of the run still there 10 s after the agent exited
	err    error
	output string // the agent's stdout and stderr, for a failure's message
}

// first is the run's first turn (an empty one if there was none).
func (r *ran) first() *testkit.ModelRequest {
	if len(r.turns) == 0 {
		return &testkit.ModelRequest{}
	}
	return r.turns[0]
}

// lastResult is the last tool result the model got, as the agent's result
// rule normalizes it.
func (r *ran) lastResult(a agent) string {
	if len(r.turns) == 0 {
		return ""
	}
	res := r.turns[len(r.turns)-1].Results
	if len(res) == 0 {
		return ""
	}
	return a.result(res[len(res)-1])
}

// runAgent runs a with srvs (registered in its own config) for one prompt,
// in dir, the run's own directory, whose path marks every process of the
// run.
func runAgent(t *testing.T, a agent, label, dir string, srvs []server, p *plan) *ran {
	t.Helper()
	bin := needModule(t, "agents", ".bin/"+a.bin)
	r := &ran{label: label}
	model := a.model(t, p.script)
	home, work, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{home, work, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args, env, err := a.setup(home, work, model.URL, srvs, "Echo agents-suite with the echo tool, then say done.")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := agentCommand(ctx, bin, dir, home, work, tmp, args, env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	r.err = cmd.Run()
	exited := time.Now()
	if ctx.Err() != nil {
		r.err = fmt.Errorf("%s did not finish in %v: %w", a.name, runTimeout, r.err)
	}
	r.output = out.String()
	r.turns = model.Turns()
	r.side = len(model.Side())
	p.mu.Lock()
	r.steps = append([]string(nil), p.steps...)
	ended := p.ended
	p.mu.Unlock()
	if ended.IsZero() {
		ended = exited
	}
	gone := testkit.Poll(10*time.Second, func() bool { return len(leftovers(dir)) == 0 })
	r.exitMs = time.Since(ended).Milliseconds()
	if !gone {
		r.left = leftovers(dir)
		r.exitMs = -1
		killAll(dir)
	}
	if r.err != nil && !errors.Is(r.err, context.DeadlineExceeded) {
		t.Logf("%s %s: %v", a.name, label, r.err)
	}
	return r
}

// agentCommand is one run of the agent at bin (args and env from its
// setup) in work, with its own HOME and TMPDIR, every process it starts
// marked with dir.
func agentCommand(ctx context.Context, bin, dir, home, work, tmp string, args, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = work
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp, "TERM=dumb", "NO_COLOR=1",
		"LANG=C.UTF-8", markerEnv + "=" + dir}, env...)
	// A process group of its own: a run past its deadline ends with
	// whatever it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// killAll ends what a run left behind, so that one failed check does not
// leave processes for the next.
func killAll(dir string) {
	for _, l := range leftovers(dir) {
		var pid int
		fmt.Sscan(l, &pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

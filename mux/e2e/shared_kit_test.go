package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/control"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// sharedDirs gives the test a shared mcp-mux of its own: its own
// rendezvous and control directories, and sessions that ask to share.
func sharedDirs(t *testing.T) {
	t.Helper()
	base := "/tmp" // a unix socket's path must be short
	if runtime.GOOS == "windows" {
		base = ""
	}
	d, err := os.MkdirTemp(base, "sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCP_MUX_CONTROL_DIR", filepath.Join(d, "c"))
	t.Setenv("MCP_MUX_RUN_DIR", filepath.Join(d, "r"))
	t.Setenv("MCP_MUX_SHARED", "1")
	t.Cleanup(func() {
		// Whatever the test left: no shared process of its own outlives it.
		for _, doc := range sharedProcs(t) {
			killProcess(doc.PID)
		}
		os.RemoveAll(d)
	})
}

// sharedSession is one agent's mcp-mux session, launched as an agent
// launches it, with a go-sdk client.
type sharedSession struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	cs     *mcp.ClientSession
	stderr *testkit.SyncBuffer
	exited chan struct{} // closed once the process is reaped (cmd.Wait, called once)
}

func startShared(t *testing.T, cfg, dir string, env []string, opts *mcp.ClientOptions, roots ...string) *sharedSession {
	t.Helper()
	return startSharedAt(t, "2025-11-25", cfg, dir, env, opts, roots...)
}

// startSharedAt is startShared with a client of protocol version ("" for
// the current era, as the go-sdk's client probes it).
func startSharedAt(t *testing.T, version, cfg, dir string, env []string, opts *mcp.ClientOptions, roots ...string) *sharedSession {
	t.Helper()
	return startSharedArgs(t, version, []string{"--config", cfg}, dir, env, opts, roots...)
}

// startSharedArgs is startSharedAt with mcp-mux's command line.
func startSharedArgs(t *testing.T, version string, args []string, dir string, env []string, opts *mcp.ClientOptions, roots ...string) *sharedSession {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	s := &sharedSession{cmd: cmd, stdin: stdin, stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.exited) }() // ends with the process, which the cleanup ends
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-s.exited
		}
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	for _, r := range roots {
		c.AddRoots(&mcp.Root{URI: r})
	}
	cs, err := c.Connect(testkit.CtxT(t), &mcp.IOTransport{Reader: stdout, Writer: nopClose{stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	return s
}

// end ends the session as an agent does: its stdin closes.
func (s *sharedSession) end(t *testing.T) {
	t.Helper()
	s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the session process did not end in 10 s after stdin closed\nstderr:\n%s", s.stderr)
	}
}

func (s *sharedSession) call(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	res, err := s.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", tool, err, s.stderr)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s: %+v", tool, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// wantCwd checks that the backend of tool (one that says its working
// directory) runs, for each session, in the directory given.
func wantCwd(t *testing.T, tool string, dirs map[*sharedSession]string) {
	t.Helper()
	for s, want := range dirs {
		got := s.call(t, tool, nil)
		if r, _ := filepath.EvalSymlinks(want); got != want && got != r {
			t.Errorf("%s runs in %s, want its session's %s", tool, got, want)
		}
	}
}

// sharedProcs is the shared processes `mcp-mux status` finds.
func sharedProcs(t *testing.T) []*control.Document {
	t.Helper()
	out, _ := exec.Command(testkit.MuxBin(t), "status", "--json").Output()
	var rep struct {
		Processes []*control.Document `json:"processes"`
	}
	json.Unmarshal(out, &rep)
	var docs []*control.Document
	for _, d := range rep.Processes {
		if d.Shared {
			docs = append(docs, d)
		}
	}
	return docs
}

func onlyShared(t *testing.T) *control.Document {
	t.Helper()
	docs := sharedProcs(t)
	if len(docs) != 1 {
		t.Fatalf("%d shared processes, want 1: %+v", len(docs), docs)
	}
	return docs[0]
}

// startSharedAtOnce starts n sessions of cfg in dir at once, has each
// call the fixture fx's echo, and checks that the one shared process
// status shows has them all: it returns them and that process's document.
func startSharedAtOnce(t *testing.T, n int, cfg, dir string) ([]*sharedSession, *control.Document) {
	t.Helper()
	sessions := make([]*sharedSession, n)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() { sessions[i] = startShared(t, cfg, dir, nil, nil) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, s := range sessions {
		if got := s.call(t, "fx__echo", map[string]any{"n": i}); !strings.Contains(got, fmt.Sprint(i)) {
			t.Errorf("session %d's echo: %q", i, got)
		}
	}
	doc := onlyShared(t)
	var pids []int
	for _, s := range doc.Sessions {
		pids = append(pids, s.PID)
	}
	for _, s := range sessions {
		if !slices.Contains(pids, s.cmd.Process.Pid) {
			t.Errorf("status does not show session process %d: %v", s.cmd.Process.Pid, pids)
		}
	}
	return sessions, doc
}

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// rememberingMux is mcp-mux with server-everything as its backend ev, its
// catalogs remembered in a directory of the test's: each session runs a
// new mcp-mux process on the same memory.
type rememberingMux struct {
	ix       *interop
	cfg      string
	catalogs string
}

func newRememberingMux(t *testing.T, ix *interop) *rememberingMux {
	return &rememberingMux{ix: ix, cfg: ix.muxConfig(t, ix.backendTOML(t, serverEverything, "")),
		catalogs: filepath.Join(t.TempDir(), "catalogs")}
}

// session starts mcp-mux and connects c, an agent, to it.
func (r *rememberingMux) session(t *testing.T, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), "-c", r.cfg)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+r.catalogs)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// remembered waits until ev's catalog is in the memory: it is written
// apart from the lists.
func (r *rememberingMux) remembered(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "ev's catalog in the memory", func() bool {
		files, _ := filepath.Glob(filepath.Join(r.catalogs, "*.json"))
		return len(files) > 0
	})
}

// direct connects c to server-everything itself.
func (ix *interop) direct(t *testing.T, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(ix.node, append([]string{ix.script(serverEverything)}, serverEverything.args...)...)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolsOf is what cs lists, with prefix taken off, sorted.
func toolsOf(t *testing.T, cs *mcp.ClientSession, prefix string) []string {
	t.Helper()
	var out []string
	for _, n := range listedTools(t, cs) {
		if rest, ok := strings.CutPrefix(n, prefix); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out
}

func agentWith(caps *mcp.ClientCapabilities) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "some-agent", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
}

// server-everything lists trigger-sampling-request,
// trigger-elicitation-request and trigger-url-elicitation only to a client
// with sampling, elicitation and its url mode: after a session by an agent
// without them, a new mcp-mux on the same memory lists to an agent with
// them what server-everything lists it directly.
func TestInteropARememberedCatalogIsTheOneForTheAgentsCapabilities(t *testing.T) {
	ix := interopSetup(t)
	rm := newRememberingMux(t, ix)
	without := &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}}
	with := &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}, Sampling: &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
	want := toolsOf(t, ix.direct(t, agentWith(with)), "")
	for _, tool := range []string{"trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation"} {
		if !slices.Contains(want, tool) {
			t.Fatalf("server-everything does not list %s to a client with sampling and elicitation: %v", tool, want)
		}
	}

	first := rm.session(t, agentWith(without))
	if got, direct := toolsOf(t, first, "ev__"), toolsOf(t, ix.direct(t, agentWith(without)), ""); !slices.Equal(got, direct) {
		t.Fatalf("first session, without sampling and elicitation:\n got %v\nwant %v", got, direct)
	}
	rm.remembered(t)
	first.Close()

	start := time.Now()
	second := rm.session(t, agentWith(with))
	if got := toolsOf(t, second, "ev__"); !slices.Equal(got, want) {
		t.Fatalf("an agent with sampling and elicitation, after one without:\n got %v\nwant %v (directly)", got, want)
	}
	t.Logf("spawn → first tools/list, capabilities not remembered (ev starts): %v", time.Since(start))
	testkit.Eventually(t, 20*time.Second, "both catalogs in the memory", func() bool {
		data, _ := os.ReadFile(rm.file(t))
		return strings.Contains(string(data), `"others"`)
	})
	second.Close()

	// Both are remembered now: the agent with them lists from memory.
	start = time.Now()
	third := rm.session(t, agentWith(with))
	if got := toolsOf(t, third, "ev__"); !slices.Equal(got, want) {
		t.Fatalf("the agent with sampling and elicitation again:\n got %v\nwant %v (directly)", got, want)
	}
	t.Logf("spawn → first tools/list, capabilities remembered: %v", time.Since(start))
	if b := readBackends(t, third).Backends[0]; b.State != "remembered" {
		t.Errorf("ev is %q for an agent whose capabilities were seen: want it at rest, remembered", b.State)
	}
}

// file is ev's file in the memory.
func (r *rememberingMux) file(t *testing.T) string {
	t.Helper()
	// ev has no cwd: it is remembered for this directory, and for any.
	files, _ := filepath.Glob(filepath.Join(r.catalogs, "*.json"))
	if len(files) != 2 {
		t.Fatalf("the memory holds %v, want ev's two files", files)
	}
	return files[0]
}

// A call that starts a remembered backend, with a progress token: the
// agent gets under its token what server-everything sends directly, the
// same values in the same order, each greater than the last.
func TestInteropProgressOfACallThatStartsItsBackendIsTheBackendsOwn(t *testing.T) {
	ix := interopSetup(t)
	rm := newRememberingMux(t, ix)
	learn := rm.session(t, agentWith(nil))
	listedTools(t, learn)
	rm.remembered(t)
	learn.Close()

	call := func(cs *mcp.ClientSession, tool string, got *progressLog) {
		t.Helper()
		p := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"duration": 1.5, "steps": 3}}
		p.SetProgressToken("lro")
		res, err := cs.CallTool(testkit.CtxT(t), p)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		// What came before the response has been handled by now.
		testkit.Eventually(t, 5*time.Second, "three progress notifications", func() bool { return len(got.values()) >= 3 })
	}
	var viaMux, direct progressLog
	cs := rm.session(t, mcp.NewClient(&mcp.Implementation{Name: "some-agent", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: viaMux.handle}))
	for _, b := range readBackends(t, cs).Backends {
		if b.State != "remembered" {
			t.Fatalf("%s is %q before the call: want it at rest, remembered", b.Name, b.State)
		}
	}
	call(cs, "ev__trigger-long-running-operation", &viaMux)
	call(ix.direct(t, mcp.NewClient(&mcp.Implementation{Name: "some-agent", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: direct.handle})),
		"trigger-long-running-operation", &direct)

	got, want := viaMux.values(), direct.values()
	if !slices.Equal(got, want) {
		t.Errorf("progress under the agent's token through mcp-mux %v, directly %v", got, want)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Errorf("progress through mcp-mux goes %v → %v (all: %v): the spec says it MUST increase", got[i-1], got[i], got)
		}
	}
}

// progressLog is the progress values a client got under the token "lro".
type progressLog struct {
	mu sync.Mutex
	v  []float64
}

func (l *progressLog) handle(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	if r.Params.ProgressToken != "lro" {
		return
	}
	l.mu.Lock()
	l.v = append(l.v, r.Params.Progress)
	l.mu.Unlock()
}

func (l *progressLog) values() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.v)
}

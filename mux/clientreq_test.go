package mux

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// clientRequestTools are what the fixture adds with -client-requests,
// besides the gated_* tools it lists per client capability.
var clientRequestTools = []string{"ask_later", "ask_roots", "client_info", "elicit", "sample"}

// connectAgent attaches agent c to m over in-memory transports.
func connectAgent(t testing.TB, m *Mux, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := m.Connect(context.Background(), st); err != nil {
		t.Fatalf("mux connect: %v", err)
	}
	cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func agent(opts *mcp.ClientOptions) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
}

// sampler answers sampling with "<name> says: <prompt>" and counts the calls.
type sampler struct {
	name string
	// asked, if set (before the sampler is connected), is told each
	// prompt as its request comes.
	asked func(prompt string)
	mu    sync.Mutex
	n     int
}

func (s *sampler) handle(_ context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	prompt := ""
	if len(req.Params.Messages) > 0 && len(req.Params.Messages[0].Content) > 0 {
		if tc, ok := req.Params.Messages[0].Content[0].(*mcp.TextContent); ok {
			prompt = tc.Text
		}
	}
	if s.asked != nil {
		s.asked(prompt)
	}
	if len(req.Params.Tools) > 0 {
		return &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: s.name + "-model", StopReason: "toolUse",
			Content: []mcp.Content{&mcp.ToolUseContent{ID: "u1", Name: req.Params.Tools[0].Name, Input: map[string]any{}}}}, nil
	}
	return &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: s.name + "-model",
		Content: []mcp.Content{&mcp.TextContent{Text: s.name + " says: " + prompt}}}, nil
}

func (s *sampler) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// clientInfo is the fixture's client_info result.
type clientInfo struct {
	Capabilities     map[string]json.RawMessage `json:"capabilities"`
	RootsListChanged int                        `json:"roots_list_changed"`
	Roots            string                     `json:"roots"`
}

func fixtureClientInfo(t testing.TB, cs *mcp.ClientSession, tool string) clientInfo {
	t.Helper()
	var ci clientInfo
	if err := json.Unmarshal([]byte(callText(t, cs, tool, nil)), &ci); err != nil {
		t.Fatal(err)
	}
	return ci
}

// toolError calls a tool that must fail and returns its error text.
func toolError(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("calling %s: want a tool error, got %q", name, text(t, res.Content))
	}
	return text(t, res.Content)
}

func TestBackendRootsListReachesAgentAndListChangedReachesBackend(t *testing.T) {
	m := startMux(t, fixture(t, "fs", "-client-requests"))
	c := agent(nil) // the go-sdk's default: roots with listChanged
	c.AddRoots(&mcp.Root{URI: "file:///work/a", Name: "a"})
	cs := connectAgent(t, m, c)

	if got := callText(t, cs, "fs__ask_roots", nil); got != "file:///work/a" {
		t.Fatalf("roots/list from the backend got %q, want the agent's roots", got)
	}

	// The agent's list_changed reaches the backend, which asks again with
	// no request of the agent in flight: the only session answers.
	c.AddRoots(&mcp.Root{URI: "file:///work/b", Name: "b"})
	testkit.Eventually(t, 5*time.Second, "the backend to see the new roots", func() bool {
		ci := fixtureClientInfo(t, cs, "fs__client_info")
		return ci.RootsListChanged == 1 && ci.Roots == "file:///work/a,file:///work/b"
	})
}

func TestSamplingInsideToolCallReachesOnlyTheCallingSession(t *testing.T) {
	m := startMux(t, fixture(t, "llm", "-client-requests"))
	a, b := &sampler{name: "A"}, &sampler{name: "B"}
	// Whether B's ping was answered before A's second sampling request
	// came: if not, the request did not wait with B the most recent.
	var pinged, pingedFirst atomic.Bool
	a.asked = func(prompt string) {
		if prompt == "again" {
			pingedFirst.Store(pinged.Load())
		}
	}
	csA := connectAgent(t, m, agent(&mcp.ClientOptions{CreateMessageWithToolsHandler: a.handle}))
	csB := connectAgent(t, m, agent(&mcp.ClientOptions{CreateMessageWithToolsHandler: b.handle}))

	if got := callText(t, csA, "llm__sample", map[string]any{"prompt": "hi"}); got != "A says: hi model=A-model" {
		t.Fatalf("A's sampling: got %q", got)
	}
	// B was active last, yet the request inside A's call went to A.
	if got := callText(t, csB, "llm__sample", map[string]any{"prompt": "yo", "tools": true}); got != "tool_use:lookup model=B-model" {
		t.Fatalf("B's sampling with tools: got %q", got)
	}
	// B becomes the most recently active session while A's call waits to
	// sample: the request still belongs to A's call. (The stats calls
	// that see the call arrive are B's too.)
	done := make(chan string, 1)
	called := arrived(t, csB, "llm__stats")
	go func() {
		res, err := csA.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "llm__sample", Arguments: map[string]any{"prompt": "again", "delay_ms": 1000}})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- text(t, res.Content)
	}()
	testkit.Eventually(t, 5*time.Second, "A's call to be at the backend", called)
	if err := csB.Ping(testkit.CtxT(t), nil); err != nil {
		t.Fatal(err)
	}
	pinged.Store(true)
	if got := <-done; got != "A says: again model=A-model" {
		t.Fatalf("A's second sampling: got %q", got)
	}
	if !pingedFirst.Load() {
		t.Fatal("A's sampling request came before B's ping was answered: the delay_ms of 1 s was too short for this machine, and the test checked nothing")
	}
	if a.calls() != 2 || b.calls() != 1 {
		t.Fatalf("sampling requests seen: A %d, B %d; want 2 and 1", a.calls(), b.calls())
	}
}

func TestSamplingForAgentWithoutCapabilityGetsJSONRPCError(t *testing.T) {
	m := startMux(t, fixture(t, "llm", "-client-requests"))
	a := &sampler{name: "A"}
	connectAgent(t, m, agent(&mcp.ClientOptions{CreateMessageWithToolsHandler: a.handle}))
	plain := connectAgent(t, m, agent(nil))

	got := toolError(t, plain, "llm__sample", map[string]any{"prompt": "hi"})
	if !strings.HasPrefix(got, "error -32603: ") || !strings.Contains(got, "did not declare the sampling capability") {
		t.Fatalf("the backend got %q; want a JSON-RPC error naming the missing capability", got)
	}
	if a.calls() != 0 {
		t.Fatalf("the other session, which has sampling, got the request (%d calls)", a.calls())
	}
}

func TestElicitationFormAndURLModesThroughMux(t *testing.T) {
	m := startMux(t, fixture(t, "ask", "-client-requests"))
	completed := make(chan string, 1)
	var mu sync.Mutex
	var seen []string
	cs := connectAgent(t, m, agent(&mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			seen = append(seen, req.Params.Mode+" "+req.Params.Message+" "+req.Params.URL+" "+req.Params.ElicitationID)
			mu.Unlock()
			if req.Params.Mode == "url" {
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			completed <- req.Params.ElicitationID
		},
	}))

	if got := callText(t, cs, "ask__elicit", map[string]any{"mode": "form", "message": "Your name?"}); got != `{"action":"accept","content":{"name":"Ada"}}` {
		t.Fatalf("form elicitation: got %s", got)
	}
	if got := callText(t, cs, "ask__elicit", map[string]any{"mode": "url", "message": "Sign in", "url": "https://example.com/login", "id": "el-1"}); got != `{"action":"accept","content":null}` {
		t.Fatalf("url elicitation: got %s", got)
	}
	select {
	case id := <-completed:
		if id != "el-1" {
			t.Fatalf("elicitation/complete for %q, want el-1", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("notifications/elicitation/complete never reached the agent")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"form Your name?  ", "url Sign in https://example.com/login el-1"}
	if !slices.Equal(seen, want) {
		t.Fatalf("the agent saw %q, want %q", seen, want)
	}
}

func TestElicitationAnsweredAfterRequestTimeoutStillCompletesTheCall(t *testing.T) {
	cfg := testConfig(fixture(t, "ask", "-client-requests"))
	cfg.Mux.RequestTimeout.Duration = 300 * time.Millisecond
	m := startMuxConfig(t, cfg)
	cs := connectAgent(t, m, agent(&mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			select { // a human taking their time
			case <-time.After(time.Second):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	}))
	if got := callText(t, cs, "ask__elicit", map[string]any{"mode": "form", "message": "Sure?"}); got != `{"action":"decline","content":null}` {
		t.Fatalf("got %s", got)
	}
	// The deadline runs again once the agent answered.
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "ask__sleep", Arguments: map[string]any{"ms": 2000}})
	if err == nil {
		t.Fatalf("a 2 s call with a 300 ms request_timeout succeeded: %v", text(t, res.Content))
	}
}

// directTools lists what the fixture offers a client with caps directly.
func directTools(t *testing.T, caps *mcp.ClientCapabilities) []string {
	t.Helper()
	c := agent(&mcp.ClientOptions{Capabilities: caps})
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: exec.Command(testkit.FixtureBin(t), "-name", "direct", "-client-requests")}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	return sortedTools(t, cs, "")
}

func sortedTools(t *testing.T, cs *mcp.ClientSession, prefix string) []string {
	t.Helper()
	var out []string
	for _, n := range toolNames(t, cs) {
		if rest, ok := strings.CutPrefix(n, prefix); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out
}

func TestBackendOffersThroughMuxWhatItOffersTheAgentDirectly(t *testing.T) {
	cases := map[string]*mcp.ClientCapabilities{
		"none":     {},
		"roots":    {RootsV2: &mcp.RootCapabilities{ListChanged: true}},
		"sampling": {Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}},
		"all":      {RootsV2: &mcp.RootCapabilities{}, Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
	}
	for name, caps := range cases {
		t.Run(name, func(t *testing.T) {
			want := directTools(t, caps)
			m := startMux(t, fixture(t, "ev", "-client-requests"))
			cs := connectAgent(t, m, agent(&mcp.ClientOptions{Capabilities: caps}))
			if got := sortedTools(t, cs, "ev__"); !slices.Equal(got, want) {
				t.Fatalf("through mux:\n got %v\nwant %v (directly)", got, want)
			}
			ci := fixtureClientInfo(t, cs, "ev__client_info")
			var wantCaps map[string]json.RawMessage
			if err := json.Unmarshal([]byte(capsKey(caps)), &wantCaps); err != nil {
				t.Fatal(err)
			}
			told, _ := json.Marshal(ci.Capabilities)
			if w, _ := json.Marshal(wantCaps); string(told) != string(w) {
				t.Fatalf("the backend was told %s, want %s", told, w)
			}
		})
	}
}

// A backend started before any agent was told every capability mux
// forwards: a late agent with sampling finds its tools listed and its
// sampling answered, with no restart.
func TestLateAgentNeedsNoRestart(t *testing.T) {
	m := New(testConfig(fixture(t, "ev", "-client-requests")), testLogger(t), "test")
	m.agent.wait = 100 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	testkit.Eventually(t, 10*time.Second, "the backend to be ready without an agent", func() bool { return m.Status()[0].Ready() })
	pid := m.Status()[0].PID

	s := &sampler{name: "A"}
	cs := connectAgent(t, m, agent(&mcp.ClientOptions{CreateMessageWithToolsHandler: s.handle}))
	testkit.Eventually(t, 10*time.Second, "the backend to list its sampling tool", func() bool {
		return slices.Contains(toolNames(t, cs), "ev__gated_sampling")
	})
	if st := m.Status()[0]; st.PID != pid || st.Restarts != 0 {
		t.Fatalf("after the agent came: pid %d (was %d), restarts %d; want the same process", st.PID, pid, st.Restarts)
	}
	if got := callText(t, cs, "ev__sample", map[string]any{"prompt": "hi"}); got != "A says: hi model=A-model" {
		t.Fatalf("sampling by the late agent: got %q", got)
	}
}

func TestAgentInitializeWithinWaitNeedsNoRestart(t *testing.T) {
	m := startMux(t, fixture(t, "ev", "-client-requests"))
	start := time.Now()
	cs := connectAgent(t, m, agent(&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}}))
	if !slices.Contains(toolNames(t, cs), "ev__gated_sampling") {
		t.Fatal("the first tools/list lacks the tool the backend offers to clients with sampling")
	}
	t.Logf("connect + first tools/list: %s", time.Since(start))
	if st := m.Status()[0]; st.Restarts != 0 {
		t.Fatalf("restarts %d, want 0", st.Restarts)
	}
}

func TestCheckConnectDeclaresNoClientCapabilities(t *testing.T) {
	start := time.Now()
	r := Inspect(testkit.CtxT(t), testConfig(fixture(t, "ev", "-client-requests")), testLogger(t), "test")
	took := time.Since(start)
	if !r.OK {
		t.Fatalf("check failed: %+v", r)
	}
	// No gated_* tool: the backend was told no capabilities.
	if want := len(controlTools) + 1 + len(clientRequestTools); r.Backends[0].Tools != want {
		t.Fatalf("check saw %d tools, want %d (none of the capability-gated ones)", r.Backends[0].Tools, want)
	}
	if took >= defaultAgentWait {
		t.Fatalf("check took %s: it waited for an agent that never comes", took)
	}
}

package mux

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Multi-round-trip translation (rounds.go) beyond one round: several
// rounds in one call, a retry that never comes, and agents whose rounds
// must never cross.

// manualAgent is an agent of the current era that answers input_required
// itself, round by round (the go-sdk's automatic retry is off), so a test
// sees every round.
func manualAgent(t *testing.T, name string) *mcp.Client {
	t.Helper()
	return mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		// Declared, so that backends ask; answered by the test.
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			t.Error("the go-sdk answered an input request itself")
			return nil, nil
		},
		CreateMessageWithToolsHandler: func(context.Context, *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			t.Error("the go-sdk answered an input request itself")
			return nil, nil
		},
	})
}

// answers is what a manual agent answers each kind of input request with.
func answers(name string, reqs mcp.InputRequestMap) (mcp.InputResponseMap, []string) {
	out := mcp.InputResponseMap{}
	var kinds []string
	for id, r := range reqs {
		switch r.(type) {
		case *mcp.ElicitParams:
			kinds = append(kinds, "elicit")
			out[id] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}
		case *mcp.CreateMessageWithToolsParams, *mcp.CreateMessageParams:
			kinds = append(kinds, "sample")
			out[id] = &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: eraModel, Content: []mcp.Content{&mcp.TextContent{Text: eraSampled}}}
		case *mcp.ListRootsParams:
			kinds = append(kinds, "roots")
			out[id] = &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: eraRoot}}}
		}
	}
	return out, kinds
}

// callInRounds calls tool and answers every round with answers(name),
// returning the final text, the kinds asked in each round and the
// requestStates the agent got.
func callInRounds(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, name string) (string, [][]string, []string) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	var rounds [][]string
	var states []string
	for range 10 {
		res, err := cs.CallTool(testkit.CtxT(t), p)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if !res.NeedsInput() {
			return text(t, res.Content), rounds, states
		}
		responses, kinds := answers(name, res.InputRequests)
		rounds = append(rounds, kinds)
		states = append(states, res.RequestState)
		p = &mcp.CallToolParams{Name: tool, Arguments: args, InputResponses: responses, RequestState: res.RequestState}
	}
	t.Fatalf("%s: still asking after 10 rounds", tool)
	return "", nil, nil
}

func TestSeveralRoundsOfInputInOneCall(t *testing.T) {
	auto := fixture(t, "be", "-mrtr")
	auto.Protocol = "auto"
	m := startMux(t, fixture(t, "old", "-mrtr"), auto)

	t.Run("handshake backend, current agent", func(t *testing.T) {
		cs := connectWith(t, m, manualAgent(t, "a"), currentEraV)
		got, rounds, states := callInRounds(t, cs, "old__ask_in_turn", nil, "Ada")
		if want := "name=Ada; sample=" + eraSampled + "; roots=" + eraRoot; got != want {
			t.Errorf("result %q, want %q", got, want)
		}
		if want := "[[elicit] [sample] [roots]]"; fmtRounds(rounds) != want {
			t.Errorf("rounds %s, want %s", fmtRounds(rounds), want)
		}
		for _, s := range states {
			if !strings.HasPrefix(s, parkedStatePrefix) || s != states[0] {
				t.Errorf("requestStates %q: want one of mux's for the whole call", states)
			}
		}
	})

	t.Run("current backend, current agent", func(t *testing.T) {
		cs := connectWith(t, m, manualAgent(t, "a"), currentEraV)
		got, rounds, states := callInRounds(t, cs, "be__mrtr_rounds", map[string]any{"n": 3}, "Bo")
		if got != "rounds: Bo,Bo,Bo" || len(rounds) != 3 {
			t.Errorf("result %q after %d rounds, want \"rounds: Bo,Bo,Bo\" after 3", got, len(rounds))
		}
		// The backend's own state passes unchanged.
		if len(states) == 3 && (states[0] != "[]" || states[1] != `["Bo"]` || states[2] != `["Bo","Bo"]`) {
			t.Errorf("requestStates %q, want the backend's own", states)
		}
	})

	t.Run("current backend, handshake agent", func(t *testing.T) {
		agent, c := newEraAgent(t)
		agent.cs = connectWith(t, m, c, legacyEra)
		if got := agent.call(t, "be__mrtr_rounds", map[string]any{"n": 3}, nil); got != "rounds: Ada,Ada,Ada" {
			t.Errorf("result %q, want \"rounds: Ada,Ada,Ada\" (mux asking the agent each round)", got)
		}
	})
}

func fmtRounds(r [][]string) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, k := range r {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("[" + strings.Join(k, " ") + "]")
	}
	sb.WriteByte(']')
	return sb.String()
}

// TestARetryThatNeverComesEndsTheBackendsRequest: a current-era agent that
// is asked for input and never retries leaves the backend's request parked
// until max_request_time; then the backend's elicitation fails and its
// call is cancelled.
func TestARetryThatNeverComesEndsTheBackendsRequest(t *testing.T) {
	cfg := testConfig(fixture(t, "old", "-mrtr"))
	cfg.Mux.RequestTimeout.Duration = 300 * time.Millisecond
	cfg.Mux.MaxRequestTime.Duration = time.Second
	m := startMuxConfig(t, cfg)
	cs := connectWith(t, m, manualAgent(t, "a"), currentEraV)
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "old__mrtr_elicit"})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first call: %v, needs input %v", err, res != nil && res.NeedsInput())
	}
	// The request_timeout (300 ms) is paused while the agent is asked; the
	// whole request is bounded by max_request_time (1 s).
	testkit.Eventually(t, 5*time.Second, "the backend's request to be cancelled", func() bool {
		var st struct {
			CancelReasons []string `json:"cancel_reasons"`
		}
		if err := json.Unmarshal([]byte(callText(t, cs, "old__stats", nil)), &st); err != nil {
			t.Fatal(err)
		}
		return len(st.CancelReasons) > 0
	})
	_, err = cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "old__mrtr_elicit",
		InputResponses: mcp.InputResponseMap{"mcp-mux-1": &mcp.ElicitResult{Action: "accept"}}, RequestState: res.RequestState})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("late retry: %v, want the backend's request timed out", err)
	}
}

// TestInputRoundsOfTwoHTTPAgentsNeverCross: two agents over HTTP call the
// same tool of one backend, each is asked, and they answer in the other
// order: each gets its own answer, and neither can use the other's
// requestState.
func TestInputRoundsOfTwoHTTPAgentsNeverCross(t *testing.T) {
	m := startMux(t, fixture(t, "old", "-mrtr"))
	url := serveHTTP(t, m, door.HTTPOptions{SessionIdle: time.Minute, MaxBody: 1 << 20})
	connect := func(name string) *mcp.ClientSession {
		cs, err := manualAgent(t, name).Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatalf("%s: connect: %v", name, err)
		}
		t.Cleanup(func() { cs.Close() })
		if v := cs.InitializeResult().ProtocolVersion; v < modernEra {
			t.Fatalf("%s speaks %s, want the current era", name, v)
		}
		return cs
	}
	a, b := connect("agent-a"), connect("agent-b")
	first := func(cs *mcp.ClientSession) *mcp.CallToolResult {
		res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "old__mrtr_elicit"})
		if err != nil || !res.NeedsInput() {
			t.Fatalf("first call: %v", err)
		}
		return res
	}
	ra, rb := first(a), first(b)
	if ra.RequestState == rb.RequestState {
		t.Fatalf("both agents got requestState %q", ra.RequestState)
	}
	retry := func(cs *mcp.ClientSession, r *mcp.CallToolResult, state, name string) (string, error) {
		responses, _ := answers(name, r.InputRequests)
		res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "old__mrtr_elicit", InputResponses: responses, RequestState: state})
		if err != nil {
			return "", err
		}
		return text(t, res.Content), nil
	}
	if _, err := retry(b, rb, ra.RequestState, "Bo"); err == nil || !strings.Contains(err.Error(), "another agent") {
		t.Errorf("b retrying with a's requestState: %v, want it refused", err)
	}
	if got, err := retry(b, rb, rb.RequestState, "Bo"); err != nil || got != `elicit: accept {"name":"Bo"}` {
		t.Errorf("b: %q %v", got, err)
	}
	if got, err := retry(a, ra, ra.RequestState, "Ada"); err != nil || got != `elicit: accept {"name":"Ada"}` {
		t.Errorf("a: %q %v", got, err)
	}
}

// A call whose backend answered while its agent was being asked for input
// waits for the agent's retry only as long as parkedKeep, as any finished
// call does: it stayed parked for good when it finished before release.
func TestACallThatFinishedWhileTheAgentWasAskedIsForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p parking
		pc := &parkedCall{waiting: true, done: make(chan struct{})}
		pc.cancel = func(error) {}
		// As register leaves it, under the parking's lock.
		p.mu.Lock()
		pc.state, pc.stop = parkedStatePrefix+"test", func() bool { return true }
		p.calls = map[string]*parkedCall{pc.state: pc}
		p.mu.Unlock()
		// The backend answers while the agent's request still holds the
		// call (waiting): forgetLater leaves it to the retry...
		pc.finish(json.RawMessage(`{}`), nil)
		p.forgetLater(pc)
		// ...which now goes out as input_required, releasing the call.
		p.release(pc)
		time.Sleep(parkedKeep - time.Second)
		synctest.Wait()
		if p.count() != 1 {
			t.Fatal("the call was forgotten before its retry had parkedKeep to come")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := p.count(); n != 0 {
			t.Fatalf("%d call(s) still parked past parkedKeep, with no retry to come", n)
		}
	})
}

func (p *parking) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Any instance answers any current-era request, input rounds included
// (README, "Several instances behind a load balancer"): a current-era
// agent's call to a handshake-era backend that asks for input is parked in
// the instance that started it; the agent's retry, with its answers, may
// reach another instance of the same config, which hands it to the holder
// named in the sealed requestState, or tells the agent to start again.

// roundsAgent connects an agent of the current era named name to url that
// answers input_required itself (the go-sdk's automatic retry is off), so
// that a test chooses where each round goes. Agents of one name and token
// are one principal: each may retry the other's calls.
func roundsAgent(t *testing.T, url, token, name string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			t.Error("the go-sdk answered an input request itself")
			return nil, nil
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withBearer{token}}, MaxRetries: -1}
	cs, err := c.Connect(testkit.CtxT(t), tr, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s, want the current era", v)
	}
	return cs
}

// askedName starts old__elicit through cs and returns the input_required
// it gets: the backend's elicitation, and mux's requestState.
func askedName(t *testing.T, cs *mcp.ClientSession) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "old__elicit", Arguments: map[string]any{"mode": "form"}})
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
		t.Fatalf("first call: %v %+v, want input_required with one request and a requestState", err, res)
	}
	return res
}

// retryWith answers every request of asked with name and retries the call
// through cs with state; it returns the result's text.
func retryWith(t *testing.T, cs *mcp.ClientSession, asked *mcp.CallToolResult, state, name string) (string, error) {
	t.Helper()
	responses := mcp.InputResponseMap{}
	for id := range asked.InputRequests {
		responses[id] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "old__elicit", Arguments: map[string]any{"mode": "form"},
		InputResponses: responses, RequestState: state})
	if err != nil {
		return "", err
	}
	if res.NeedsInput() || len(res.Content) == 0 {
		t.Fatalf("retry: %+v, want the tool's result", res)
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// startAgain is the end of the error that tells the agent to start its
// call again (README).
const startAgain = "send the request again without inputResponses and requestState"

func TestARetryOnAnotherInstanceReachesTheCallItAnswers(t *testing.T) {
	const token = "handoff-token"
	cfg := testkit.WriteConfig(t, `http_token = "${MUX_TEST_TOKEN}"`, []string{"old", "-name", "old", "-client-requests"})
	a := startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token)
	b := startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token)

	t.Run("the holder answers the retry", func(t *testing.T) {
		atA, atB := roundsAgent(t, a.url, token, "agent"), roundsAgent(t, b.url, token, "agent")
		asked := askedName(t, atA)
		got, err := retryWith(t, atB, asked, asked.RequestState, "Ada")
		if err != nil {
			t.Fatalf("retry at the other instance: %v\nA:\n%s\nB:\n%s", err, a.stderr, b.stderr)
		}
		var res struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		if json.Unmarshal([]byte(got), &res) != nil || res.Action != "accept" || res.Content["name"] != "Ada" {
			t.Fatalf("retry at the other instance: %q, want the backend to have got the agent's answer", got)
		}
	})

	t.Run("another agent's state is refused by the holder", func(t *testing.T) {
		x, y := roundsAgent(t, a.url, token, "agent-x"), roundsAgent(t, b.url, token, "agent-y")
		asked := askedName(t, x)
		if _, err := retryWith(t, y, asked, asked.RequestState, "Mallory"); err == nil || !strings.Contains(err.Error(), "another agent") {
			t.Fatalf("agent y retrying agent x's call at the other instance: %v, want it refused", err)
		}
		// x's own retry still gets x's call.
		xAtB := roundsAgent(t, b.url, token, "agent-x")
		if got, err := retryWith(t, xAtB, asked, asked.RequestState, "Xena"); err != nil || !strings.Contains(got, "Xena") {
			t.Fatalf("x's retry after y's: %q %v", got, err)
		}
	})

	t.Run("a forged state is refused without a hop", func(t *testing.T) {
		atA, atB := roundsAgent(t, a.url, token, "agent"), roundsAgent(t, b.url, token, "agent")
		asked := askedName(t, atA)
		s := []byte(asked.RequestState)
		i := len(s) / 2
		s[i] ^= 1 // still base64url: one bit of what it names changed
		if _, err := retryWith(t, atB, asked, string(s), "Ada"); err == nil || !strings.Contains(err.Error(), "not this mcp-mux's") || !strings.Contains(err.Error(), startAgain) {
			t.Fatalf("a forged requestState: %v, want %q", err, startAgain)
		}
	})

	t.Run("a state sealed by another config is refused", func(t *testing.T) {
		const other = "another-team-token"
		cfg2 := testkit.WriteConfig(t, `http_token = "${MUX_TEST_TOKEN}"`, []string{"old", "-name", "old", "-client-requests"})
		d := startHTTPMux(t, cfg2, "MUX_TEST_TOKEN="+other)
		asked := askedName(t, roundsAgent(t, d.url, other, "agent"))
		_, err := retryWith(t, roundsAgent(t, b.url, token, "agent"), asked, asked.RequestState, "Ada")
		if err == nil || !strings.Contains(err.Error(), "not this mcp-mux's") || !strings.Contains(err.Error(), startAgain) {
			t.Fatalf("a state of another config's instance: %v, want it refused as not this mcp-mux's", err)
		}
	})

	t.Run("the holder is gone: start again, at once", func(t *testing.T) {
		c := startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token)
		asked := askedName(t, roundsAgent(t, c.url, token, "agent"))
		atB := roundsAgent(t, b.url, token, "agent")
		c.cmd.Process.Kill()
		c.cmd.Wait()
		start := time.Now()
		_, err := retryWith(t, atB, asked, asked.RequestState, "Ada")
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), startAgain) {
			t.Fatalf("retry after the holder was killed: %v, want the error that says start again", err)
		}
		if took > 5*time.Second {
			t.Fatalf("the error took %s", took)
		}
		t.Logf("holder killed: %v after %s", err, took.Round(time.Millisecond))
	})
}

// TestInputRoundsThroughARoundRobinBalancer: three instances behind
// haproxy with the README's config, whose affinity is for the handshake
// era only: a current-era agent's first request and its retry go to
// different instances, round robin (nothing else goes between them), and
// every call completes with the agent's answer.
func TestInputRoundsThroughARoundRobinBalancer(t *testing.T) {
	bin := haproxyBin(t)
	const token = "handoff-lb-token"
	cfg := testkit.WriteConfig(t, `http_token = "${MUX_TEST_TOKEN}"`, []string{"old", "-name", "old", "-client-requests"})
	var muxes []*httpMux
	for range 3 {
		muxes = append(muxes, startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token))
	}
	conf := readmeHAProxyConfig(t)
	conf = strings.Replace(conf, "    server mux2", "    server mux3 10.0.0.13:8931 check\n    server mux2", 1) // a third, as the test runs three
	lb := startHAProxy(t, bin, conf, muxes)
	cs := roundsAgent(t, lb.url, token, "agent")
	for n := range 6 {
		name := "Ada-" + string(rune('a'+n))
		asked := askedName(t, cs)
		got, err := retryWith(t, cs, asked, asked.RequestState, name)
		if err != nil || !strings.Contains(got, name) {
			t.Fatalf("call %d through the balancer: %q %v\n%s", n, got, err, lb)
		}
	}
}

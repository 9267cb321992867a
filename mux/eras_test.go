package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Every era talks to every era: a backend written the multi-round-trip way
// (the fixture's -mrtr tools) asks the agent for input (elicitation,
// sampling, roots), logs, reports progress and echoes the _meta it gets;
// agents of both eras that answer everything call it directly and through
// mcp-mux, with the backend pinned to the handshake era (the default),
// probed (protocol = "auto", which picks the current era) and speaking only
// the handshake era. What the agent sees must be the same both ways, cell
// by cell.

// eraAgent is a go-sdk agent that declares and answers roots, sampling and
// elicitation, and records the log messages and progress it gets.
type eraAgent struct {
	cs *mcp.ClientSession

	mu       sync.Mutex
	logs     []string
	progress int
	got      chan struct{} // signalled when a message or progress came
}

const (
	eraRoot      = "file:///work/project"
	eraElicited  = "Ada"
	eraSampled   = "sampled reply"
	eraModel     = "test-model"
	legacyEra    = "2025-11-25"
	currentEraV  = "" // the go-sdk probes server/discover and speaks 2026-07-28
	eraCustomKey = "example.com/trace"
)

func newEraAgent(t testing.TB) (*eraAgent, *mcp.Client) {
	a := &eraAgent{got: make(chan struct{}, 1)}
	signal := func() {
		select {
		case a.got <- struct{}{}:
		default:
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "era-agent", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": eraElicited}}, nil
		},
		CreateMessageWithToolsHandler: func(context.Context, *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			return &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: eraModel, Content: []mcp.Content{&mcp.TextContent{Text: eraSampled}}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			a.mu.Lock()
			a.logs = append(a.logs, fmt.Sprintf("%s %v", r.Params.Level, r.Params.Data))
			a.mu.Unlock()
			signal()
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			a.mu.Lock()
			a.progress++
			a.mu.Unlock()
			signal()
		},
	})
	c.AddRoots(&mcp.Root{URI: eraRoot, Name: "project"})
	return a, c
}

// await waits (up to 5 s) until cond holds of what the agent got, and
// returns what show says of it then, held or not: a cell that differs is
// reported by the comparison, with what came.
func (a *eraAgent) await(t testing.TB, cond func() bool, show func() string) string {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		a.mu.Lock()
		ok, out := cond(), show()
		a.mu.Unlock()
		if ok {
			return out
		}
		select {
		case <-a.got:
		case <-timeout:
			a.mu.Lock()
			defer a.mu.Unlock()
			return show()
		}
	}
}

func (a *eraAgent) modern() bool {
	return a.cs.InitializeResult().ProtocolVersion >= "2026-07-28"
}

// call calls a tool with meta and returns its text, or the error.
func (a *eraAgent) call(t testing.TB, name string, args map[string]any, meta mcp.Meta) string {
	t.Helper()
	res, err := a.cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		return "error: " + err.Error()
	}
	if res.IsError {
		return "tool error: " + text(t, res.Content)
	}
	return text(t, res.Content)
}

// cells runs each kind of request and returns what the agent saw of it.
// prefix is what the agent calls the backend's tools.
func (a *eraAgent) cells(t testing.TB, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{
		"elicit": a.call(t, prefix+"mrtr_elicit", nil, nil),
		"sample": a.call(t, prefix+"mrtr_sample", map[string]any{"prompt": "hello"}, nil),
		"roots":  a.call(t, prefix+"mrtr_roots", nil, nil),
	}

	// Log: the handshake era sets a level on the session, the current one
	// asks for it in each request's _meta.
	var meta mcp.Meta
	if a.modern() {
		meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
	} else if err := a.cs.SetLoggingLevel(testkit.CtxT(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	a.call(t, prefix+"log", map[string]any{"level": "info", "data": "hello"}, meta)
	a.call(t, prefix+"log", map[string]any{"level": "debug", "data": "too verbose"}, meta)
	// Messages reach the agent in the order the backend sent them, but
	// after the response may: the last one marks the end.
	a.call(t, prefix+"log", map[string]any{"level": "info", "data": "end"}, meta)
	out["log"] = a.await(t, func() bool { return len(a.logs) > 0 && a.logs[len(a.logs)-1] == "info end" }, func() string {
		return strings.Join(a.logs, "; ")
	})

	a.call(t, prefix+"progress", map[string]any{"steps": 3}, mcp.Meta{"progressToken": "p1"})
	out["progress"] = a.await(t, func() bool { return a.progress >= 3 }, func() string {
		return fmt.Sprint(a.progress, " progress notifications")
	})

	out["_meta"] = metaCell(t, a.call(t, prefix+"meta", nil, mcp.Meta{eraCustomKey: "abc"}))
	return out
}

// metaCell is what matters of the _meta a backend got: the keys that are
// not the protocol's, as the agent sent them, and whether the protocol's
// keys fit the session the backend is in (none in the handshake era; its
// own version in the current one).
func metaCell(t testing.TB, got string) string {
	t.Helper()
	var v struct {
		Session string         `json:"session"`
		Meta    map[string]any `json:"meta"`
	}
	if err := json.Unmarshal([]byte(got), &v); err != nil {
		return "unreadable: " + got
	}
	var keys []string
	var reserved []string
	for k, val := range v.Meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			reserved = append(reserved, k)
			continue
		}
		keys = append(keys, fmt.Sprintf("%s=%v", k, val))
	}
	sort.Strings(keys)
	fit := "protocol keys fit the session"
	version, _ := v.Meta[mcp.MetaKeyProtocolVersion].(string)
	modern := v.Session >= "2026-07-28"
	switch {
	case !modern && len(reserved) > 0:
		fit = fmt.Sprintf("protocol keys %v in a %s session", reserved, v.Session)
	case modern && version != v.Session:
		fit = fmt.Sprintf("protocolVersion %q in a %s session", version, v.Session)
	}
	return strings.Join(keys, ",") + "; " + fit
}

// eraBackends are the three kinds of backend, as config entries.
func eraBackends(t testing.TB) map[string]config.Backend {
	auto := fixture(t, "be", "-mrtr")
	auto.Protocol = "auto"
	return map[string]config.Backend{
		"pinned":         fixture(t, "be", "-mrtr"),
		"auto":           auto,
		"handshake-only": fixture(t, "be", "-mrtr", "-handshake-only"),
	}
}

// connectDirect connects agent c to the backend of spec with no mcp-mux.
// connectHTTPWith connects c to mux's HTTP endpoint url at version.
func connectHTTPWith(t *testing.T, url string, c *mcp.Client, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := c.Connect(testkit.CtxT(t), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func connectDirect(t testing.TB, c *mcp.Client, spec config.Backend, version string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(spec.Command, spec.Args...)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting directly: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestEveryEraTalksToEveryEra(t *testing.T) {
	// The agents of each era over stdio, and over HTTP, where one of the
	// current era sends each request on its own (stateless).
	eras := map[string]struct {
		version string
		http    bool
	}{
		"handshake agent": {legacyEra, false}, "current agent": {currentEraV, false},
		"handshake agent over HTTP": {legacyEra, true}, "current agent over HTTP": {currentEraV, true},
	}
	for kind, spec := range eraBackends(t) {
		for era, agent := range eras {
			t.Run(kind+"/"+era, func(t *testing.T) {
				t.Parallel()
				direct, c := newEraAgent(t)
				direct.cs = connectDirect(t, c, spec, agent.version)
				want := direct.cells(t, "")

				through, c := newEraAgent(t)
				m := startMux(t, spec)
				if agent.http {
					through.cs = connectHTTPWith(t, serveHTTP(t, m, door.HTTPOptions{}), c, agent.version)
				} else {
					through.cs = connectWith(t, m, c, agent.version)
				}
				got := through.cells(t, "be__")

				for _, cell := range []string{"elicit", "sample", "roots", "log", "progress", "_meta"} {
					if got[cell] != want[cell] {
						t.Errorf("%s: through mcp-mux %q, directly %q", cell, got[cell], want[cell])
					}
				}
			})
		}
	}
}

// TestTheAgentsExtensionsReachEveryBackend: client extensions the agent
// declares (MCP Apps' io.modelcontextprotocol/ui) are declared to the
// backends, in either era on both sides, so a backend shows through mux
// what it shows the agent directly.
func TestTheAgentsExtensionsReachEveryBackend(t *testing.T) {
	auto := fixture(t, "modern", "-client-requests")
	auto.Protocol = "auto"
	for _, era := range []string{legacyEra, currentEraV} {
		t.Run("agent "+era, func(t *testing.T) {
			m := startMux(t, fixture(t, "old", "-client-requests"), auto)
			caps := &mcp.ClientCapabilities{}
			caps.AddExtension("io.modelcontextprotocol/ui", map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app"}})
			cs := connectWith(t, m, mcp.NewClient(&mcp.Implementation{Name: "apps", Version: "1"}, &mcp.ClientOptions{Capabilities: caps}), era)
			for _, tool := range []string{"old__client_info", "modern__client_info"} {
				if got := callText(t, cs, tool, nil); !strings.Contains(got, `"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}`) {
					t.Errorf("%s: %s", tool, got)
				}
			}
		})
	}
}

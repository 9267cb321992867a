package mux

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// fixture is a backend spec running the fixture server named name.
func fixture(t testing.TB, name string, args ...string) config.Backend {
	t.Helper()
	return config.Backend{Name: name, Command: testkit.FixtureBin(t), Args: append([]string{"-name", name}, args...)}
}

func testConfig(specs ...config.Backend) *config.File {
	cfg := &config.File{Path: "test.toml", Backends: specs}
	cfg.Mux.Name = "mcp-mux"
	cfg.Mux.ToolSeparator = "__"
	cfg.Mux.RequestTimeout.Duration = 10 * time.Second
	cfg.Mux.StartupTimeout.Duration = 10 * time.Second
	// Tests list expecting every backend: on a loaded machine a start may
	// take longer than the default wait.
	cfg.Mux.FirstListWait.Duration = 10 * time.Second
	cfg.Mux.ShutdownGrace.Duration = time.Second
	cfg.Mux.MaxSubscriptions = 100
	// Every tool in every session's list: the tests of tool search set
	// their own (toolsearch_test.go).
	cfg.Mux.ToolList = config.ToolListAll
	return cfg
}

func testLogger(t testing.TB) *log.Logger {
	if os.Getenv("MCP_MUX_TEST_LOG") != "" {
		l := log.New(os.Stderr)
		l.SetLevel(log.DebugLevel)
		return l
	}
	return log.New(io.Discard)
}

// startMux starts a mux over specs; it is closed when the test ends.
func startMux(t testing.TB, specs ...config.Backend) *Mux {
	t.Helper()
	return startMuxConfig(t, testConfig(specs...))
}

func startMuxConfig(t testing.TB, cfg *config.File) *Mux {
	t.Helper()
	m := New(cfg, testLogger(t), "test")
	// Its own memory of catalogs: a test's backends start as the test
	// says, whatever another test remembered (lazy_test.go shares one).
	m.catalogs = catalogmem.Open(filepath.Join(t.TempDir(), "catalogs"))
	m.backoffBase = 10 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	return m
}

// connect attaches a client session to m over pipes, as an agent's stdio
// session: mux's own stdio connection, with its pass-through of
// tools/call and resources/read (passthrough.go), is what every test
// drives.
func connect(t testing.TB, m *Mux, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectAt(t, m, opts, "2025-11-25")
}

// connectAt is connect at protocol version; "" is the current era
// (server/discover, then the version in every request's _meta).
func connectAt(t testing.TB, m *Mux, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, m, mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts), version)
}

// connectWith is connectAt for a client made by the caller.
func connectWith(t testing.TB, m *Mux, c *mcp.Client, version string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	st := door.Stdio(inR, outW, door.StdioOptions{Drain: time.Second})
	ct := &mcp.IOTransport{Reader: outR, Writer: inW}
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
	})
	if _, err := m.Connect(context.Background(), st); err != nil {
		t.Fatalf("mux connect: %v", err)
	}
	cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// rpcCode returns the JSON-RPC error code in err, failing if there is none.
func rpcCode(t testing.TB, err error) *jsonrpc.Error {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("want a JSON-RPC error, got %T %v", err, err)
	}
	return je
}

// listed is f of every item a list iterator yields; an error fails t.
func listed[T any](t testing.TB, items iter.Seq2[T, error], f func(T) string) []string {
	t.Helper()
	var out []string
	for it, err := range items {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f(it))
	}
	return out
}

func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	return listed(t, cs.Tools(testkit.CtxT(t), nil), func(x *mcp.Tool) string { return x.Name })
}

func promptNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	return listed(t, cs.Prompts(testkit.CtxT(t), nil), func(x *mcp.Prompt) string { return x.Name })
}

func templateURIs(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	return listed(t, cs.ResourceTemplates(testkit.CtxT(t), nil), func(x *mcp.ResourceTemplate) string { return x.URITemplate })
}

func text(t testing.TB, content []mcp.Content) string {
	t.Helper()
	var sb strings.Builder
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func callText(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("calling %s: tool error: %s", name, text(t, res.Content))
	}
	return text(t, res.Content)
}

// stats is the fixture's stats tool result.
type stats struct {
	Subscribe     map[string]int `json:"subscribe"`
	Unsubscribe   map[string]int `json:"unsubscribe"`
	ListResources int            `json:"list_resources"`
	ListTools     int            `json:"list_tools"`
	Cancelled     int            `json:"cancelled"`
	CancelReasons []string       `json:"cancel_reasons"`
	Requests      int            `json:"requests"`
	PID           int            `json:"pid"`
}

func fixtureStats(t testing.TB, cs *mcp.ClientSession, tool string) stats {
	t.Helper()
	var s stats
	if err := json.Unmarshal([]byte(callText(t, cs, tool, nil)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// arrived is a condition for Eventually: whether the fixture behind tool,
// its stats tool on cs, received a request besides the stats calls since
// arrived was called (testkit.Arrived). Call it before sending the
// request.
func arrived(t testing.TB, cs *mcp.ClientSession, tool string) func() bool {
	t.Helper()
	return testkit.Arrived(func() int { return fixtureStats(t, cs, tool).Requests })
}

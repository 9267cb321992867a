package backends

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func start(t *testing.T, opts Options, args ...string) (*Backend, *testkit.SyncBuffer, error) {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	opts.Logger = log.New(logs)
	if opts.StartupTimeout == 0 {
		opts.StartupTimeout = 10 * time.Second
	}
	b, err := Start(context.Background(), Spec{Name: "fx", Command: testkit.FixtureBin(t), Args: append([]string{"-name", "fx"}, args...)}, opts)
	if b != nil {
		t.Cleanup(func() { b.Stop(time.Second) })
	}
	return b, logs, err
}

func call(t *testing.T, b *Backend, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.Session().CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

// arrived is a condition for Eventually: whether b's backend, the
// fixture, received a request besides the stats calls since arrived was
// called (testkit.Arrived). Call it before sending the request.
func arrived(t *testing.T, b *Backend) func() bool {
	t.Helper()
	return testkit.Arrived(func() int {
		res, err := call(t, b, "stats", nil)
		if err != nil {
			t.Fatalf("stats: %v", err)
		}
		return testkit.Requests(resultText(t, res))
	})
}

func TestStartInitializesAndRecordsCapabilities(t *testing.T) {
	b, logs, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := b.InitializeResult(); r.ServerInfo.Name != "fx" || r.ProtocolVersion != ProtocolVersion {
		t.Errorf("initialize result: %+v", r)
	}
	if !b.SupportsSubscribe() {
		t.Error("fixture advertises resources.subscribe")
	}
	if !alive(b.PID()) {
		t.Error("no process")
	}
	// The child's stderr lands in our log with its name as prefix.
	testkit.Poll(2*time.Second, func() bool { return strings.Contains(logs.String(), "fx: fixture fx ready") })
	if !strings.Contains(logs.String(), "fx: fixture fx ready") {
		t.Errorf("stderr not captured with the backend's prefix:\n%s", logs)
	}
}

func TestStartFailureReportsExitAndStderr(t *testing.T) {
	_, _, err := start(t, Options{}, "-fail-start")
	if err == nil || !strings.Contains(err.Error(), "exit status 2") || !strings.Contains(err.Error(), "failing on purpose") {
		t.Errorf("err = %v, want the exit status and the stderr line", err)
	}
}

func TestStartCommandNotFound(t *testing.T) {
	_, err := Start(context.Background(), Spec{Name: "x", Command: "/nonexistent/server"}, Options{Logger: log.New(&testkit.SyncBuffer{})})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/server") {
		t.Errorf("err = %v", err)
	}
}

func TestSilentBackendCostsAtMostStartupTimeout(t *testing.T) {
	begin := time.Now()
	_, _, err := start(t, Options{StartupTimeout: 300 * time.Millisecond}, "-silent", "-ignore-eof")
	if err == nil || !strings.Contains(err.Error(), "did not initialize within 300ms") {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("gave up after %v", d)
	}
}

// TestStartOfABackendThatPrintsOnlyNoiseSaysWhatItPrinted: a server that
// logs to stdout never initializes, and the error says what it printed
// there, its first line cut, not only that it timed out.
func TestStartOfABackendThatPrintsOnlyNoiseSaysWhatItPrinted(t *testing.T) {
	long := "Starting server on port 8080 " + strings.Repeat("x", 300)
	_, _, err := start(t, Options{StartupTimeout: 700 * time.Millisecond}, "-stdout-junk", long)
	if err == nil {
		t.Fatal("started")
	}
	want := `did not initialize within 700ms; it printed on stdout instead of JSON-RPC: "` + long[:noiseQuote] + `…"`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant it to contain %s", err, want)
	}
}

func TestNoiseOnStdoutIsSkipped(t *testing.T) {
	b, logs, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, b, "noise", map[string]any{"text": "Starting server v1.0..."}); err != nil {
		t.Fatal(err)
	}
	res, err := call(t, b, "echo", map[string]any{"still": "here"})
	if err != nil {
		t.Fatalf("the connection did not survive a noise line: %v", err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != `{"still":"here"}` {
		t.Errorf("echo = %q", got)
	}
	if !strings.Contains(logs.String(), "Starting server v1.0...") {
		t.Errorf("noise not logged:\n%s", logs)
	}
}

func TestOversizedMessageIsDroppedNotTheBackend(t *testing.T) {
	b, logs, err := start(t, Options{MaxMessageSize: 64 * 1024})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = b.Session().CallTool(ctx, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"bytes": 200 * 1024}})
	cancel()
	if err == nil {
		t.Fatal("a response over max_message_size was delivered")
	}
	if _, err := call(t, b, "big", map[string]any{"bytes": 1000}); err != nil {
		t.Fatalf("the backend did not survive an oversized frame: %v", err)
	}
	if !strings.Contains(logs.String(), "larger than max_message_size") {
		t.Errorf("not reported:\n%s", logs)
	}
}

func TestBackendErrorKeepsItsCode(t *testing.T) {
	b, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(t, b, "fail", map[string]any{"code": -32602, "message": "nope"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32602 {
		t.Errorf("err = %v, want a *jsonrpc.Error with -32602", err)
	}
}

func TestStopEndsStubbornBackendAndGrandchild(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	b, _, err := start(t, Options{}, "-ignore-eof", "-grandchild-pidfile", pidfile)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data))
	grandchild, _ := strconv.Atoi(fields[1])
	if !alive(grandchild) {
		t.Fatal("grandchild not running")
	}
	begin := time.Now()
	b.Stop(200 * time.Millisecond)
	t.Logf("stopped in %v", time.Since(begin))
	if alive(b.PID()) || alive(grandchild) {
		t.Errorf("still alive after Stop: backend %v, grandchild %v", alive(b.PID()), alive(grandchild))
	}
	if groupAlive(b.PID()) && alive(grandchild) {
		t.Error("process group still has members")
	}
}

func TestErrReportsCrash(t *testing.T) {
	b, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Err() != nil {
		t.Fatalf("Err() = %v while running", b.Err())
	}
	go call(t, b, "crash", map[string]any{"code": 7})
	select {
	case <-b.Done():
		if err := b.Err(); err == nil || !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "crashing with code 7") {
			t.Errorf("Err() = %v, want the exit status and the last stderr", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after a crash")
	}
}

func TestErrAfterStopIsErrStopped(t *testing.T) {
	b, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Stop(time.Second)
	if err := b.Err(); !errors.Is(err, ErrStopped) {
		t.Errorf("Err() = %v, want ErrStopped", err)
	}
}

func TestEnvReachesBackendButValuesAreNeverLogged(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	spec := Spec{Name: "fx", Command: testkit.FixtureBin(t), Args: []string{"-name", "fx", "-env-tool"}, Env: map[string]string{"FIXTURE_SECRET": "hunter2-value"}}
	b, err := Start(context.Background(), spec, Options{Logger: log.New(logs), StartupTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop(time.Second)
	env := environOf(t, b)
	if env["FIXTURE_SECRET"] != "hunter2-value" {
		t.Error("configured env did not reach the backend")
	}
	if _, ok := env["PATH"]; !ok {
		t.Error("mux's own environment was not inherited")
	}
	if !strings.Contains(logs.String(), "FIXTURE_SECRET") || strings.Contains(logs.String(), "hunter2-value") {
		t.Errorf("the log must name env keys, never values:\n%s", logs)
	}
}

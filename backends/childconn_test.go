package backends

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// startRaw starts testdata/rawserver, a server that writes whatever bytes a
// test asks for, as backend "raw".
func startRaw(t *testing.T, opts Options) (*Backend, *testkit.SyncBuffer) {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	opts.Logger = log.New(logs)
	opts.StartupTimeout = 10 * time.Second
	b, err := Start(context.Background(), Spec{Name: "raw", Command: testkit.RawServerBin(t)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	return b, logs
}

// callWithin calls tool with a generous deadline (standing in for
// request_timeout) and reports how long the answer took.
func callWithin(b *Backend, tool string, args map[string]any, timeout time.Duration) (*mcp.CallToolResult, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	begin := time.Now()
	res, err := b.Session().CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	return res, time.Since(begin), err
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil || len(res.Content) == 0 {
		t.Fatalf("empty result: %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", res.Content[0])
	}
	return tc.Text
}

// assertStillUp checks that the backend kept its connection and process:
// it answers, under the same PID, and nothing recorded it as down.
func assertStillUp(t *testing.T, b *Backend, pid int) {
	t.Helper()
	tool, args := "echo", map[string]any{"still": "here"}
	if b.Spec.Name == "raw" {
		tool, args = "pid", nil
	}
	res, _, err := callWithin(b, tool, args, 10*time.Second)
	if err != nil {
		t.Fatalf("the backend stopped answering: %v", err)
	}
	if tool == "pid" {
		if got := resultText(t, res); got != strconv.Itoa(pid) {
			t.Errorf("answered from pid %s, want %d (restarted?)", got, pid)
		}
	}
	if b.PID() != pid || !alive(pid) {
		t.Errorf("backend process %d gone (now %d)", pid, b.PID())
	}
	select {
	case <-b.Done():
		t.Fatalf("the backend went down (counts as a crash): %v", b.Err())
	default:
	}
}

// deepNesting is n levels of arrays, over the go-sdk decoder's depth limit
// (1000) when n is 2000.
func deepNesting(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// Lines the old stdout filter let through (they contain "jsonrpc":"2.0" and
// are valid JSON) but the SDK's decoder refuses, which ended the connection.
var malformedEnvelopes = []struct{ name, line string }{
	{"no method, no id", `{"jsonrpc":"2.0"}`},
	{"method not a string", `{"jsonrpc":"2.0","method":5}`},
	{"upper-case JSONRPC key", `{"JSONRPC":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`},
	{"id is an object", `{"jsonrpc":"2.0","id":{},"result":{}}`},
	{"id is true", `{"jsonrpc":"2.0","id":true,"result":{}}`},
	{"2000-deep nesting", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":` + deepNesting(2000) + `}}`},
}

func TestMalformedJSONRPCLineDoesNotCostTheConnection(t *testing.T) {
	b, logs, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := b.PID()
	for _, tc := range malformedEnvelopes {
		t.Run(tc.name, func(t *testing.T) {
			// The fixture prints the line on stdout, then answers the call.
			res, _, err := callWithin(b, "noise", map[string]any{"text": tc.line}, 10*time.Second)
			if err != nil {
				t.Fatalf("the call after the line failed: %v", err)
			}
			if got := resultText(t, res); got != "noisy" {
				t.Errorf("noise answered %q", got)
			}
			assertStillUp(t, b, pid)
		})
	}
	// The first is logged with why it was refused, the rest counted
	// (noise.go).
	if !strings.Contains(logs.String(), `line="{\"jsonrpc\":\"2.0\"}" error=`) {
		t.Errorf("the first skipped line was not logged with its error:\n%s", logs)
	}
	if n := b.StdoutNoise(); n != len(malformedEnvelopes) {
		t.Errorf("%d lines counted as noise, want %d", n, len(malformedEnvelopes))
	}
}

func TestMalformedResponseFailsOnlyItsRequestPromptly(t *testing.T) {
	b, _ := startRaw(t, Options{})
	pid := b.PID()
	cases := []struct{ name, line, want string }{
		{"upper-case JSONRPC key", `{"JSONRPC":"2.0","id":%ID%,"result":{}}`, "version"},
		{"error code not a number", `{"jsonrpc":"2.0","id":%ID%,"error":{"code":"boom","message":"x"}}`, "code"},
		{"2000-deep result", `{"jsonrpc":"2.0","id":%ID%,"result":{"a":` + deepNesting(2000) + `}}`, "depth"},
		{"id last", `{"result":{"a":` + deepNesting(2000) + `},"jsonrpc":"2.0","id":%ID%}`, "depth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, took, err := callWithin(b, "raw", map[string]any{"lines": []string{tc.line}}, 30*time.Second)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError {
				t.Fatalf("err = %v (%T), want a -32603 *jsonrpc.Error", err, err)
			}
			if !strings.Contains(je.Message, "raw") || !strings.Contains(je.Message, tc.want) {
				t.Errorf("message %q should name the backend and what was wrong (%q)", je.Message, tc.want)
			}
			if took > 5*time.Second {
				t.Errorf("the error took %v", took)
			}
			t.Logf("after %v: %v", took, err)
			assertStillUp(t, b, pid)
		})
	}
}

var sizeInMessage = regexp.MustCompile(`(\d+) bytes`)

func TestOversizedResponseFailsPromptlyNamingBackendAndSize(t *testing.T) {
	const limit = 64 * 1024
	check := func(t *testing.T, err error, took time.Duration, backend string, wantSize int) {
		t.Helper()
		if err == nil {
			t.Fatal("a response over max_message_size was delivered")
		}
		t.Logf("after %v: %v", took, err)
		if took > 5*time.Second {
			t.Errorf("the error took %v; it must not wait for the request timeout", took)
		}
		msg := err.Error()
		if !strings.Contains(msg, backend) || !strings.Contains(msg, strconv.Itoa(limit)) {
			t.Errorf("error %q should name backend %q and the limit %d", msg, backend, limit)
		}
		m := sizeInMessage.FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("error %q does not give the size in bytes", msg)
		}
		if size, _ := strconv.Atoi(m[1]); size != wantSize && !(wantSize < 0 && size > -wantSize) {
			t.Errorf("size in error = %d, want %d", size, wantSize)
		}
	}

	t.Run("go-sdk order, id first", func(t *testing.T) {
		b, logs, err := start(t, Options{MaxMessageSize: limit})
		if err != nil {
			t.Fatal(err)
		}
		_, took, err := callWithin(b, "big", map[string]any{"bytes": 200 * 1024}, 30*time.Second)
		check(t, err, took, "fx", -200*1024) // the envelope adds some bytes
		assertStillUp(t, b, b.PID())
		if !strings.Contains(logs.String(), "larger than max_message_size") {
			t.Errorf("not logged:\n%s", logs)
		}
	})

	t.Run("TypeScript order, id last", func(t *testing.T) {
		b, _ := startRaw(t, Options{MaxMessageSize: limit})
		const pad = 200 * 1024
		line := `{"result":{"content":[{"type":"text","text":"%PAD%"}]},"jsonrpc":"2.0","id":%ID%}`
		_, took, err := callWithin(b, "raw", map[string]any{"lines": []string{line}, "pad": pad}, 30*time.Second)
		// The second request of the session (initialize was the first) has id 2.
		want := len(line) - len("%PAD%") + pad - len("%ID%") + len("2")
		check(t, err, took, "raw", want)
		assertStillUp(t, b, b.PID())
	})
}

func TestStderrLineOverOneMiBDoesNotKillBackend(t *testing.T) {
	b, logs := startRaw(t, Options{})
	pid := b.PID()
	res, _, err := callWithin(b, "stderr", map[string]any{"bytes": 2 << 20}, 10*time.Second)
	if err != nil {
		t.Fatalf("the call that wrote 2 MiB to stderr failed: %v", err)
	}
	if got := resultText(t, res); got != "ok" {
		t.Errorf("stderr answered %q", got)
	}
	assertStillUp(t, b, pid)
	// Short lines after the long one are still captured whole.
	if _, _, err := callWithin(b, "stderr", map[string]any{"bytes": 10}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	testkit.Poll(2*time.Second, func() bool { return strings.Contains(logs.String(), "raw: eeeeeeeeee\n") })
	out := logs.String()
	if !strings.Contains(out, "raw: eeeeeeeeee\n") {
		t.Errorf("the line after the long one was not logged whole:\n%.2000s", out)
	}
	if !strings.Contains(out, "truncated") {
		t.Errorf("the long line was not marked as truncated in the log")
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 8*1024 {
			t.Errorf("a log line of %d bytes: long stderr lines must be truncated", len(l))
		}
	}
}

// A backend that floods notifications faster than mux handles them is held
// back (it waits on its pipe, as with a slow client) instead of growing
// the go-sdk's unbounded queue: no more than maxPending are ever read
// ahead of the handlers.
func TestFloodOfNotificationsIsHeldBackNotQueued(t *testing.T) {
	var handledN atomic.Int64
	// Each handler, as it starts, sees how many notifications are read
	// and not yet handled: the count is highest while the handlers lag,
	// and every one of them looks (where a poll of the count from the
	// test would look only now and then).
	var conn atomic.Pointer[childConn]
	var mu sync.Mutex
	most := 0
	opts := Options{Hooks: Hooks{ResourceUpdated: func(*mcp.ResourceUpdatedNotificationParams) {
		if c := conn.Load(); c != nil {
			c.pmu.Lock()
			n := c.pending
			c.pmu.Unlock()
			mu.Lock()
			most = max(most, n)
			mu.Unlock()
		}
		// Pacing, not a wait: a handler slower than the reader, so that
		// the reader gets ahead and must be held back. Shorter, fewer
		// would be ahead at once; the limit is checked the same.
		time.Sleep(200 * time.Microsecond)
		handledN.Add(1)
	}}}
	b, _, err := start(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	conn.Store(b.conn)
	if _, err := call(t, b, "update", map[string]any{"uri": "fixture://fx/res/1", "count": 3000}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ahead := most
	mu.Unlock()
	t.Logf("at most %d notifications read ahead of the handlers (limit %d); %d handled when the call returned", ahead, maxPending, handledN.Load())
	if ahead > maxPending {
		t.Errorf("%d notifications were read ahead of the handlers, limit %d", ahead, maxPending)
	}
	if h := handledN.Load(); h < 3000-maxPending-1000 {
		t.Errorf("the call returned with only %d of 3,000 handled: the rest was queued", h)
	}
}

// TestNoiseOnStdoutIsLoggedOnceThenCounted: a server that logs to stdout
// (five lines a second) costs one warning with its first line, then a
// count, not one warning a line; the count left when it stops is logged.
func TestNoiseOnStdoutIsLoggedOnceThenCounted(t *testing.T) {
	b, logs, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := call(t, b, "noise", map[string]any{"text": fmt.Sprintf("Listening on port %d", 8000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	b.Stop(time.Second)
	out := logs.String()
	if n := strings.Count(out, "Listening on port"); n != 1 || !strings.Contains(out, "Listening on port 8000") {
		t.Errorf("%d noise lines in the log, want the first one only:\n%s", n, out)
	}
	if !regexp.MustCompile(`more noise on stdout.* lines=29 in_all=30`).MatchString(out) {
		t.Errorf("the 29 lines counted after the first are not in the log:\n%s", out)
	}
}

// TestNoiseCountIsLoggedWhileTheBackendRuns: the lines counted since the
// last warning are logged once noiseReportEvery has passed, without
// waiting for the backend to stop.
func TestNoiseCountIsLoggedWhileTheBackendRuns(t *testing.T) {
	every := noiseReportEvery
	noiseReportEvery = 300 * time.Millisecond
	t.Cleanup(func() { noiseReportEvery = every })
	b, logs, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := call(t, b, "noise", map[string]any{"text": fmt.Sprintf("tick %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	counted := regexp.MustCompile(`more noise on stdout.* lines=(\d+)`)
	testkit.Eventually(t, 5*time.Second, "the 4 lines after the first to be counted in the log", func() bool {
		sum := 0
		for _, m := range counted.FindAllStringSubmatch(logs.String(), -1) {
			n, _ := strconv.Atoi(m[1])
			sum += n
		}
		return sum == 4
	})
	if b.StdoutNoise() != 5 {
		t.Errorf("StdoutNoise() = %d, want 5", b.StdoutNoise())
	}
}

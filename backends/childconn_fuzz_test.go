package backends

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// pipeBackend is a client session over a childConn whose "child" is the
// test itself: it reads what the client writes and writes what the backend
// would, on real pipes. Like a real backend it keeps reading its stdin, so
// the client never blocks writing (its answers to requests the fuzzer
// made up, for one).
type pipeBackend struct {
	cs     *mcp.ClientSession
	done   chan struct{}         // closed when the session ended
	reqs   chan *jsonrpc.Request // the client's initialize and ping requests
	stdout *os.File              // the child's stdout: we write here
	logs   *testkit.SyncBuffer
}

func newPipeBackend(tb testing.TB, max int) *pipeBackend {
	tb.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	p := &pipeBackend{done: make(chan struct{}), reqs: make(chan *jsonrpc.Request, 16), stdout: outW, logs: &testkit.SyncBuffer{}}
	readerDone, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readerDone)
		r := bufio.NewReader(inR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return // the pipe was closed by the cleanup
			}
			msg, err := jsonrpc.DecodeMessage(line)
			if err != nil {
				p.logs.Write([]byte(fmt.Sprintf("the client wrote %q: %v\n", line, err)))
				continue
			}
			if req, ok := msg.(*jsonrpc.Request); ok && (req.Method == "initialize" || req.Method == "ping") {
				select {
				case p.reqs <- req:
				case <-stop:
					return
				}
			}
		}
	}()
	conn := newChildConn("pipe", log.New(p.logs).WithPrefix("pipe"), outR, inW, max)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	type result struct {
		cs  *mcp.ClientSession
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cs, err := client.Connect(context.Background(), childTransport{conn}, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
		ch <- result{cs, err}
	}()
	tb.Cleanup(func() {
		// The child goes away first, as a dying backend would.
		close(stop)
		outW.Close()
		inR.Close()
		<-readerDone
		if r := <-ch; r.cs != nil {
			r.cs.Close()
			<-p.done
		}
	})
	req := p.nextRequest(tb, "initialize")
	p.reply(tb, req.ID, `{"protocolVersion":"`+ProtocolVersion+`","capabilities":{},"serverInfo":{"name":"pipe","version":"0"}}`)
	r := <-ch
	ch <- r // for the cleanup
	if r.err != nil {
		tb.Fatal(r.err)
	}
	p.cs = r.cs
	go func() {
		r.cs.Wait()
		close(p.done)
	}()
	return p
}

// nextRequest returns the next request for method the client sent.
func (p *pipeBackend) nextRequest(tb testing.TB, method string) *jsonrpc.Request {
	tb.Helper()
	select {
	case req := <-p.reqs:
		if req.Method != method {
			tb.Fatalf("the client sent %s, want %s", req.Method, method)
		}
		return req
	case <-time.After(10 * time.Second):
		tb.Fatalf("no %s request within 10s\nlog:\n%.4000s", method, p.logs)
		return nil
	}
}

func (p *pipeBackend) write(tb testing.TB, data []byte) {
	tb.Helper()
	p.stdout.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := p.stdout.Write(data); err != nil {
		tb.Fatalf("writing to the client: %v", err)
	}
}

func (p *pipeBackend) reply(tb testing.TB, id jsonrpc.ID, result string) {
	tb.Helper()
	idJSON, _ := json.Marshal(id.Raw())
	p.write(tb, []byte(`{"jsonrpc":"2.0","id":`+string(idJSON)+`,"result":`+result+"}\n"))
}

// ping has the client ping the backend, which first prints lines (with
// %ID% replaced by the ping's id) and then answers. It returns the ping's
// lines as written, the ping's id and the ping's error.
func (p *pipeBackend) ping(tb testing.TB, lines []byte) (written, id []byte, err error) {
	tb.Helper()
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errc <- p.cs.Ping(ctx, nil)
	}()
	req := p.nextRequest(tb, "ping")
	idJSON, _ := json.Marshal(req.ID.Raw())
	lines = bytes.ReplaceAll(lines, []byte("%ID%"), idJSON)
	if len(lines) > 0 {
		p.write(tb, append(lines, '\n'))
	}
	p.reply(tb, req.ID, `{}`)
	return lines, idJSON, <-errc
}

func (p *pipeBackend) assertUp(tb testing.TB) {
	tb.Helper()
	select {
	case <-p.done:
		tb.Fatalf("the connection ended\nlog:\n%.4000s", p.logs)
	default:
	}
}

// fuzzMax is the max_message_size of the fuzzed connection: small, so that
// the fuzzer reaches the oversized-line path.
const fuzzMax = 8192

// FuzzStdoutLineNeverCostsTheConnection prints arbitrary lines on a
// backend's stdout before it answers a request: the answer must still be
// delivered (unless the lines themselves answered the request, which only
// a line carrying its id can) and the connection must stay up.
func FuzzStdoutLineNeverCostsTheConnection(f *testing.F) {
	for _, tc := range malformedEnvelopes {
		f.Add([]byte(tc.line))
	}
	for _, s := range []string{
		"Starting server v1.0...",
		"",
		"\r",
		`{"jsonrpc":"2.0","id":%ID%,"result":{}}`,
		`{"jsonrpc":"2.0","id":%ID%,"result":5}`,
		`{"JSONRPC":"2.0","id":%ID%,"result":{}}`,
		`{"jsonrpc":"2.0","id":%ID%,"error":{"code":"x","message":"y"}}`,
		`{"jsonrpc":"2.0","id":%ID%,"result":{"a":` + deepNesting(2000) + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":""}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":5}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%ID%}}`,
		`[{"jsonrpc":"2.0","id":%ID%,"result":{}}]`,
		`{"jsonrpc":"2.0","id":%ID%,"result":{}} trailing`,
		`{"jsonrpc":"2.0","id":%ID%,"result":{"text":"` + strings.Repeat("x", 2*fuzzMax) + `"}}`,
		`{"result":{"text":"` + strings.Repeat("x", 2*fuzzMax) + `"},"jsonrpc":"2.0","id":%ID%}`,
		strings.Repeat("x", 3*fuzzMax),
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"\xff\"}}",
		"noise\n{\"jsonrpc\":\"2.0\"}\n\n",
	} {
		f.Add([]byte(s))
	}
	p := newPipeBackend(f, fuzzMax)
	f.Fuzz(func(t *testing.T, lines []byte) {
		written, id, err := p.ping(t, lines)
		// Only a line that carries the ping's id may answer it, and then at
		// once.
		if err != nil && (!bytes.Contains(written, id) || errors.Is(err, context.DeadlineExceeded)) {
			buf := make([]byte, 1<<20)
			t.Fatalf("the ping failed: %v\nlog:\n%.4000s\n%s", err, p.logs, buf[:runtime.Stack(buf, true)])
		}
		p.assertUp(t)
		if _, _, err := p.ping(t, nil); err != nil {
			t.Fatalf("the next ping failed: %v\nlog:\n%.4000s", err, p.logs)
		}
		p.assertUp(t)
	})
}

func TestConnSkipsNoiseAndSynthesizesOwedErrors(t *testing.T) {
	p := newPipeBackend(t, fuzzMax)
	for _, tc := range malformedEnvelopes {
		if _, _, err := p.ping(t, []byte(tc.line)); err != nil {
			t.Errorf("%s: ping failed: %v", tc.name, err)
		}
	}
	_, _, err := p.ping(t, []byte(`{"JSONRPC":"2.0","id":%ID%,"result":{}}`))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "backend pipe sent a malformed response") {
		t.Errorf("malformed response: err = %v", err)
	}
	written, _, err := p.ping(t, []byte(`{"result":{"text":"`+strings.Repeat("x", 2*fuzzMax)+`"},"jsonrpc":"2.0","id":%ID%}`))
	want := "backend pipe sent a response of " + itoa(len(written)) + " bytes, over max_message_size (8192 bytes)"
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || je.Message != want {
		t.Errorf("oversized response: err = %v, want %q", err, want)
	}
	p.assertUp(t)
	if _, _, err := p.ping(t, nil); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestConnReadEndsWithEOFAndUnblocksOnClose(t *testing.T) {
	t.Run("EOF after a last line without newline", func(t *testing.T) {
		out := io.NopCloser(strings.NewReader("noise\n{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}"))
		c := newChildConn("x", log.New(io.Discard), out, nopWriteCloser{io.Discard}, 1024)
		for _, want := range []string{"a", "b"} {
			msg, err := c.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if m := msg.(*jsonrpc.Request).Method; m != want {
				t.Errorf("method %q, want %q", m, want)
			}
		}
		if _, err := c.Read(context.Background()); err != io.EOF {
			t.Errorf("err = %v, want io.EOF", err)
		}
	})
	t.Run("EOF after an oversized response", func(t *testing.T) {
		out := io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":5,"result":"` + strings.Repeat("x", 2000) + "\"}\n"))
		c := newChildConn("x", log.New(io.Discard), out, nopWriteCloser{io.Discard}, 1024)
		msg, err := c.Read(context.Background())
		if r, ok := msg.(*jsonrpc.Response); err != nil || !ok || r.ID.Raw() != int64(5) || r.Error == nil {
			t.Fatalf("got %#v, %v; want an error response for id 5", msg, err)
		}
		if msg, err := c.Read(context.Background()); err != io.EOF {
			t.Errorf("got %#v, %v; want io.EOF (and only one error response)", msg, err)
		}
	})
	t.Run("Close unblocks Read", func(t *testing.T) {
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer outW.Close()
		c := newChildConn("x", log.New(io.Discard), outR, nopWriteCloser{io.Discard}, 1024)
		errc := make(chan error, 1)
		go func() {
			_, err := c.Read(context.Background())
			errc <- err
		}()
		// On Windows a pipe is read in a blocking system call, not the
		// poller.
		testkit.Eventually(t, 5*time.Second, "Read to wait on the pipe", func() bool {
			return testkit.GoroutineIn("[IO wait", "backends.(*childConn).Read(") || testkit.GoroutineIn("[syscall", "backends.(*childConn).Read(")
		})
		c.Close()
		select {
		case err := <-errc:
			if err != io.EOF {
				t.Errorf("err = %v, want io.EOF", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Read still blocked after Close")
		}
	})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// A decoded message must not point into the line buffer, which the next
// line overwrites: both for lines decoded straight from the reader's
// buffer and for long lines assembled in c.line.
func TestConnMessagesOutliveTheirLineBuffer(t *testing.T) {
	for _, n := range []int{10, 100 * 1024} {
		var in bytes.Buffer
		for _, ch := range []string{"a", "b"} {
			in.WriteString(`{"jsonrpc":"2.0","id":"` + ch + `","result":"` + strings.Repeat(ch, n) + "\"}\n")
		}
		c := newChildConn("x", log.New(io.Discard), io.NopCloser(&in), nopWriteCloser{io.Discard}, 1<<20)
		first, err := c.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := first.(*jsonrpc.Response)
		if r.ID.Raw() != "a" || string(r.Result) != `"`+strings.Repeat("a", n)+`"` {
			t.Errorf("n=%d: the first message changed after the second was read: id %v, result %.20q", n, r.ID.Raw(), r.Result)
		}
	}
}

// Read adds no allocation of its own to the decoder's, for lines that fit
// the reader's buffer and for longer ones once the line buffer has grown.
func TestConnReadAllocatesOnlyWhatTheDecoderDoes(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not stable under the race detector")
	}
	for _, n := range []int{100, 200 * 1024} {
		line := []byte(`{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("x", n) + `"}}` + "\n")
		decoder := testing.AllocsPerRun(50, func() {
			if _, err := jsonrpc.DecodeMessage(line[:len(line)-1]); err != nil {
				t.Fatal(err)
			}
		})
		r := &repeatReader{line: line}
		c := newChildConn("x", log.New(io.Discard), io.NopCloser(r), nopWriteCloser{io.Discard}, 1<<20)
		c.Read(context.Background()) // grows the buffers
		read := testing.AllocsPerRun(50, func() {
			if _, err := c.Read(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("line of %d bytes: decoder %.0f allocs, Read %.0f", len(line), decoder, read)
		if read > decoder {
			t.Errorf("line of %d bytes: Read allocates %.0f times, the decoder alone %.0f", len(line), read, decoder)
		}
	}
}

// repeatReader returns line over and over.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.line[r.off:])
	r.off = (r.off + n) % len(r.line)
	return n, nil
}

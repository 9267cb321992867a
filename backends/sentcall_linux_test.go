package backends

import (
	"context"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// Answers the backend wrote together may go to the agent together: while
// its reader has another whole line read already, an answer may wait
// (MoreToRead), and what waits is flushed (FlushAtIdle) before the reader
// next waits for the backend, never later.
func TestASentCallsAnswerWaitsOnlyForLinesReadAlready(t *testing.T) {
	outR, outW, err := os.Pipe() // the backend's stdout
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe() // its stdin
	if err != nil {
		t.Fatal(err)
	}
	c := newChildConn("x", log.New(io.Discard), wire.PipeIO(outR), wire.PipeIO(inW), 1<<20)
	t.Cleanup(func() { c.Close(); outW.Close(); inR.Close() })
	b := &Backend{conn: c}

	var more [2]atomic.Bool
	flushed := make(chan struct{})
	var calls [2]*SentCall
	for i := range calls {
		calls[i] = b.NewSentCall(func(*jsonrpc.Response) {
			more[i].Store(calls[i].MoreToRead())
			if i == 0 {
				calls[i].FlushAtIdle("agent", func() { close(flushed) })
			}
		})
		if calls[i] == nil || !calls[i].Register(context.Background()) {
			t.Fatalf("call %d not registered", i)
		}
	}
	b.SendLines(append(calls[0].Line("m", nil), calls[1].Line("m", nil)...))
	go func() {
		for {
			if _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	// Both answers in one write: the reader reads them at once.
	if _, err := outW.Write([]byte(`{"jsonrpc":"2.0","id":"mcp-mux-raw-1","result":{}}` + "\n" + `{"jsonrpc":"2.0","id":"mcp-mux-raw-2","result":{}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("what the first answer held was not flushed while the reader waits for the backend")
	}
	if !more[0].Load() || more[1].Load() {
		t.Errorf("MoreToRead: %v for the first answer, %v for the last; want true, false", more[0].Load(), more[1].Load())
	}
}

package outq

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// A response is written from its caller's goroutine when nothing is ahead
// of it and the agent's pipe takes it at once (writeNow); else it is
// queued. Either way the agent gets every line whole and in the order
// pushed, and a caller never waits on an agent that stopped reading: here
// it stops until far more than the pipe holds is pushed.
func TestOutQueueWritesResponsesAtOnceInOrderAndNeverWaits(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	var mu sync.Mutex
	written := 0
	q := New(wire.PipeIO(pw), func(jsonrpc.ID) {
		mu.Lock()
		written++
		mu.Unlock()
	}, log.New(io.Discard))
	closed := make(chan struct{})
	defer close(closed)
	go q.Loop(closed)

	const n = 200 // of 3 KiB: about ten times a 64 KiB pipe
	big := strings.Repeat("x", 3<<10)
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		for i := range n {
			if i%10 == 0 {
				q.Push(notification("notifications/message", fmt.Sprintf(`{"level":"info","data":"before %d"}`, i)))
			}
			id, _ := jsonrpc.MakeID(float64(i))
			data, _ := ResultLine(id, json.RawMessage(fmt.Sprintf(`{"text":%q}`, big)))
			q.PushResponse(id, data)
		}
	}()
	select {
	case <-pushed:
	case <-time.After(10 * time.Second):
		t.Fatal("PushResponse waited for an agent that does not read")
	}

	br := bufio.NewReaderSize(pr, 1<<20)
	next := 0
	for next < n {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if next%10 == 0 && strings.Contains(line, `"before `) {
			if !strings.Contains(line, fmt.Sprintf(`"before %d"`, next)) {
				t.Fatalf("notification out of order before response %d: %.80s", next, line)
			}
			continue
		}
		if !strings.HasPrefix(line, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"text":"xxx`, next)) || !strings.HasSuffix(line, `"}}`+"\n") {
			t.Fatalf("line for response %d: %.80s ... (%d bytes)", next, line, len(line))
		}
		next++
	}
	mu.Lock()
	defer mu.Unlock()
	if written != n {
		t.Errorf("%d responses reported written, want %d", written, n)
	}
}

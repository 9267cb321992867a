package door

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// fastAgent is the stdout of an agent that answers a response at once:
// while mux is still writing the response to id 7, the agent has read it
// and sent its next request, again with id 7 (it is free), and mux has
// read that.
type fastAgent struct {
	t    *testing.T
	in   *io.PipeWriter
	once sync.Once
	mu   sync.Mutex
	out  strings.Builder
}

func (a *fastAgent) Write(p []byte) (int, error) {
	a.mu.Lock()
	a.out.Write(p)
	a.mu.Unlock()
	if strings.Contains(string(p), `"id":7,"result"`) {
		a.once.Do(func() {
			io.WriteString(a.in, `{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\n")
			// mux has taken it: handing it to Read, or, refused, back to
			// reading stdin.
			testkit.Eventually(a.t, 5*time.Second, "mux to take the second request", func() bool {
				return testkit.GoroutineIn("door.(*Conn).deliver(") ||
					testkit.GoroutineIn("io.(*pipe).read(", "door.(*Conn).readLoop(")
			})
		})
	}
	return len(p), nil
}

func (a *fastAgent) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

// TestAnIDIsFreeOnceItsResponseIsWritten: an agent may reuse an id once it
// has the response, which may be before mux's writer has noted the write.
func TestAnIDIsFreeOnceItsResponseIsWritten(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	agent := &fastAgent{t: t, in: inW}
	tr := &StdioTransport{in: inR, out: agent}
	ctx := context.Background()
	conn, err := tr.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go io.WriteString(inW, `{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\n")
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := msg.(*jsonrpc.Request)
	if err := conn.Write(ctx, &jsonrpc.Response{ID: first.ID, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}

	got := make(chan jsonrpc.Message, 1)
	go func() {
		if msg, err := conn.Read(ctx); err == nil {
			got <- msg
		}
	}()
	select {
	case msg := <-got:
		if req, ok := msg.(*jsonrpc.Request); !ok || req.ID != first.ID || req.Method != "ping" {
			t.Fatalf("second message %#v, want the ping with id 7", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the second request with id 7 never reached the server; stdout:\n%s", agent)
	}
	if out := agent.String(); strings.Contains(out, "already in use") {
		t.Fatalf("the id was refused once its response was written:\n%s", out)
	}
}

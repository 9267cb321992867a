package backends

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// rawCall calls tool on b as bytes, within timeout.
func rawCall(b *Backend, tool string, args map[string]any, timeout time.Duration) (json.RawMessage, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	params, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	begin := time.Now()
	res, err := b.CallRaw(ctx, "tools/call", params)
	return res, time.Since(begin), err
}

// A raw call's result is the backend's bytes; whatever else the backend
// writes for a raw id, and whatever goes wrong with the response, fails
// only that call, at once, and leaves the go-sdk's session alone.
func TestRawCallGetsTheBackendsBytesOrAPromptError(t *testing.T) {
	const limit = 64 << 10
	b, _ := startRaw(t, Options{MaxMessageSize: limit})
	pid := b.PID()

	res, _, err := rawCall(b, "raw", map[string]any{"lines": []string{
		// A stray response under an id of ours that nobody waits for:
		// dropped, never handed to the go-sdk.
		`{"jsonrpc":"2.0","id":"mcp-mux-raw-999999","result":{}}`,
		`{"jsonrpc":"2.0","id":%ID%,"result":{"n":12345678901234567891,"f":1.10}}`,
	}}, 10*time.Second)
	if err != nil || string(res) != `{"n":12345678901234567891,"f":1.10}` {
		t.Fatalf("raw call = %s, %v; want the backend's result byte for byte", res, err)
	}

	cases := []struct{ name, line, want string }{
		{"its JSON-RPC error", `{"jsonrpc":"2.0","id":%ID%,"error":{"code":-32050,"message":"boom","data":{"k":1}}}`, "boom"},
		{"malformed", `{"JSONRPC":"2.0","id":%ID%,"result":{}}`, "malformed"},
		{"oversized", `{"jsonrpc":"2.0","id":%ID%,"result":{"t":"%PAD%"}}`, "max_message_size"},
		{"not an object", `{"jsonrpc":"2.0","id":%ID%,"result":42}`, "not an object: 42"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, took, err := rawCall(b, "raw", map[string]any{"lines": []string{tc.line}, "pad": 2 * limit}, 30*time.Second)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || !strings.Contains(je.Message, tc.want) {
				t.Fatalf("err = %v (%T), want a *jsonrpc.Error saying %q", err, err, tc.want)
			}
			if tc.name == "its JSON-RPC error" && (je.Code != -32050 || string(je.Data) != `{"k":1}`) {
				t.Errorf("the backend's error came as %d %s", je.Code, je.Data)
			}
			if took > 5*time.Second {
				t.Errorf("the error took %v", took)
			}
		})
	}
	assertStillUp(t, b, pid)
	if _, _, err := callWithin(b, "pid", nil, 10*time.Second); err != nil {
		t.Errorf("the go-sdk's session after the raw calls: %v", err)
	}
}

// A raw call in flight when the backend dies fails at once, and one made
// after fails without writing anywhere.
func TestRawCallFailsWhenTheBackendGoes(t *testing.T) {
	b, _ := startRaw(t, Options{})
	done := make(chan error, 1)
	go func() {
		// Writes nothing back: the call waits until the backend goes.
		_, _, err := rawCall(b, "raw", map[string]any{"lines": []string{}}, 30*time.Second)
		done <- err
	}()
	// Written, the call waits for its answer; the backend answers in
	// order, so once a call sent after it is answered, it has it too.
	testkit.Eventually(t, 5*time.Second, "the raw call to wait for its answer", func() bool {
		return testkit.GoroutineIn("[select", "backends.(*childConn).callRaw(")
	})
	if _, _, err := callWithin(b, "pid", nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b.Kill(fmt.Errorf("test"))
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connection closed") {
			t.Errorf("err = %v, want the connection closed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight was not failed when the backend went")
	}
	<-b.Done()
	if _, _, err := rawCall(b, "pid", nil, 5*time.Second); err == nil {
		t.Error("a raw call to a backend that is gone succeeded")
	}
}

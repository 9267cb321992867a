package door

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

func lines(b []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l)
		}
	}
	return out
}

func FuzzStdinGuard(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "not json", `[1]`, `{"jsonrpc":"1.0","id":1}`, `{"id":{}}`, "",
		`{"jsonrpc":"2.0","id":"a","result":{}}`, "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n{", strings.Repeat("x", 3000),
		`{"JSONRPC":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":5}`, strings.Repeat("[", 2000) + strings.Repeat("]", 2000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ctx := context.Background()
		var out testkit.SyncBuffer
		conn, err := Stdio(strings.NewReader(in), &out, StdioOptions{MaxLine: 1024}).Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// What reaches the SDK is decoded messages; calls get an answer.
		for {
			msg, err := conn.Read(ctx)
			if err != nil {
				break
			}
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				conn.Write(ctx, &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)})
			}
		}
		conn.Close()
		// Every line out is a JSON-RPC response: a result, or an error with
		// a code (id null when the request's id could not be read).
		for _, line := range lines(out.Bytes()) {
			var r struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Result  json.RawMessage `json:"result"`
				Error   *jsonrpc.Error  `json:"error"`
			}
			if err := json.Unmarshal(line, &r); err != nil || r.JSONRPC != "2.0" || r.ID == nil || (r.Error == nil) == (r.Result == nil) || (r.Error != nil && r.Error.Code == 0) {
				t.Fatalf("bad reply %q", line)
			}
		}
	})
}

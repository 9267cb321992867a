package backends

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Raw calls to a remote backend (rawcall.go) go out through the go-sdk's
// connection and their responses are read off what the go-sdk reads: the
// POST's event stream (Streamable HTTP), its JSON body (a server that
// answers in JSON), or the one event stream of the older HTTP+SSE
// transport. Each is tried with a small result and with one larger than
// what is looked at of other events (countMax).

// rawText is the text of a raw tools/call result's first content.
func rawText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var res struct {
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %.200s: %v", raw, err)
	}
	return res.Content[0].Text
}

func callRawT(t *testing.T, b *Backend, method, params string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := b.CallRaw(ctx, method, json.RawMessage(params))
	if err != nil {
		t.Fatalf("%s %s: %v", method, params, err)
	}
	return raw
}

func TestRemoteRawCallsOverEachWayAResponseComes(t *testing.T) {
	const big = 3 * countMax
	for _, mode := range []string{"-http", "-sse"} {
		t.Run(mode, func(t *testing.T) {
			b := fixtureRemote(t, mode, TransportAuto)
			if got := rawText(t, callRawT(t, b, "tools/call", `{"name":"echo","arguments":{"text":"as bytes"}}`)); !strings.Contains(got, "as bytes") {
				t.Errorf("echo answered %q", got)
			}
			if got := rawText(t, callRawT(t, b, "tools/call", `{"name":"big","arguments":{"bytes":196608}}`)); len(got) != big {
				t.Errorf("big answered %d bytes, want %d", len(got), big)
			}
			// The go-sdk's own calls go on beside the raw ones.
			if res, err := call(t, b, "echo", map[string]any{"text": "typed"}); err != nil || res.IsError {
				t.Fatalf("typed echo after raw calls: %v %+v", err, res)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		server := mcp.NewServer(&mcp.Implementation{Name: "json", Version: "1"}, nil)
		mcp.AddTool(server, &mcp.Tool{Name: "big"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct{ Bytes int }) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil, nil
		})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: true})
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		b, _, err := connectRemote(t, Spec{URL: srv.URL}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{10, big} {
			if got := rawText(t, callRawT(t, b, "tools/call", `{"name":"big","arguments":{"Bytes":`+itoa(n)+`}}`)); len(got) != n {
				t.Errorf("big answered %d bytes, want %d", len(got), n)
			}
		}
	})
}

// A current-era remote backend (a stateless server: the go-sdk speaks that
// era over HTTP only so) refuses a request without the per-request _meta;
// mux's own lists carry none, and get it added.
func TestRemoteCurrentEraGetsItsRequestMeta(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "hello"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b, _, err := connectRemote(t, Spec{URL: srv.URL, Protocol: ProtocolAuto}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Modern() {
		t.Fatalf("protocol %s: the test needs the current era", b.InitializeResult().ProtocolVersion)
	}
	raw := callRawT(t, b, "tools/list", `{}`)
	if !strings.Contains(string(raw), `"hello"`) {
		t.Errorf("tools/list: %s", raw)
	}
	if got := rawText(t, callRawT(t, b, "tools/call", `{"name":"hello"}`)); got != "hello" {
		t.Errorf("hello answered %q", got)
	}
}

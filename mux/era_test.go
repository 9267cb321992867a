package mux

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// modernMeta is the _meta every request of the current era (2026-07-28)
// carries in place of an initialize.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

// newModernRawAgent is a rawAgent of the current era: it has sent
// server/discover, as such a client does first.
func newModernRawAgent(t testing.TB, m *Mux) *rawAgent {
	t.Helper()
	a := rawAgentOn(t, m)
	a.modernCall(0, "server/discover", `{}`)
	return a
}

// modernCall is call with the current era's _meta added to params (an
// object; extra _meta keys go in meta, e.g. `"progressToken":7`).
func (a *rawAgent) modernCall(id int, method, params string, meta ...string) []byte {
	a.t.Helper()
	m := modernMeta
	if len(meta) > 0 {
		m = strings.TrimSuffix(m, "}") + "," + strings.Join(meta, ",") + "}"
	}
	if params = strings.TrimSpace(params); params == "{}" {
		params = "{" + m + "}"
	} else {
		params = strings.TrimSuffix(params, "}") + "," + m + "}"
	}
	return a.call(id, method, params)
}

const muxServerInfo = `"io.modelcontextprotocol/serverInfo":{"name":"mcp-mux"`

// In the current era a server names itself in every result's _meta. The
// agent's server is mcp-mux: server/discover says so, and so must every
// result, whichever backend served it and by whichever path. Before, a
// result from a backend on the go-sdk named that backend ("notes").
func TestCurrentEraResultsNameMcpMux(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	a := newModernRawAgent(t, m)
	a.modernCall(1, "tools/list", `{}`)
	for i, c := range []struct{ method, params string }{
		{"tools/call", `{"name":"notes__echo","arguments":{"x":1}}`},
		{"resources/read", `{"uri":"fixture://notes/res/1"}`},
		{"prompts/get", `{"name":"notes__greet","arguments":{"name":"Zed"}}`},
		{"tools/list", `{}`},
	} {
		got := string(a.modernCall(10+i, c.method, c.params))
		if strings.Contains(got, `"error"`) {
			t.Errorf("%s: %s", c.method, got)
			continue
		}
		if !strings.Contains(got, muxServerInfo) || strings.Count(got, "serverInfo") != 1 {
			t.Errorf("%s result:\n%s\nwant _meta naming mcp-mux (and nothing else) as the server", c.method, got)
		}
	}
}

// The current era requires resultType in every result; a handshake-era
// backend sends none with a tool, prompt or read result, and the go-sdk
// adds it only to results of its own handlers. The TypeScript SDK's v2
// client, pinned to 2026-07-28, refused every tools/call through mcp-mux:
// "missing required resultType".
func TestCurrentEraResultsSayTheyAreComplete(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	a := newModernRawAgent(t, m)
	a.modernCall(1, "tools/list", `{}`)
	for i, c := range []struct{ method, params string }{
		{"tools/call", `{"name":"notes__echo","arguments":{"x":1}}`},        // passed through
		{"tools/call", `{"name":"notes__echo","arguments":{"x":1},"y":2}}`}, // the go-sdk's path: a key it knows not
		{"resources/read", `{"uri":"fixture://notes/res/1"}`},
		{"prompts/get", `{"name":"notes__greet","arguments":{"name":"Zed"}}`},
		{"tools/list", `{}`},
		{"prompts/list", `{}`},
		{"resources/list", `{}`},
		{"resources/templates/list", `{}`},
		{"resources/read", `{"uri":"mcp-mux://backends"}`},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"notes__greet"},"argument":{"name":"name","value":"Z"}}`},
		{"server/discover", `{}`},
	} {
		got := string(a.modernCall(10+i, c.method, c.params))
		if !strings.Contains(got, `"resultType":"complete"`) || strings.Count(got, `"resultType"`) != 1 {
			t.Errorf("%s %s:\n%s\nwant one resultType, complete", c.method, c.params, got)
		}
	}
}

// A read result of a backend of the handshake era has no cache hints;
// the current era requires them (the TypeScript SDK's v2 client refused
// every such read through mcp-mux: "ttlMs: expected number"). They reach
// a current-era agent as mux reads their absence: ttl 0, scope public.
// A handshake-era agent still gets the result as the backend sent it.
func TestCurrentEraReadHasCacheHints(t *testing.T) {
	spec := config.Backend{Name: "raw", Command: testkit.RawServerBin(t),
		Env: map[string]string{"RAWSERVER_RESOURCES": `{"resources":[{"uri":"raw://r/1","name":"one"}]}`}}
	m := startMux(t, spec)
	a := newModernRawAgent(t, m)
	a.modernCall(1, "tools/list", `{}`)
	got := string(a.modernCall(2, "resources/read", `{"uri":"raw://r/1"}`))
	for _, want := range []string{`"ttlMs":0`, `"cacheScope":"public"`, `"resultType":"complete"`, `"text":"raw"`} {
		if !strings.Contains(got, want) {
			t.Errorf("current-era read:\n%s\nwant %s", got, want)
		}
	}
	old := newRawAgent(t, m)
	if got := string(old.call(3, "resources/read", `{"uri":"raw://r/1"}`)); strings.Contains(got, "ttlMs") || strings.Contains(got, "resultType") {
		t.Errorf("handshake-era read:\n%s\nwant it as the backend sent it", got)
	}
}

// Progress of a current-era request reaches the agent under its own
// token, and the result keeps _meta the backend sent beside mux's name.
func TestCurrentEraProgressUsesTheAgentsToken(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	a := newModernRawAgent(t, m)
	a.modernCall(1, "tools/list", `{}`)
	got := a.modernCall(2, "tools/call", `{"name":"notes__progress","arguments":{"steps":3,"delay_ms":1}}`, `"progressToken":"agent-7"`)
	if strings.Contains(string(got), `"error"`) {
		t.Fatalf("tools/call: %s", got)
	}
	n := 0
	for _, line := range a.seen {
		if strings.Contains(string(line), `"notifications/progress"`) {
			if !strings.Contains(string(line), `"progressToken":"agent-7"`) {
				t.Errorf("progress not under the agent's token: %s", line)
			}
			n++
		}
	}
	if n != 3 {
		t.Errorf("got %d progress notifications before the result, want 3", n)
	}
}

// A current-era request the go-sdk would refuse is still refused as it
// refuses it: capabilities that are not an object, a clientInfo that is
// not one, a version mux does not speak.
func TestCurrentEraMalformedMetaIsRefusedAsBefore(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	a := newModernRawAgent(t, m)
	a.modernCall(1, "tools/list", `{}`)
	for i, meta := range []string{
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":5`,
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":"x"`,
		`"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}`,
	} {
		got := string(a.call(10+i, "tools/call", fmt.Sprintf(`{"name":"notes__echo","arguments":{},"_meta":{%s}}`, meta)))
		if !strings.Contains(got, `"code":-32602`) && !strings.Contains(got, `"code":-32022`) {
			t.Errorf("_meta {%s}: %s\nwant the go-sdk's refusal", meta, got)
		}
	}
}

// eraResult names mux in any result object, whatever its shape, gives
// it a resultType (and a read's cache hints) where it has none, and leaves
// every other member as it was.
// A current-era agent gets a result as its backend wrote it, with mux's
// name and the era's defaults put in front: its members keep their order
// and bytes, whether it has a _meta or not (one without went through a
// decode and encode, which sorted its members and cost a current-era call
// a full round of encoding/json).
func TestCurrentEraResultKeepsTheBackendsBytes(t *testing.T) {
	m := &Mux{}
	m.setServerInfo(json.RawMessage(`{"name":"mcp-mux"}`))
	for in, want := range map[string]string{
		`{"z":1,"content":[{"type":"text","text":"a\u00e9"}]}`:     `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcp-mux"}},"resultType":"complete","z":1,"content":[{"type":"text","text":"a\u00e9"}]}`,
		`{"z":1,"_meta":{"y":2},"content":[]}`:                     `{"resultType":"complete","z":1,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcp-mux"},"y":2},"content":[]}`,
		`{"z":1,"resultType":"input_required","inputRequests":{}}`: `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcp-mux"}},"z":1,"resultType":"input_required","inputRequests":{}}`,
	} {
		if got := string(m.eraResult(json.RawMessage(in), false)); got != want {
			t.Errorf("%s\n got %s\nwant %s", in, got, want)
		}
	}
}

func FuzzEraResult(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"_meta":{}}`, `{"_meta":{ }, "a":[1]}`, `{"_meta":{"x":1}}`,
		`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b"}},"content":[]}`,
		`{"a":"}","_meta":{"y":"{","io.modelcontextprotocol/serverInfo":null}}`,
		`{"_meta":null,"a":1}`, `{"_meta":[1],"a":1}`, `{"\u005fmeta":{"x":1}}`, `{"_meta":{},"_meta":{"x":1}}`,
		"{\n\"_meta\" :\t{\"io.modelcontextprotocol/serverInfo\" : 5 } }",
		`{"contents":[],"ttlMs":60000}`, `{"resultType":"input_required","cacheScope":"private"}`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	m := &Mux{}
	m.setServerInfo(json.RawMessage(`{"name":"mcp-mux","version":"t"}`))
	f.Fuzz(func(t *testing.T, in string, cacheable bool) {
		var before map[string]any
		if json.Unmarshal([]byte(in), &before) != nil || before == nil {
			return
		}
		out := m.eraResult(json.RawMessage(in), cacheable)
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("%s -> %s: not JSON: %v", in, out, err)
		}
		meta, _ := after["_meta"].(map[string]any)
		if name := fmt.Sprint(meta[mcp.MetaKeyServerInfo]); name != "map[name:mcp-mux version:t]" {
			t.Fatalf("%s -> %s: serverInfo %s", in, out, name)
		}
		delete(meta, mcp.MetaKeyServerInfo)
		was, _ := before["_meta"].(map[string]any)
		delete(was, mcp.MetaKeyServerInfo)
		if fmt.Sprint(meta) != fmt.Sprint(was) && len(was)+len(meta) > 0 {
			t.Fatalf("%s -> %s: _meta %v, want %v", in, out, meta, was)
		}
		defaults := map[string]any{"resultType": "complete"}
		if cacheable {
			defaults["ttlMs"], defaults["cacheScope"] = float64(0), "public"
		}
		for k, d := range defaults {
			want, ok := before[k]
			if !ok {
				want = d
			}
			if fmt.Sprint(after[k]) != fmt.Sprint(want) {
				t.Fatalf("%s -> %s: %s %v, want %v", in, out, k, after[k], want)
			}
		}
		for _, k := range []string{"_meta", "resultType", "ttlMs", "cacheScope"} {
			delete(after, k)
			delete(before, k)
		}
		if fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("%s -> %s: %v, want %v", in, out, after, before)
		}
	})
}

// A ping in a current-era session: without the era's _meta (as a
// keep-alive may be sent) it gets the empty result, with it the go-sdk's
// "not in this protocol", as from a direct server; mcp-mux goes on either
// way. The go-sdk's empty result panics when asked for its _meta, and
// looking there for a backend's server name killed mcp-mux (found by the
// cancellation test's current-era case).
func TestCurrentEraPingIsAnswered(t *testing.T) {
	m := startMux(t, fixture(t, "notes"))
	a := newModernRawAgent(t, m)
	if got := string(a.call(1, "ping", `{}`)); !strings.Contains(got, `"result":{}`) {
		t.Errorf("ping: %s, want the empty result", got)
	}
	if got := string(a.modernCall(2, "ping", `{}`)); !strings.Contains(got, `"code":-32601`) {
		t.Errorf("ping with the current era's _meta: %s, want -32601 (ping is not in that protocol)", got)
	}
	if got := string(a.modernCall(3, "tools/list", `{}`)); !strings.Contains(got, "notes__echo") {
		t.Errorf("tools/list after the pings: %.200s", got)
	}
}

// Resource not found is -32002 in the handshake era and -32602 in the
// current one. A backend may send either: the agent gets its own era's,
// on the go-sdk's path (before the first list) and as bytes (after).
func TestResourceNotFoundHasTheAgentsErasCode(t *testing.T) {
	m := startMux(t,
		fixture(t, "old", "-list-missing", "fixture://old/gone"),                              // -32002
		fixture(t, "new", "-list-missing", "fixture://new/gone", "-not-found-code", "-32602")) // the go-sdk's default
	legacy, modern := newRawAgent(t, m), newModernRawAgent(t, m)
	read := func(a *rawAgent, id int, uri string) string {
		params := `{"uri":"` + uri + `"}`
		if a == modern {
			return string(a.modernCall(id, "resources/read", params))
		}
		return string(a.call(id, "resources/read", params))
	}
	id := 100
	for _, path := range []string{"typed", "bytes"} {
		if path == "bytes" {
			legacy.call(1, "tools/list", `{}`) // from now on reads pass through
			modern.modernCall(1, "tools/list", `{}`)
		}
		for _, uri := range []string{"fixture://old/gone", "fixture://new/gone"} {
			for _, a := range []*rawAgent{legacy, modern} {
				id++
				want := `"code":-32002`
				if a == modern {
					want = `"code":-32602`
				}
				if got := read(a, id, uri); !strings.Contains(got, want) || !strings.Contains(got, "Resource not found") {
					t.Errorf("%s, %s, modern %v: %s, want %s", path, uri, a == modern, got, want)
				}
			}
		}
	}
}

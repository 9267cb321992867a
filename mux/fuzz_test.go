package mux

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// The seeds below run with the normal tests; `go test -fuzz FuzzX ./mux`
// explores further.

func FuzzDecodeCursor(f *testing.F) {
	for _, s := range []string{"", "x", cursor{Kind: "tools", Offset: 3}.encode(),
		cursor{Kind: "resources", Backend: "notes", Cursor: "abc"}.encode(), "eyJrIjoidG9vbHMiLCJvIjotMX0", "%%%"} {
		f.Add(s, "tools")
		f.Add(s, "resources")
	}
	items := make([]exposed[int], 250)
	f.Fuzz(func(t *testing.T, s, kind string) {
		c, err := decodeCursor(s, kind)
		if err != nil {
			if je, ok := err.(*jsonrpc.Error); !ok || je.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("error %v is not -32602", err)
			}
			return
		}
		if c.Kind != kind || c.Offset < 0 {
			t.Fatalf("accepted %+v for kind %q", c, kind)
		}
		// Paging from any accepted cursor stays in bounds.
		page(items, s, kind)
	})
}

// routingMux is a mux with three backends' catalogs and no processes.
func routingMux(t testing.TB) *Mux {
	m := New(testConfig(fixture(t, "a"), fixture(t, "b"), fixture(t, "c")), testLogger(t), "test")
	t.Cleanup(m.Close)
	set := func(mem *member, uris []string, tmpls ...string) {
		mem.cat.uris = map[string]struct{}{}
		for _, u := range uris {
			mem.cat.uris[u] = struct{}{}
		}
		for _, tm := range tmpls {
			ut, err := uritemplate.New(tm)
			if err != nil {
				t.Fatal(err)
			}
			mem.cat.compiled = append(mem.cat.compiled, compileTemplate(ut, tm))
		}
	}
	set(m.members()[0], []string{"file:///a", "shared://x"}, "file:///a/{path}")
	set(m.members()[1], []string{"shared://x", "b://1"}, "b://{id}", "{+any}")
	set(m.members()[2], nil, "c://{x}/{y}{?q}")
	m.members()[2].learned["learned://z"] = struct{}{}
	return m
}

func FuzzRouteURI(f *testing.F) {
	for _, s := range []string{"", "file:///a", "file:///a/b/c", "shared://x", "b://1", "b://", "c://1/2?q=3",
		"learned://z", "nothing", "{", "%zz", strings.Repeat("/", 300)} {
		f.Add(s)
	}
	m := routingMux(f)
	f.Fuzz(func(t *testing.T, uri string) {
		mem, ok := m.owner(nil, uri)
		// A URI goes to the first backend that claims it in any way.
		for _, cand := range m.members() {
			if cand.claims(uri) {
				if !ok || mem != cand {
					t.Fatalf("%q claimed by %s routed to %v", uri, cand.spec.Name, mem)
				}
				return
			}
		}
		again, ok2 := m.owner(nil, uri)
		if ok != ok2 || mem != again {
			t.Fatalf("routing of %q is not deterministic", uri)
		}
	})
}

func TestRoutingOrder(t *testing.T) {
	m := routingMux(t)
	for uri, want := range map[string]string{
		"shared://x":    "a", // listed by a and b: the first wins
		"b://1":         "b", // a neither lists nor matches it
		"file:///a/x":   "a", // template
		"b://77":        "b",
		"c://1/2":       "b", // b's catch-all template comes first in config order
		"learned://z":   "b", // templates beat learned URIs; b's {+any} matches
		"file:///a/x/y": "b", // {path} stops at "/"; b's {+any} does not
	} {
		got := "<none>"
		if mem, ok := m.owner(nil, uri); ok {
			got = mem.spec.Name
		}
		if got != want {
			t.Errorf("%s → %s, want %s", uri, got, want)
		}
	}
}

// FuzzNotificationDelivery feeds arbitrary notifications, decoded as the
// go-sdk decodes a backend's, into the mux's delivery path (the hooks a
// backend's notifications reach); mux must stay up and keep answering.
// The seeds hold every notification that once crashed or stalled it.
func FuzzNotificationDelivery(f *testing.F) {
	for _, s := range []struct{ method, params string }{
		{"notifications/resources/updated", `null`},
		{"notifications/resources/updated", ``},
		{"notifications/resources/updated", `{}`},
		{"notifications/resources/updated", `{"uri":5}`},
		{"notifications/resources/updated", `{"uri":"fixture://a/res/1"}`},
		{"notifications/resources/updated", `{"uri":"fixture://a/res/1/` + strings.Repeat("/", 1_600_000) + `"}`},
		{"notifications/resources/updated", `{"uri":"fixture://a/res/1","_meta":{"x":[1,{"y":null}]}}`},
		{"notifications/progress", `null`},
		{"notifications/progress", `{"progressToken":{},"progress":1}`},
		{"notifications/progress", `{"progressToken":"t","progress":"x"}`},
		{"notifications/tools/list_changed", `5`},
		{"notifications/resources/list_changed", `null`},
		{"notifications/prompts/list_changed", `{}`},
	} {
		f.Add(s.method, s.params)
	}
	m := startMux(f, fixture(f, "a"))
	cs := connect(f, m, newUpdates().opts())
	subscribe(f, cs, "fixture://a/res/1")
	mem := m.members()[0]
	h := mem.hooks()
	f.Fuzz(func(t *testing.T, method, params string) {
		deliver := func(p any) bool {
			if params == "" || params == "null" {
				return false // the backend's connection drops these (logged)
			}
			return json.Unmarshal([]byte(params), p) == nil
		}
		switch method {
		case "notifications/resources/updated":
			var p *mcp.ResourceUpdatedNotificationParams
			if deliver(&p) && p != nil {
				h.ResourceUpdated(p)
			}
		case "notifications/progress":
			var p *mcp.ProgressNotificationParams
			if deliver(&p) && p != nil {
				h.Progress(p)
			}
		case "notifications/tools/list_changed":
			h.ToolsChanged()
		case "notifications/prompts/list_changed":
			h.PromptsChanged()
		case "notifications/resources/list_changed":
			h.ResourcesChanged()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("mux stopped answering after %s %.200s: %v", method, params, err)
		}
	})
}

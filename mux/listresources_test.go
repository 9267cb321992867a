package mux

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A backend's resources/list result is read as the go-sdk's types would
// read it (null entries left out, a wrong type an error), and each resource
// goes on byte for byte, with what the types do not know.
func TestResourcePageIsReadAsTheTypesWouldAndKeptAsSent(t *testing.T) {
	cases := []struct {
		name, raw string
		uris      []string // nil: an error
		next      string
		cache     mcp.Cacheable
	}{
		{"plain", `{"resources":[{"uri":"a://1","name":"one"},{"name":"two","uri":"a://2"}],"nextCursor":"c2","ttlMs":5,"cacheScope":"private"}`,
			[]string{"a://1", "a://2"}, "c2", mcp.Cacheable{TTLMs: 5, CacheScope: "private"}},
		{"null entries", `{"resources":[null,{"uri":"a://1"},null]}`, []string{"a://1"}, "", mcp.Cacheable{}},
		{"escaped uri", `{"resources":[{"uri":"a://x\"y\u00e9"}]}`, []string{`a://x"yé`}, "", mcp.Cacheable{}},
		{"escaped key", `{"resources":[{"\u0075ri":"a://1"}]}`, []string{"a://1"}, "", mcp.Cacheable{}},
		{"escaped top-level key", `{"r\u0065sources":[{"uri":"a://1"}]}`, []string{"a://1"}, "", mcp.Cacheable{}},
		{"no uri", `{"resources":[{"name":"n"}]}`, []string{""}, "", mcp.Cacheable{}},
		{"unknown fields", `{"resources":[{"uri":"a://1","x-new":{"deep":[1,2]}}],"x-top":1}`, []string{"a://1"}, "", mcp.Cacheable{}},
		{"no resources", `{}`, []string{}, "", mcp.Cacheable{}},
		{"null resources", `{"resources":null}`, []string{}, "", mcp.Cacheable{}},
		{"resources not an array", `{"resources":{"uri":"a://1"}}`, nil, "", mcp.Cacheable{}},
		{"a resource not an object", `{"resources":[{"uri":"a://1"},7]}`, nil, "", mcp.Cacheable{}},
		{"uri not a string", `{"resources":[{"uri":7}]}`, nil, "", mcp.Cacheable{}},
		{"cursor not a string", `{"resources":[],"nextCursor":3}`, nil, "", mcp.Cacheable{}},
		{"ttl not a number", `{"resources":[],"ttlMs":"5"}`, nil, "", mcp.Cacheable{}},
		{"not an object", `[{"uri":"a://1"}]`, nil, "", mcp.Cacheable{}},
		{"null", `null`, nil, "", mcp.Cacheable{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			page, err := parseResourcePage(json.RawMessage(c.raw))
			if c.uris == nil {
				if err == nil {
					t.Fatalf("read %s as %+v, want an error", c.raw, page)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(page.uris, c.uris) || page.next != c.next || page.cache != c.cache {
				t.Fatalf("got uris %q next %q hints %+v, want %q %q %+v", page.uris, page.next, page.cache, c.uris, c.next, c.cache)
			}
			if len(page.resources) != len(page.uris) {
				t.Fatalf("%d resources for %d uris", len(page.resources), len(page.uris))
			}
			// What goes to the agent has each resource as sent, and decodes
			// to the go-sdk's type.
			out := resourcesJSON(page.resources, "next", normalCache(page.cache))
			for _, r := range page.resources {
				if !strings.Contains(string(out), string(r)) {
					t.Errorf("%s is not in %s as sent", r, out)
				}
			}
			var res mcp.ListResourcesResult
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if len(res.Resources) != len(c.uris) || res.NextCursor != "next" || res.CacheScope == "" {
				t.Fatalf("%s decodes to %+v", out, res)
			}
			for i, r := range res.Resources {
				if r.URI != c.uris[i] {
					t.Errorf("resource %d: uri %q, want %q", i, r.URI, c.uris[i])
				}
			}
		})
	}
}

// A resource reaches a stdio agent's resources/list as its backend wrote
// it, with fields the go-sdk's types do not know (from a newer revision, or
// an extension) and numbers as written. Before, the typed round trip
// dropped them.
func TestListedResourceReachesTheAgentAsTheBackendWroteIt(t *testing.T) {
	const resource = `{"uri":"raw://r/1","name":"one","x-vendor":{"rank":12345678901234567890,"tags":["a"],"weight":1.10}}`
	spec := config.Backend{Name: "raw", Command: testkit.RawServerBin(t),
		Env: map[string]string{"RAWSERVER_RESOURCES": `{"resources":[null,` + resource + `]}`}}
	a := newRawAgent(t, startMux(t, spec))
	a.call(2, "tools/list", `{}`) // once the backends started, lists go as bytes
	line := a.call(3, "resources/list", `{}`)
	if !bytes.Contains(line, []byte(resource)) {
		t.Fatalf("resources/list answered\n%s\nwithout the resource as the backend wrote it:\n%s", line, resource)
	}
}

// A session on the go-sdk's path (not stdio) gets a backend's resources
// decoded into the types: one they cannot hold (a wrong type in a field
// they know) is left out, and the rest of the page still arrives, as when
// mux decoded each backend page itself.
func TestResourceTheTypesCannotHoldIsLeftOutOfATypedSessionsList(t *testing.T) {
	spec := config.Backend{Name: "raw", Command: testkit.RawServerBin(t),
		Env: map[string]string{"RAWSERVER_RESOURCES": `{"resources":[{"uri":"raw://r/1","size":1.5},{"uri":"raw://r/2","name":"two"}]}`}}
	cs := connectAgent(t, startMux(t, spec), agent(nil))
	res, err := cs.ListResources(testkit.CtxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	if len(uris) == 0 || uris[0] != "raw://r/2" || slices.Contains(uris, "raw://r/1") {
		t.Errorf("listed %v, want raw://r/2 (and mcp-mux's own) without raw://r/1", uris)
	}
}

// A resource the go-sdk's types cannot hold still routes: a stdio agent
// is shown it (its list goes as bytes), so reading it must reach its
// backend rather than fail as unknown.
func TestResourceTheTypesCannotHoldStillRoutes(t *testing.T) {
	spec := config.Backend{Name: "raw", Command: testkit.RawServerBin(t),
		Env: map[string]string{"RAWSERVER_RESOURCES": `{"resources":[{"uri":"raw://r/1","size":1.5}]}`}}
	a := newRawAgent(t, startMux(t, spec))
	a.call(2, "tools/list", `{}`) // once the backends started
	if line := a.call(3, "resources/list", `{}`); !bytes.Contains(line, []byte(`"raw://r/1"`)) {
		t.Fatalf("resources/list answered %s", line)
	}
	if line := a.call(4, "resources/read", `{"uri":"raw://r/1"}`); !bytes.Contains(line, []byte(`"text":"raw"`)) {
		t.Fatalf("resources/read of a listed resource answered %s", line)
	}
}

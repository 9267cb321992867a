package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// walkResources reads every page of resources/list.
func walkResources(t *testing.T, cs *mcp.ClientSession) []*mcp.ListResourcesResult {
	t.Helper()
	var pages []*mcp.ListResourcesResult
	cur := ""
	for len(pages) < 100 {
		res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cur})
		if err != nil {
			t.Fatalf("resources/list page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, res)
		if cur = res.NextCursor; cur == "" {
			return pages
		}
	}
	t.Fatal("resources/list goes on past 100 pages")
	return nil
}

// resources/list is made from the backends' pages as they sent them for a
// stdio agent, and through the go-sdk's types for an agent over HTTP; from
// a stdio backend's bytes, and from a remote backend through the go-sdk's
// client. Both agents see the same pages: the same resources, every field
// of each, cache hints and cursors where the backends' pages end, null
// entries left out, a URI an earlier backend owns left out, and mcp-mux's
// own resources last.
func TestResourcesListIsTheSameOverStdioAndHTTP(t *testing.T) {
	web := testkit.StartRemoteFixture(t, "-http", "-name", "web", "-resources", "3", "-cache-ttl-ms", "700",
		"-list-uris", "fixture://local/res/2,other://web/x")
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\n# Every backend in the first list, however loaded the machine.\nfirst_list_wait = \"60s\"\n\n"+
		fmt.Sprintf("[[backend]]\nname = \"local\"\ncommand = %q\nargs = [\"-name\", \"local\", \"-resources\", \"5\", \"-page-size\", \"2\", \"-null-entries\", \"-cache-ttl-ms\", \"300\", \"-cache-scope\", \"private\"]\n\n", testkit.FixtureBin(t))+
		remoteBackend("web", web, ""))

	stdio := walkResources(t, runMux(t, cfg).cs)
	overHTTP := walkResources(t, connectHTTP(t, startHTTPMux(t, cfg).url, "").cs)

	var uris []string
	for _, p := range stdio {
		for _, r := range p.Resources {
			uris = append(uris, r.URI)
		}
	}
	want := []string{
		"fixture://local/res/1", "fixture://local/res/2", "fixture://local/res/3", "fixture://local/res/4", "fixture://local/res/5",
		"fixture://web/res/1", "fixture://web/res/2", "fixture://web/res/3", "other://web/x",
		"mcp-mux://subscriptions", "mcp-mux://backends",
	}
	if !slices.Equal(uris, want) {
		t.Errorf("resources over stdio:\n%v\nwant\n%v", uris, want)
	}
	if len(stdio) != len(overHTTP) {
		t.Fatalf("%d pages over stdio, %d over HTTP", len(stdio), len(overHTTP))
	}
	for i := range stdio {
		a, b := stdio[i], overHTTP[i]
		if !reflect.DeepEqual(a.Resources, b.Resources) {
			t.Errorf("page %d: over stdio %+v, over HTTP %+v", i+1, a.Resources, b.Resources)
		}
		if a.Cacheable != b.Cacheable || (a.NextCursor == "") != (b.NextCursor == "") {
			t.Errorf("page %d: over stdio %+v next %q, over HTTP %+v next %q", i+1, a.Cacheable, a.NextCursor, b.Cacheable, b.NextCursor)
		}
	}
	// local's pages carry local's hints, web's page web's; the last page,
	// with mcp-mux's own, the more cautious of web's and mcp-mux's.
	for i, want := range []mcp.Cacheable{{TTLMs: 300, CacheScope: "private"}, {TTLMs: 300, CacheScope: "private"}, {TTLMs: 300, CacheScope: "private"}, {TTLMs: 0, CacheScope: "private"}} {
		if i < len(stdio) && stdio[i].Cacheable != want {
			t.Errorf("page %d hints %+v, want %+v", i+1, stdio[i].Cacheable, want)
		}
	}
	if r := stdio[0].Resources[0]; r.Name == "" || r.MIMEType == "" {
		t.Errorf("a resource lost its fields: %+v", r)
	}
}

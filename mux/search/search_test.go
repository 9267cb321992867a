package search

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestWords(t *testing.T) {
	for in, want := range map[string]string{
		"create_issue":           "create issue",
		"API-post-search":        "api post search",
		"createIssue":            "create issue createissue",
		"HTTPServer listens":     "http server httpserver listens",
		"on GitHub.":             "on git hub github",
		"MCP":                    "mcp",
		"browser.navigate_back":  "browser navigate back",
		"d1_query r2_put_object": "d1 query r2 put object",
		"Standard_D4s_v5":        "standard d4s v5",
		"  what's   inside? ":    "what s inside",
		"élan Über":              "élan über",
	} {
		if got := strings.Join(words(nil, in), " "); got != want {
			t.Errorf("words(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStem(t *testing.T) {
	same := [][]string{
		{"create", "creates", "created", "creating"},
		{"file", "files"},
		{"entity", "entities"},
		{"match", "matches"},
		{"delete", "deleted", "deleting", "deletes"},
		{"commit", "commits", "committed", "committing"},
		{"list", "lists", "listed", "listing"},
		{"copy", "copied", "copies"},
		{"address", "addresses"},
		{"directory", "directories"},
		{"generate", "generation", "generations"},
		{"delete", "deletion"},
		{"migrate", "migration", "migrations"},
	}
	for _, g := range same {
		for _, w := range g[1:] {
			if stem(w) != stem(g[0]) {
				t.Errorf("stem(%q) = %q, stem(%q) = %q: want the same", w, stem(w), g[0], stem(g[0]))
			}
		}
	}
	for _, w := range []string{"string", "thing", "status", "access", "call", "d1", "s3", "go", "function", "selection"} {
		if got := stem(w); got != w && got+"e" != w {
			t.Errorf("stem(%q) = %q: want it kept", w, got)
		}
	}
	if stem("status") == stem("state") {
		t.Errorf("status and state stem alike")
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct{ in, kind, keep string }{
		{"https://github.com/golang/go", "url", "github"},
		{"https://docs.stripe.com/api", "url", "docs stripe"},
		{"http://localhost:3000/api/items", "url", ""},
		{"https://www.example.com", "url", ""},
		{"github.com/torvalds/linux", "url", "github"},
		{"www.bbc.co.uk", "url", "bbc"},
		{"/home/me/projects/app/src", "path", ""},
		{"./packages", "path", ""},
		{"~/notes", "path", ""},
		{"config/settings.yaml", "path", ""},
		{"README.md", "file", ""},
		{"*.test.js", "pattern", ""},
		{"and/or", "", "and/or"},
		{"e.g.", "", "e.g."},
		{"48.8584,", "", "48.8584,"},
		{"test@example.com", "", "test@example.com"},
		{"v1.2", "", "v1.2"},
		{"issue", "", "issue"},
		{"document.title", "code", ""},
		{"window.location.href", "code", ""},
		{"alert(1)", "code", ""},
		{"document.querySelector('a')", "code", ""},
		{"node.js", "file", ""},
		{"#17", "number", ""},
		{"#general,", "channel", ""},
		{"#dev-ops", "channel", ""},
		{"#", "", "#"},
	} {
		kind, keep := classify(c.in)
		if kind != c.kind || kind != "" && keep != c.keep {
			t.Errorf("classify(%q) = %q, %q; want %q, %q", c.in, kind, keep, c.kind, c.keep)
		}
	}
}

func TestQueryTerms(t *testing.T) {
	terms := func(q string) (own, other []string) {
		for _, qt := range defaults.queryTerms(q) {
			if qt.weight == 1 {
				own = append(own, qt.term)
			} else {
				other = append(other, qt.term)
			}
		}
		return
	}
	own, other := terms("With Puppeteer, go to https://www.example.com/path/to/page?q=1")
	if !slices.Equal(own, []string{"puppeteer", "go"}) {
		t.Errorf("own terms %q: want puppeteer, go (no https, www, com, path)", own)
	}
	if !slices.Contains(other, paramMark+"url") || !slices.Contains(other, "navigat") {
		t.Errorf("other terms %q: want =url (the URL) and navigat (go's synonym)", other)
	}
	if own, _ := terms("look up the PR"); !slices.Equal(own, []string{"look", "up", "pr"}) {
		t.Errorf("own terms %q", own)
	}
	if _, other := terms("look up the PR"); !slices.Contains(other, "search") || !slices.Contains(other, "pull") || !slices.Contains(other, "request") {
		t.Errorf("look up the PR: synonyms %q, want search (look up) and pull request (pr)", other)
	}
	if own, other := terms("run document.title in the page"); slices.Contains(own, "document") || !slices.Contains(other, "javascript") {
		t.Errorf("code: own %q, other %q: want javascript, not document", own, other)
	}
	if _, other := terms("which buckets do I have?"); !slices.Contains(other, "list") {
		t.Errorf("which ... do I have: %q, want list", other)
	}
	if own, other := terms("tell #deploys about PR #12"); slices.Contains(own, "deploy") || !slices.Contains(other, paramMark+"channel") || !slices.Contains(other, paramMark+"number") {
		t.Errorf("#channel, #number: own %q, other %q", own, other)
	}
	if _, other := terms("hit Enter"); !slices.Contains(other, "key") || !slices.Contains(other, "press") {
		t.Errorf("hit Enter: %q, want key and press", other)
	}
	if _, other := terms("which bucket holds the logs"); slices.Contains(other, "list") {
		t.Errorf("which ... holds: %q, want no list", other)
	}
}

// docs is a small catalog in the shape of the real one.
func testDocs() []Doc {
	schema := func(props ...string) json.RawMessage {
		m := map[string]any{}
		for i := 0; i+1 < len(props); i += 2 {
			m[props[i]] = map[string]any{"type": "string", "description": props[i+1]}
		}
		b, _ := json.Marshal(map[string]any{"type": "object", "properties": m})
		return b
	}
	d := func(backend, tool, desc string, s json.RawMessage) Doc {
		return Doc{Name: backend + "__" + tool, Tool: tool, Description: desc, InputSchema: s, Backend: backend, About: backend + " MCP server"}
	}
	return []Doc{
		d("github", "create_issue", "Create a new issue in a GitHub repository", schema("owner", "Repository owner", "repo", "Repository name", "title", "Issue title")),
		d("github", "list_issues", "List issues in a GitHub repository", schema("owner", "Repository owner", "repo", "Repository name")),
		d("github", "search_code", "Search for code across GitHub repositories", schema("q", "Search query")),
		d("gitlab", "create_issue", "Create a new issue in a GitLab project", schema("project_id", "Project ID or URL-encoded path", "title", "Issue title")),
		d("gitlab", "create_merge_request", "Create a new merge request in a GitLab project", schema("project_id", "Project ID", "source_branch", "Branch of changes")),
		d("puppeteer", "puppeteer_navigate", "Navigate to a URL", schema("url", "URL to navigate to")),
		d("puppeteer", "puppeteer_screenshot", "Take a screenshot of the current page", schema("name", "Name of the screenshot")),
		d("playwright", "browser_navigate", "Navigate to a URL", schema("url", "The URL to navigate to")),
		d("playwright", "browser_take_screenshot", "Take a screenshot of the current page", schema("filename", "File name to save the screenshot to")),
		d("filesystem", "list_directory", "Get a detailed listing of all files and directories in a specified path", schema("path", "")),
		d("filesystem", "read_text_file", "Read the complete contents of a file as text", schema("path", "")),
		d("filesystem", "read_file", "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.", schema("path", "")),
		d("google-maps", "maps_geocode", "Convert an address into geographic coordinates", schema("address", "The address to geocode")),
		d("azure", "functionapp", "Function App operations", schema("intent", "")),
		d("azure", "functions", "Azure Functions code generation", schema("intent", "")),
	}
}

func names(docs []Doc, hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, docs[h.Doc].Name)
	}
	return out
}

func TestSearch(t *testing.T) {
	docs := testDocs()
	ix := New(docs)
	for _, c := range []struct{ query, want string }{
		{"create an issue on GitLab", "gitlab__create_issue"},
		{"open a new bug in the GitHub repo", "github__create_issue"},
		{"with Puppeteer, go to https://news.ycombinator.com", "puppeteer__puppeteer_navigate"},
		{"playwright: screenshot of the page", "playwright__browser_take_screenshot"},
		{"open a merge request", "gitlab__create_merge_request"},
		{"what's in /home/me/src", "filesystem__list_directory"},
		{"read the file notes/todo.txt", "filesystem__read_text_file"}, // not the deprecated read_file
		{"latitude and longitude of an address", "google-maps__maps_geocode"},
		{"look up code that calls useEffect", "github__search_code"},
		{"list my Function Apps", "azure__functionapp"}, // function app: functionapp
		// A tool's name, or the start of one, first.
		{"github__list_issues", "github__list_issues"},
		{"GITHUB__LIST", "github__list_issues"},
		{"maps_geocode", "google-maps__maps_geocode"},
	} {
		hits := ix.Search(c.query, 3, nil)
		if len(hits) == 0 || docs[hits[0].Doc].Name != c.want {
			t.Errorf("Search(%q) = %v, want %s first", c.query, names(docs, hits), c.want)
		}
	}
}

func TestSearchExactNameTies(t *testing.T) {
	docs := testDocs()
	hits := New(docs).Search("create_issue", 2, nil)
	if got := names(docs, hits); !slices.Equal(got, []string{"github__create_issue", "gitlab__create_issue"}) {
		t.Errorf("Search(create_issue) = %v: want both create_issue tools first, by name", got)
	}
}

func TestSearchLimitsAndKeep(t *testing.T) {
	docs := testDocs()
	ix := New(docs)
	if hits := ix.Search("issue", 0, nil); hits != nil {
		t.Errorf("limit 0: %v", hits)
	}
	if hits := ix.Search("", 5, nil); len(hits) != 0 {
		t.Errorf("empty query: %v", names(docs, hits))
	}
	if hits := ix.Search("the of and", 5, nil); len(hits) != 0 {
		t.Errorf("stopwords only: %v", names(docs, hits))
	}
	if hits := ix.Search("zyzzyva", 5, nil); len(hits) != 0 {
		t.Errorf("unknown word: %v", names(docs, hits))
	}
	if hits := ix.Search("issue", 1, nil); len(hits) != 1 {
		t.Errorf("limit 1: %v", names(docs, hits))
	}
	hits := ix.Search("issue", 10, func(i int) bool { return docs[i].Backend == "gitlab" })
	if len(hits) == 0 {
		t.Fatal("keep gitlab: no hits")
	}
	for _, h := range hits {
		if docs[h.Doc].Backend != "gitlab" {
			t.Errorf("keep gitlab: got %s", docs[h.Doc].Name)
		}
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("not best first: %v", hits)
		}
	}
	if hits := New(nil).Search("issue", 5, nil); hits != nil {
		t.Errorf("no docs: %v", hits)
	}
}

// TestSearchDeterministic: the same docs, in any order, and the same query
// give the same tools in the same order, and equal scores are in name order.
func TestSearchDeterministic(t *testing.T) {
	docs := testDocs()
	// Copies that differ only in their backend's name score the same
	// except for the server field: use ones with no server words.
	for i := range 3 {
		for _, d := range testDocs() {
			d.Backend = fmt.Sprintf("copy%d", i)
			d.Name = d.Backend + "__" + d.Tool
			d.About = ""
			docs = append(docs, d)
		}
	}
	want := names(docs, New(docs).Search("navigate to a URL and take a screenshot", 20, nil))
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := slices.Clone(docs)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		ix := New(shuffled)
		hits := ix.Search("navigate to a URL and take a screenshot", 20, nil)
		if got := names(shuffled, hits); !slices.Equal(got, want) {
			t.Fatalf("order depends on the docs' order:\n%v\n%v", got, want)
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score == hits[i-1].Score && shuffled[hits[i].Doc].Name < shuffled[hits[i-1].Doc].Name {
				t.Errorf("tie not by name: %s before %s", shuffled[hits[i-1].Doc].Name, shuffled[hits[i].Doc].Name)
			}
		}
	}
}

func TestSearchConcurrent(t *testing.T) {
	docs := testDocs()
	ix := New(docs)
	want := names(docs, ix.Search("create issue", 5, nil))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if got := names(docs, ix.Search("create issue", 5, nil)); !slices.Equal(got, want) {
					t.Errorf("concurrent search: %v, want %v", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestParamText(t *testing.T) {
	text, names := paramText(json.RawMessage(`{"type":"object","$defs":{"x":{"properties":{"secretDef":{}}}},
		"properties":{"url":{"type":"string","description":"The page"},"opts":{"type":"object","properties":{"deep":{"description":"nested"}}},
		"items":{"type":"array","items":{"anyOf":[{"properties":{"alt":{}}}]}},
		"flag":true,"tuple":{"items":[{},{}],"description":7},"after":{"description":"still read"}}}`))
	for _, w := range []string{"url", "The page", "opts", "deep", "nested", "alt", "still read"} {
		if !strings.Contains(text, w) {
			t.Errorf("param text %q lacks %q", text, w)
		}
	}
	if strings.Contains(text, "secretDef") {
		t.Errorf("param text %q has $defs", text)
	}
	if !slices.Equal(names, []string{"after", "flag", "items", "opts", "tuple", "url"}) {
		t.Errorf("top-level names %q", names)
	}
	if text, names := paramText(json.RawMessage(`not json`)); text != "" || names != nil {
		t.Errorf("bad schema: %q %q", text, names)
	}
}

func TestToolDefinitions(t *testing.T) {
	var tools []struct {
		Name, Title, Description string
		InputSchema              struct {
			Type       string
			Properties map[string]struct{ Type string }
			Required   []string
		}
	}
	if err := json.Unmarshal(ToolDefinitions(), &tools); err != nil {
		t.Fatal(err)
	}
	if len(tools) != 3 || tools[0].Name != SearchToolName || tools[1].Name != CallReadOnlyToolName || tools[2].Name != CallToolName {
		t.Fatalf("tools: %+v", tools)
	}
	s := tools[0].InputSchema
	if s.Properties["query"].Type != "string" || s.Properties["limit"].Type != "integer" || s.Properties["backend"].Type != "string" || !slices.Equal(s.Required, []string{"query"}) {
		t.Errorf("search_tools schema: %+v", s)
	}
	for _, c := range tools[1:] {
		s := c.InputSchema
		if s.Properties["name"].Type != "string" || s.Properties["arguments"].Type != "object" || !slices.Equal(s.Required, []string{"name"}) {
			t.Errorf("%s schema: %+v", c.Name, s)
		}
	}
	for _, tool := range tools {
		if tool.InputSchema.Type != "object" || tool.Description == "" || tool.Title == "" {
			t.Errorf("%s: %+v", tool.Name, tool)
		}
	}
	if !strings.Contains(string(ToolDefinitions()), fmt.Sprintf(`"default":%d`, DefaultLimit)) || !strings.Contains(string(ToolDefinitions()), fmt.Sprintf(`"maximum":%d`, MaxLimit)) {
		t.Errorf("limit's default and maximum are not DefaultLimit and MaxLimit")
	}
}

func TestAction(t *testing.T) {
	for _, c := range []struct {
		tool string
		want int8
	}{
		{"get_issue", actRead}, {"create_issue", actWrite}, {"kv_put", actWrite}, {"API-get-block-children", actRead},
		{"API-post-search", actRead}, {"API-post-page", actWrite}, {"browser_navigate", actNone}, {"list_commits", actRead},
	} {
		if got, _ := toolAction(c.tool); got != c.want {
			t.Errorf("toolAction(%q) = %d, want %d", c.tool, got, c.want)
		}
	}
	for _, c := range []struct {
		query string
		want  int8
	}{
		{"what value is stored under the key \"flags\"?", actRead},
		{"in Chrome DevTools, which requests did the page make?", actRead},
		{"show me README.md from github.com/torvalds/linux", actRead},
		{"store a value under key \"config\"", actWrite},
		{"firecrawl: check the status of a crawl", actRead},
		{"add Carol to the graph", actWrite},
		{"with Puppeteer, go to https://example.com", actNone},
		{"make an HTTP GET request to https://api.example.com/users", actNone},
		{"are there any open issues mentioning \"leak\"?", actRead},
		{"did the CI checks pass on PR #88?", actRead},
		{"how many rows does the orders table have?", actRead},
		{"how do I create a branch on GitLab?", actWrite},
		{"do a search for rust crates", actRead},
		{"can you delete the key session:1 from KV?", actWrite},
	} {
		if got, _ := queryAction(c.query); got != c.want {
			t.Errorf("queryAction(%q) = %d, want %d", c.query, got, c.want)
		}
	}
}

func TestSense(t *testing.T) {
	for _, c := range []struct {
		tool, query string
		want        int8 // the tool's sense and the query's
	}{
		{"delete_observations", "forget that Bob lives in Paris", senseDelete},
		{"add_observations", "remember that Alice prefers tea", senseCreate},
		{"kv_put", "store a value under key \"config\"", senseCreate},
	} {
		_, tv := toolAction(c.tool)
		_, qv := queryAction(c.query)
		if verbSense(tv) != c.want || verbSense(qv) != c.want {
			t.Errorf("%s: %d, %q: %d, want %d", c.tool, verbSense(tv), c.query, verbSense(qv), c.want)
		}
	}
	if _, v := toolAction("update_issue"); verbSense(v) != senseNone {
		t.Errorf("update_issue: %d, want none", verbSense(v))
	}
}

func TestHasCoordinates(t *testing.T) {
	for q, want := range map[string]bool{
		"which street address is at 48.8584, 2.2945?": true,
		"what is at -33.8568 151.2153":                true,
		"version 1.2, 3.4":                            false,
		"the 2022 world cup":                          false,
		"at 48.8584, 200.5":                           false,
	} {
		if got := hasCoordinates(q); got != want {
			t.Errorf("hasCoordinates(%q) = %v, want %v", q, got, want)
		}
	}
}

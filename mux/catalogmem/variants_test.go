package catalogmem

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// entryFor is a catalog of one tool, named tool, taken for caps.
func entryFor(caps, tool string) Entry {
	return Entry{ClientCapabilities: json.RawMessage(caps),
		Tools: []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, tool))}}
}

// toolOf is the name of the tool of a Lookup's entryFor.
func toolOf(t *testing.T) func(Entry, bool) string {
	return func(e Entry, ok bool) string { return toolName(t, e, ok) }
}

func toolName(t *testing.T, e Entry, ok bool) string {
	t.Helper()
	if !ok {
		return "(none)"
	}
	var tool struct{ Name string }
	if len(e.Tools) != 1 || json.Unmarshal(e.Tools[0], &tool) != nil {
		t.Fatalf("not an entryFor: %+v", e)
	}
	return tool.Name
}

// A backend seen by clients of other capabilities has a catalog for each,
// the last seen first, found by another run; the oldest goes past
// maxVariants.
func TestACatalogIsRememberedForEachClientsCapabilities(t *testing.T) {
	path := catalogPath(t)
	id, name := sampleIdentity(), toolOf(t)
	s := Open(path)
	for i, caps := range []string{`{}`, `{"roots":{}}`, `{"sampling":{}}`} {
		if changed, err := s.Put(id, entryFor(caps, fmt.Sprint("t", i))); err != nil || !changed {
			t.Fatalf("Put for %s = %v, %v; want true, nil", caps, changed, err)
		}
	}
	again := Open(path)
	if got := name(again.Lookup(id)); got != "t2" {
		t.Errorf("Lookup = %s, want t2, the last seen", got)
	}
	for i, caps := range []string{`{}`, `{ "roots": {} }`, `{"sampling":{}}`} {
		if got, want := name(again.LookupFor(id, json.RawMessage(caps))), fmt.Sprint("t", i); got != want {
			t.Errorf("LookupFor %s = %s, want %s", caps, got, want)
		}
	}
	if got := name(again.LookupFor(id, json.RawMessage(`{"elicitation":{}}`))); got != "(none)" {
		t.Errorf("LookupFor capabilities never seen = %s, want none", got)
	}

	// The same again, unchanged: the last seen, and written to say so.
	if changed, err := again.Put(id, entryFor(`{}`, "t0")); err != nil || changed {
		t.Fatalf("Put of what was remembered = %v, %v; want false, nil", changed, err)
	}
	if got := name(Open(path).Lookup(id)); got != "t0" {
		t.Errorf("Lookup after t0 was seen again = %s, want t0", got)
	}
	// A changed catalog for some capabilities replaces only theirs.
	if changed, _ := again.Put(id, entryFor(`{"roots":{}}`, "t1b")); !changed {
		t.Error("Put of a changed catalog reported no change")
	}
	if got := name(Open(path).LookupFor(id, json.RawMessage(`{"sampling":{}}`))); got != "t2" {
		t.Errorf("the sampling client's catalog = %s after another's changed, want t2", got)
	}

	for i := range maxVariants {
		if _, err := again.Put(id, entryFor(fmt.Sprintf(`{"extensions":{"x%d":{}}}`, i), "x")); err != nil {
			t.Fatal(err)
		}
	}
	last := Open(path)
	if got := name(last.LookupFor(id, json.RawMessage(`{"extensions":{"x0":{}}}`))); got != "x" {
		t.Errorf("the oldest of the last %d = %s, want x", maxVariants, got)
	}
	if got := name(last.LookupFor(id, json.RawMessage(`{"roots":{}}`))); got != "(none)" {
		t.Errorf("past %d catalogs the oldest stays: %s", maxVariants, got)
	}
	data, err := os.ReadFile(fileOf(path, id))
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil || len(r.Others) != maxVariants-1 {
		t.Errorf("the file holds %d others (%v), want %d", len(r.Others), err, maxVariants-1)
	}
}

// A failure noted is of the backend, whichever client's catalog is
// looked up, and the catalogs of the others stay.
func TestAFailureIsOfEveryCatalogOfTheBackend(t *testing.T) {
	path := catalogPath(t)
	id := sampleIdentity()
	s := Open(path)
	s.Put(id, entryFor(`{}`, "a"))
	s.Put(id, entryFor(`{"roots":{}}`, "b"))
	if err := s.NoteFailure(id, Failure{Reason: "exit 1"}); err != nil {
		t.Fatal(err)
	}
	e, ok := Open(path).LookupFor(id, json.RawMessage(`{}`))
	if toolName(t, e, ok) != "a" || e.Failure == nil {
		t.Errorf("LookupFor {} after a failure = %+v, %v; want a, with the failure", e, ok)
	}
}

func TestShapeKeepsWhatMayChangeAList(t *testing.T) {
	for _, c := range []struct {
		caps *mcp.ClientCapabilities
		want string
	}{
		{nil, `{}`},
		{&mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}}, `{"roots":{}}`},
		{&mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{Tools: &mcp.SamplingToolsCapabilities{}}}, `{"sampling":{"tools":{}}}`},
		{&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}, `{"elicitation":{}}`},
		{&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}, `{"elicitation":{"form":{},"url":{}}}`},
		{&mcp.ClientCapabilities{Extensions: map[string]any{"io.modelcontextprotocol/ui": map[string]any{"mimeTypes": []string{"text/html"}}}}, `{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html"]}}}`},
	} {
		if got := string(Shape(c.caps)); got != c.want {
			t.Errorf("Shape = %s, want %s", got, c.want)
		}
	}
}

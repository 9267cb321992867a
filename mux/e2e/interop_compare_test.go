package e2e

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Comparing what the TypeScript client saw of a reference server directly
// ("bare") and through mcp-mux: field by field, with the known gaps of
// interopFieldGaps logged instead of failed. Shared by the stdio tests
// (interop_test.go) and the HTTP ones (interop_http_test.go).

// show is v as compact JSON, for messages.
func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// fieldDiff is one field that differs between bare and mux.
type fieldDiff struct{ field, text string }

// diffFields lists every field whose value differs between bare and mux
// (JSON objects), skipping the ones named in skip.
func diffFields(bare, mux map[string]any, skip ...string) []fieldDiff {
	var keys []string
	for k := range bare {
		keys = append(keys, k)
	}
	for k := range mux {
		if _, ok := bare[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var diffs []fieldDiff
	for _, k := range keys {
		if slices.Contains(skip, k) {
			continue
		}
		bv, bok := bare[k]
		mv, mok := mux[k]
		switch {
		case !mok:
			diffs = append(diffs, fieldDiff{k, fmt.Sprintf("%s: missing through mcp-mux (bare: %s)", k, show(bv))})
		case !bok:
			diffs = append(diffs, fieldDiff{k, fmt.Sprintf("%s: added by mcp-mux: %s", k, show(mv))})
		case !reflect.DeepEqual(bv, mv):
			diffs = append(diffs, fieldDiff{k, fmt.Sprintf("%s: bare %s, through mcp-mux %s", k, show(bv), show(mv))})
		}
	}
	return diffs
}

// diffLog fails the test for each difference, except in a field of
// interopFieldGaps: those it gathers and logs once per field in flush.
type diffLog struct {
	t     *testing.T
	known map[string][]string // field -> where
	first map[string]string   // field -> its first difference
}

func newDiffLog(t *testing.T) *diffLog {
	return &diffLog{t: t, known: map[string][]string{}, first: map[string]string{}}
}

func (l *diffLog) add(what string, diffs []fieldDiff) {
	l.t.Helper()
	for _, d := range diffs {
		if _, ok := interopFieldGaps[d.field]; !ok {
			l.t.Errorf("%s: %s", what, d.text)
			continue
		}
		if len(l.known[d.field]) == 0 {
			l.first[d.field] = what + ": " + d.text
		}
		l.known[d.field] = append(l.known[d.field], what)
	}
}

func (l *diffLog) flush() {
	l.t.Helper()
	for field, where := range l.known {
		l.t.Logf("known difference in %q, not implemented in mcp-mux yet (%s): %d item(s), e.g. %s", field, interopFieldGaps[field], len(where), l.first[field])
	}
}

// resultOf is the result object of a raw response ({"result": ...}), or
// the whole response when it is not one (an error, say).
func resultOf(raw any) map[string]any {
	o, _ := raw.(map[string]any)
	if r, ok := o["result"].(map[string]any); ok && len(o) == 1 {
		return r
	}
	return o
}

// objects turns a JSON array of objects into a map by key field.
func objects(v any, key string) (map[string]map[string]any, []string) {
	byKey := map[string]map[string]any{}
	var order []string
	arr, _ := v.([]any)
	for _, e := range arr {
		o, _ := e.(map[string]any)
		k, _ := o[key].(string)
		byKey[k] = o
		order = append(order, k)
	}
	return byKey, order
}

// sameObjects reports, field by field, every difference between two lists
// of objects keyed by key (tools by name, resources by uri).
func sameObjects(t *testing.T, l *diffLog, what string, bare, mux any, key string, skip ...string) {
	t.Helper()
	b, bOrder := objects(bare, key)
	m, mOrder := objects(mux, key)
	if len(b) == 0 {
		t.Errorf("%s: the bare server listed none", what)
	}
	for _, k := range bOrder {
		mo, ok := m[k]
		if !ok {
			t.Errorf("%s %q: missing through mcp-mux", what, k)
			continue
		}
		l.add(fmt.Sprintf("%s %q", what, k), diffFields(b[k], mo, append(skip, key)...))
	}
	for _, k := range mOrder {
		if _, ok := b[k]; !ok {
			t.Errorf("%s %q: through mcp-mux only", what, k)
		}
	}
}

// sameTools compares the tools-list check's tools field by field.
func sameTools(t *testing.T, b, m *interopResult) {
	t.Helper()
	l := newDiffLog(t)
	defer l.flush()
	sameObjects(t, l, "tool", b.Observed["tools"], m.Observed["tools"], "name")
}

// samePrompts compares the prompts check's prompts and prompts/get results.
func samePrompts(t *testing.T, b, m *interopResult) {
	t.Helper()
	l := newDiffLog(t)
	defer l.flush()
	sameObjects(t, l, "prompt", b.Observed["prompts"], m.Observed["prompts"], "name", "arguments")
	// A prompt's arguments one by one, so that a difference names its field.
	bp, _ := objects(b.Observed["prompts"], "name")
	mp, _ := objects(m.Observed["prompts"], "name")
	for name, bo := range bp {
		ba, bOrder := objects(bo["arguments"], "name")
		ma, mOrder := objects(mp[name]["arguments"], "name")
		if !slices.Equal(bOrder, mOrder) {
			t.Errorf("prompt %q: arguments bare %v, through mcp-mux %v", name, bOrder, mOrder)
			continue
		}
		for _, a := range bOrder {
			l.add(fmt.Sprintf("prompt %q argument %q", name, a), diffFields(ba[a], ma[a]))
		}
	}
	sameReads(t, l, "prompts/get", b.Observed["gets"], m.Observed["gets"])
}

// sameResources compares the resources check's resources, templates and
// every resource's contents.
func sameResources(t *testing.T, b, m *interopResult) {
	t.Helper()
	l := newDiffLog(t)
	defer l.flush()
	sameObjects(t, l, "resource", b.Observed["resources"], m.Observed["resources"], "uri")
	sameObjects(t, l, "resource template", b.Observed["templates"], m.Observed["templates"], "uriTemplate")
	sameReads(t, l, "resources/read", b.Observed["reads"], m.Observed["reads"])
}

// sameReads compares raw responses by key ({"uri": response}).
func sameReads(t *testing.T, l *diffLog, what string, bare, mux any) {
	t.Helper()
	br, _ := bare.(map[string]any)
	mr, _ := mux.(map[string]any)
	if len(br) == 0 {
		t.Errorf("%s: none against the bare server", what)
	}
	for k, bv := range br {
		l.add(what+" "+k, diffFields(resultOf(bv), resultOf(mr[k])))
	}
}

// sameResults compares the raw responses observed under keys.
func sameResults(keys ...string) func(t *testing.T, b, m *interopResult) {
	return func(t *testing.T, b, m *interopResult) {
		t.Helper()
		l := newDiffLog(t)
		defer l.flush()
		for _, k := range keys {
			l.add(k+" result", diffFields(resultOf(b.Observed[k]), resultOf(m.Observed[k])))
		}
	}
}

// sameProgress compares the progress check's notifications, and wants
// each before the response, as the server sends them; through mcp-mux,
// unless feature is a known gap (interopGaps).
func sameProgress(feature string) func(t *testing.T, b, m *interopResult) {
	return func(t *testing.T, b, m *interopResult) {
		t.Helper()
		if !reflect.DeepEqual(b.Observed["progress"], m.Observed["progress"]) {
			t.Errorf("progress:\nbare %s\nmux  %s", show(b.Observed["progress"]), show(m.Observed["progress"]))
		}
		if late := asSlice(b.Observed["late"]); len(late) > 0 {
			t.Errorf("the bare server's progress %v arrived after the response", late)
		}
		if late := asSlice(m.Observed["late"]); len(late) > 0 {
			gap(feature, t, fmt.Sprintf("through mcp-mux, progress %v of %d arrived after the response", late, len(asSlice(m.Observed["progress"]))))
		}
	}
}

// logsUnderBackend: every log message through mcp-mux names the backend in
// its logger.
func logsUnderBackend(backend string) func(t *testing.T, b, m *interopResult) {
	return func(t *testing.T, _, m *interopResult) {
		t.Helper()
		msgs, _ := m.Observed["messages"].([]any)
		for _, v := range msgs {
			msg, _ := v.(map[string]any)
			if l, _ := msg["logger"].(string); l != backend && !strings.HasPrefix(l, backend+"/") {
				t.Errorf("log message through mcp-mux with logger %q, want %q or %q: %s", l, backend, backend+"/...", show(msg))
			}
		}
	}
}

// carriesInstructions: mcp-mux's instructions contain the backend's.
func carriesInstructions(t *testing.T, b, m *interopResult) {
	t.Helper()
	bi, _ := b.Observed["instructions"].(string)
	mi, _ := m.Observed["instructions"].(string)
	if !strings.Contains(mi, strings.TrimSpace(bi)) {
		t.Errorf("mcp-mux's instructions lack the backend's (%d characters); got %d characters:\n%s", len(bi), len(mi), mi)
	}
}

package override

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

func ptr2[T any](v T) *T { return &v }

// backendTool is a tool as a backend sends it, with a field the go-sdk's
// types do not know (execution) and one in _meta.
const backendTool = `{"name":"create_issue","description":"Creates an issue <b>now</b>.","inputSchema":{"type":"object"},` +
	`"annotations":{"title":"Create","readOnlyHint":true,"openWorldHint":false,"x-vendor":1},"execution":{"taskSupport":"optional"},"_meta":{"k":"v"}}`

func decoded(t *testing.T, raw string) mcp.Tool {
	t.Helper()
	var tool mcp.Tool
	if err := json.Unmarshal([]byte(raw), &tool); err != nil {
		t.Fatal(err)
	}
	return tool
}

func members(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

func TestApplyChangesTheToolAndItsRawFormAlike(t *testing.T) {
	o := config.ToolOverride{Tool: "create_issue", Name: "new_issue", Title: "New issue", Description: "Opens an issue.",
		Annotations: &config.ToolHints{ReadOnlyHint: ptr2(false), DestructiveHint: ptr2(true)}}
	in := decoded(t, backendTool)
	before := decoded(t, backendTool)
	raw := json.RawMessage(backendTool)
	got, gotRaw := Apply(o, in, raw)

	if got.Name != "new_issue" || got.Title != "New issue" || got.Description != "Opens an issue." {
		t.Errorf("tool = %q %q %q", got.Name, got.Title, got.Description)
	}
	a := got.Annotations
	if a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || a.Title != "Create" || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("annotations = %+v, want readOnly false, destructive true, and the backend's title and openWorld kept", a)
	}
	if !reflect.DeepEqual(in, before) || !in.Annotations.ReadOnlyHint {
		t.Errorf("the tool given was changed: %+v", in.Annotations)
	}
	if string(raw) != backendTool {
		t.Errorf("the raw tool given was changed: %s", raw)
	}

	m := members(t, gotRaw)
	if m["name"] != "new_issue" || m["title"] != "New issue" || m["description"] != "Opens an issue." {
		t.Errorf("raw = %s", gotRaw)
	}
	wantAnn := map[string]any{"title": "Create", "readOnlyHint": false, "destructiveHint": true, "openWorldHint": false, "x-vendor": 1.0}
	if !reflect.DeepEqual(m["annotations"], wantAnn) {
		t.Errorf("raw annotations = %v, want %v", m["annotations"], wantAnn)
	}
	if !reflect.DeepEqual(m["execution"], map[string]any{"taskSupport": "optional"}) || !reflect.DeepEqual(m["_meta"], map[string]any{"k": "v"}) {
		t.Errorf("raw lost the fields the override does not touch: %s", gotRaw)
	}
}

func TestApplyKeepsWhatTheOverrideLeavesOut(t *testing.T) {
	got, gotRaw := Apply(config.ToolOverride{Tool: "create_issue", Description: "Only <this>."}, decoded(t, backendTool), json.RawMessage(backendTool))
	if got.Name != "create_issue" || got.Title != "" || got.Description != "Only <this>." || !got.Annotations.ReadOnlyHint {
		t.Errorf("tool = %+v", got)
	}
	m := members(t, gotRaw)
	if m["name"] != "create_issue" || m["description"] != "Only <this>." {
		t.Errorf("raw = %s", gotRaw)
	}
	if _, ok := m["title"]; ok {
		t.Errorf("raw has a title the backend did not send: %s", gotRaw)
	}
	if !strings.Contains(string(gotRaw), `"Only <this>."`) {
		t.Errorf("raw description is escaped or missing: %s", gotRaw)
	}
}

func TestApplyAddsAnnotationsToAToolWithout(t *testing.T) {
	const plain = `{"name":"echo","inputSchema":{"type":"object"}}`
	o := config.ToolOverride{Tool: "echo", Annotations: &config.ToolHints{ReadOnlyHint: ptr2(true), Title: ptr2("Echo")}}
	got, gotRaw := Apply(o, decoded(t, plain), json.RawMessage(plain))
	if a := got.Annotations; a == nil || !a.ReadOnlyHint || a.Title != "Echo" || a.DestructiveHint != nil {
		t.Errorf("annotations = %+v", got.Annotations)
	}
	if ann := members(t, gotRaw)["annotations"]; !reflect.DeepEqual(ann, map[string]any{"readOnlyHint": true, "title": "Echo"}) {
		t.Errorf("raw annotations = %v", ann)
	}
}

func TestApplyWithoutRawChangesTheToolOnly(t *testing.T) {
	got, gotRaw := Apply(config.ToolOverride{Tool: "echo", Name: "say"}, mcp.Tool{Name: "echo"}, nil)
	if got.Name != "say" || gotRaw != nil {
		t.Errorf("Apply(no raw) = %q, %s", got.Name, gotRaw)
	}
	if _, gotRaw = Apply(config.ToolOverride{Tool: "echo", Name: "say"}, mcp.Tool{Name: "echo"}, json.RawMessage(`[1]`)); gotRaw != nil {
		t.Errorf("Apply(raw not an object) = %s, want nil", gotRaw)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// overrideConfig is a config whose fixture backend has its echo tool
// renamed, re-described and marked read-only, and an override of a tool it
// does not have (line 12).
func overrideConfig(t *testing.T) string {
	t.Helper()
	src := fmt.Sprintf(`[[backend]]
name = "notes"
command = %q
args = ["-name", "notes"]

[[backend.override]]
tool = "echo"
name = "say"
description = "Says it back, <verbatim>."
annotations = { readOnlyHint = true }

[[backend.override]]
tool = "no_such_tool"
title = "Never"
`, testkit.FixtureBin(t))
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOverriddenToolOnTheWire runs mcp-mux as an agent does: the tool is
// listed as the override says, byte for byte on stdout, a call of its new
// name reaches the backend's echo, and its old name is unknown.
func TestOverriddenToolOnTheWire(t *testing.T) {
	w := startWire(t, overrideConfig(t))
	w.initialize()

	w.send(call(2, "tools/list", `{}`))
	m := w.response(2)
	if m.Error != nil {
		t.Fatalf("tools/list: %+v", m.Error)
	}
	var res struct {
		Tools []struct {
			Name        string
			Description string
			Annotations map[string]any
		}
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	var say bool
	for _, tool := range res.Tools {
		switch tool.Name {
		case "notes__echo":
			t.Errorf("notes__echo is listed under the name an override replaced")
		case "notes__say":
			say = true
			if tool.Description != "Says it back, <verbatim>." || tool.Annotations["readOnlyHint"] != true {
				t.Errorf("notes__say = %+v, want the override's description and readOnlyHint", tool)
			}
		}
	}
	if !say {
		t.Fatalf("notes__say not listed: %s", m.Result)
	}
	if !strings.Contains(string(m.Result), `"Says it back, <verbatim>."`) {
		t.Errorf("the description reaches the agent escaped: %s", m.Result)
	}

	w.send(call(3, "tools/call", `{"name":"notes__say","arguments":{"text":"hi"}}`))
	if m := w.response(3); m.Error != nil || !strings.Contains(string(m.Result), `{\"text\":\"hi\"}`) {
		t.Errorf("notes__say: %s %+v, want the echo of its arguments", m.Result, m.Error)
	}
	w.send(call(4, "tools/call", `{"name":"notes__echo","arguments":{}}`))
	if m := w.response(4); m.Error == nil || m.Error.Code != -32602 || m.Error.Message != `unknown tool "notes__echo"` {
		t.Errorf("notes__echo: %+v, want -32602 unknown tool", m.Error)
	}
}

// TestCheckConnectNamesTheLineOfAnOverrideThatChangesNothing: the
// warning reaches the user with FILE:LINE, and is not a failure.
func TestCheckConnectNamesTheLineOfAnOverrideThatChangesNothing(t *testing.T) {
	path := overrideConfig(t)
	out, err := exec.Command(testkit.MuxBin(t), "check", "--connect", "--list", "--config", path).Output()
	if err != nil {
		t.Fatalf("check --connect: %v\n%s", err, out)
	}
	want := path + `:12: backend "notes": override of tool "no_such_tool": the backend lists no tool of that name`
	if !strings.Contains(string(out), want) {
		t.Errorf("check --connect output lacks %q:\n%s", want, out)
	}
	if !strings.Contains(string(out), "    notes__say\n") || strings.Contains(string(out), "notes__echo") {
		t.Errorf("check --connect --list does not show the overridden name instead of the old one:\n%s", out)
	}
}

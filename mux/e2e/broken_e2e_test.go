package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// One bad backend never takes the others down: a mistake that belongs to
// one [[backend]] (an unset variable, a command that is not there, a bad
// URL, a filter that does not compile) disables that backend only. It is
// failed, with the reason, in mcp-mux://backends, in the log and in the
// instructions the agent reads; the others serve; saving the fixed file
// starts it without ending the session. Before, mcp-mux exited before
// initialize and the agent lost every server ("Connection closed").

const unsetVar = "MCP_MUX_E2E_NEVER_SET"

// brokenConfig is a config with one good backend and one broken backend
// of each kind; fixed, the unset variable has a default.
func brokenConfig(t *testing.T, fixed bool) string {
	fixture := testkit.FixtureBin(t)
	token := "${" + unsetVar + "}"
	if fixed {
		token = "${" + unsetVar + ":-now-set}"
	}
	return fmt.Sprintf(`[mux]
shutdown_grace = "1s"

[[backend]]
name = "good"
command = %[1]q
args = ["-name", "good"]

[[backend]]
name = "unset"
command = %[1]q
args = ["-name", "unset"]
env = { TOKEN = %[2]q }

[[backend]]
name = "nocmd"
command = "/nonexistent/bin/uvx"

[[backend]]
name = "badurl"
url = "ftp://mcp.example.com/mcp"

[[backend]]
name = "badglob"
command = %[1]q
args = ["-name", "badglob"]
tools = ["[unclosed"]
`, fixture, token)
}

func TestOneBrokenBackendOfEachKindLeavesTheOthersServing(t *testing.T) {
	path := testkit.WriteRawConfig(t, brokenConfig(t, false))
	a := runAgent(t, path)

	if names := a.toolNames(t); !hasPrefixed(names, "good__") || hasPrefixed(names, "unset__") {
		t.Fatalf("tools %v: want the good backend's, and none of the broken ones'", names)
	}
	if got := callText(t, a.cs, "good__echo", map[string]any{"x": 1}); got != `{"x":1}` {
		t.Errorf("good__echo = %q", got)
	}

	why := map[string]string{
		"unset":   "${" + unsetVar + "} is not set",
		"nocmd":   "/nonexistent/bin/uvx",
		"badurl":  "http:// or https://",
		"badglob": "invalid glob pattern",
	}
	status := a.status(t)
	var errs map[string]string
	res, err := a.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	var full struct {
		Backends []struct {
			Name      string `json:"name"`
			State     string `json:"state"`
			LastError string `json:"last_error"`
		} `json:"backends"`
	}
	json.Unmarshal([]byte(res.Contents[0].Text), &full)
	errs = map[string]string{}
	for _, b := range full.Backends {
		errs[b.Name] = b.State + ": " + b.LastError
	}
	for name, want := range why {
		if got := errs[name]; !strings.HasPrefix(got, "failed: ") || !strings.Contains(got, want) || !strings.Contains(got, "mcp-mux.toml:") {
			t.Errorf("mcp-mux://backends: %s is %q, want failed with FILE:LINE and %q", name, got, want)
		}
	}
	if len(status.Backends) != 5 {
		t.Errorf("mcp-mux://backends lists %d backends, want 5", len(status.Backends))
	}

	instr := a.cs.InitializeResult().Instructions
	for name, want := range why {
		if !strings.Contains(instr, "backend \""+name+"\" is not running: ") || !strings.Contains(instr, want) {
			t.Errorf("instructions lack why %s is not running (%q):\n%s", name, want, instr)
		}
	}
	if !strings.Contains(instr, "save the config file: mcp-mux reloads it") {
		t.Errorf("instructions do not say how to fix it:\n%s", instr)
	}
	// A variable missing from mcp-mux's environment is not mended by
	// saving the file: the agent gives it, and applies it by restarting.
	for _, line := range strings.Split(instr, "\n") {
		if !strings.Contains(line, "backend unset is not running: ") {
			continue
		}
		if strings.Contains(line, ":-default") || strings.Contains(line, "fix it and save the config file") ||
			!strings.Contains(line, "restart the agent") || !strings.Contains(line, "mcp-mux secret set "+unsetVar) {
			t.Errorf("instructions tell the wrong fix for an unset variable:\n%s", line)
		}
	}
	log := a.stderr.String()
	for name := range why {
		if !strings.Contains(log, "backend not started: its [[backend]] entry has mistakes") || !strings.Contains(log, "backend="+name) {
			t.Errorf("the log does not say %s was not started:\n%s", name, log)
		}
	}

	// The fix, saved: the backend starts, the session goes on.
	saveByRename(t, path, brokenConfig(t, true))
	waitFor(t, a, a.toolsChanged, "tools/list_changed after the fix", 20*time.Second)
	testkit.Eventually(t, 20*time.Second, "unset's tools after the fix", func() bool {
		return hasPrefixed(a.toolNames(t), "unset__")
	})
	if got := callText(t, a.cs, "unset__echo", map[string]any{"y": 2}); got != `{"y":2}` {
		t.Errorf("unset__echo after the fix = %q", got)
	}
}

// TestAFileThatDoesNotParseStopsMcpMuxWithFileAndLineFirst: the one
// mistake that stops serving is a file that cannot be parsed at all, and
// then the first line on stderr says where.
func TestAFileThatDoesNotParseStopsMcpMuxWithFileAndLineFirst(t *testing.T) {
	path := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\n\n[[backend]\nname = \"x\"\n")
	cmd := exec.Command(testkit.MuxBin(t), "--config", path)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
		t.Fatalf("exit %d (%v), want 1\n%s", code, err, out)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if !strings.HasPrefix(first, path+":4:") {
		t.Errorf("first line %q, want %s:4: ...", first, path)
	}
}

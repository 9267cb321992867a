package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestFilteredToolIsAbsentFromTheListAndUnknownToCall runs mcp-mux as an
// agent does, with a backend whose tools and prompts are filtered: what is
// filtered out is not listed, and calling it is the -32602 of a name that
// never existed.
func TestFilteredToolIsAbsentFromTheListAndUnknownToCall(t *testing.T) {
	src := fmt.Sprintf(`[mux]
shutdown_grace = "1s"

[[backend]]
name = "notes"
command = %q
args = ["-name", "notes", "-prompts", "alpha"]
tools = ["echo", "s*"]
exclude_tools = ["sleep"]
exclude_prompts = ["greet"]
`, testkit.FixtureBin(t))
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	w := startWire(t, path)
	w.initialize()

	names := func(id int, method, key string) []string {
		w.send(call(id, method, `{}`))
		m := w.response(id)
		if m.Error != nil {
			t.Fatalf("%s: %+v", method, m.Error)
		}
		var res map[string]json.RawMessage
		var items []struct{ Name string }
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(res[key], &items); err != nil {
			t.Fatalf("%s: %v in %s", method, err, m.Result)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Name)
		}
		slices.Sort(out)
		return out
	}
	if got, want := names(2, "tools/list", "tools"), []string{"notes__echo", "notes__set_content", "notes__stats"}; !slices.Equal(got, want) {
		t.Errorf("tools/list = %q, want %q", got, want)
	}
	if got, want := names(3, "prompts/list", "prompts"), []string{"notes__alpha"}; !slices.Equal(got, want) {
		t.Errorf("prompts/list = %q, want %q", got, want)
	}

	for i, c := range []struct{ method, params, msg string }{
		{"tools/call", `{"name":"notes__sleep","arguments":{"ms":1}}`, `unknown tool "notes__sleep"`},
		{"tools/call", `{"name":"notes__hang","arguments":{}}`, `unknown tool "notes__hang"`},
		{"tools/call", `{"name":"notes__no_such","arguments":{}}`, `unknown tool "notes__no_such"`},
		{"prompts/get", `{"name":"notes__greet","arguments":{"name":"x"}}`, `unknown prompt "notes__greet"`},
	} {
		w.send(call(10+i, c.method, c.params))
		m := w.response(10 + i)
		if m.Error == nil || m.Error.Code != -32602 || m.Error.Message != c.msg {
			t.Errorf("%s %s: %+v, want -32602 %q", c.method, c.params, m.Error, c.msg)
		}
	}
	w.send(call(20, "tools/call", `{"name":"notes__echo","arguments":{"text":"hi"}}`))
	if m := w.response(20); m.Error != nil {
		t.Errorf("notes__echo: %+v", m.Error)
	}

	// mcp-mux://backends counts what the agent sees, not what is hidden.
	w.send(call(21, "resources/read", `{"uri":"mcp-mux://backends"}`))
	m := w.response(21)
	var read struct {
		Contents []struct{ Text string }
	}
	var st struct {
		Backends []struct{ Tools, Prompts int }
	}
	if err := json.Unmarshal(m.Result, &read); err != nil || len(read.Contents) != 1 {
		t.Fatalf("mcp-mux://backends: %v %s", err, m.Result)
	}
	if err := json.Unmarshal([]byte(read.Contents[0].Text), &st); err != nil || len(st.Backends) != 1 {
		t.Fatalf("mcp-mux://backends: %v %s", err, read.Contents[0].Text)
	}
	if b := st.Backends[0]; b.Tools != 3 || b.Prompts != 1 {
		t.Errorf("mcp-mux://backends counts %d tools and %d prompts, want the 3 and 1 the agent sees", b.Tools, b.Prompts)
	}
}

// TestCheckConnectWarnsAboutAPatternThatMatchesNothing: the warnings of
// `check --connect` reach the user, in the text report and in --json.
func TestCheckConnectWarnsAboutAPatternThatMatchesNothing(t *testing.T) {
	src := fmt.Sprintf("[[backend]]\nname = \"notes\"\ncommand = %q\nargs = [\"-name\", \"notes\"]\ntools = [\"echo\", \"ehco\"]\n", testkit.FixtureBin(t))
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	want := path + `:5: backend "notes": tools pattern "ehco" matches none of its tools`
	out, err := exec.Command(testkit.MuxBin(t), "check", "--connect", "--config", path).Output()
	if err != nil {
		t.Fatalf("check --connect: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "warning: "+want) {
		t.Errorf("check --connect output lacks the warning %q:\n%s", want, out)
	}
	out, err = exec.Command(testkit.MuxBin(t), "check", "--connect", "--json", "--config", path).Output()
	if err != nil {
		t.Fatalf("check --connect --json: %v\n%s", err, out)
	}
	var r struct{ Warnings []string }
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], want) {
		t.Errorf("--json warnings = %q, want one with %q", r.Warnings, want)
	}
}

// A tools glob that matches nothing gives an agent no tools of that
// backend, silently: the prefix written where a backend's own names are
// meant, or left out where a profile's exposed names are. check says so
// from the remembered catalogs (not only check --connect), at FILE:LINE
// with the likely fix; serving logs it once per start, and the agent's
// instructions say which backend shows no tools and why.
func TestAToolsGlobThatMatchesNothingIsSaidWhereTheUserLooks(t *testing.T) {
	fix := testkit.FixtureBin(t)
	src := fmt.Sprintf(`[mux]
shutdown_grace = "1s"

[[backend]]
name = "alpha"
command = %q
args = ["-name", "alpha"]
tools = ["alpha__echo"]

[[backend]]
name = "beta"
command = %q
args = ["-name", "beta", "-tools", "shout"]

[profile.p]
tools = ["shout"]
`, fix, fix)
	cfg := testkit.WriteRawConfig(t, src)
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+filepath.Join(t.TempDir(), "catalogs"))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(testkit.MuxBin(t), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mcp-mux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	backendWarning := `mcp-mux.toml:8: backend "alpha": tools pattern "alpha__echo" matches none of its tools`
	profileWarning := `mcp-mux.toml:16: profile.p.tools #1: pattern "shout" matches none of the`
	for _, args := range [][]string{{"check", "--connect", "-c", cfg}, {"check", "-c", cfg}} {
		out := run(args...)
		for _, want := range []string{backendWarning, `did you mean "echo"?`, profileWarning, `did you mean "beta__shout"?`} {
			if !strings.Contains(out, want) {
				t.Errorf("mcp-mux %v does not say %q:\n%s", args, want, out)
			}
		}
	}

	cmd := exec.Command(testkit.MuxBin(t), "--profile", "p", "-c", cfg)
	cmd.Env = env
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	// Of no client capabilities, as check --connect declared: the
	// catalogs it remembered are this agent's.
	c := mcp.NewClient(&mcp.Implementation{Name: "some-agent", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	instr := cs.InitializeResult().Instructions
	listedTools(t, cs)
	cs.Close()
	for _, want := range []string{"alpha shows no tools: its tools filter", "beta shows no tools: the tools filter of profile p"} {
		if !strings.Contains(instr, want) {
			t.Errorf("the instructions do not say %q:\n%s", want, instr)
		}
	}
	for _, want := range []string{backendWarning, profileWarning} {
		if n := strings.Count(stderr.String(), want); n != 1 {
			t.Errorf("serving logs %q %d times, want once:\n%s", want, n, stderr)
		}
	}
}

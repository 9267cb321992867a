package e2e

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Profiles through the built binary: asked for with --profile and
// MCP_MUX_PROFILE, an unknown one refused at once, and what check says.

// profileConfig writes a config of two fixtures, gh and fs, and two
// profiles; fs writes its pid to fsPids when it starts.
func profileConfig(t *testing.T) (path, fsPids string) {
	t.Helper()
	dir := t.TempDir()
	fsPids = filepath.Join(dir, "fs.pids")
	src := fmt.Sprintf(`[[backend]]
name = "gh"
command = %[1]q
args = ["-name", "gh", "-tools", "list_issues,delete_issue"]

[[backend]]
name = "fs"
command = %[1]q
args = ["-name", "fs", "-grandchild-pidfile", %[2]q]

[profile.issues]
backends = ["gh"]
exclude_tools = ["*__delete_*"]

[profile.files]
backends = ["fs"]
`, testkit.FixtureBin(t), fsPids)
	path = filepath.Join(dir, "mcp-mux.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, fsPids
}

func TestStdioProfileByFlagAndEnvironment(t *testing.T) {
	path, fsPids := profileConfig(t)
	for _, how := range []struct {
		name string
		args []string
		env  []string
	}{
		{"--profile", []string{"--profile", "issues", "--config", path}, nil},
		{"MCP_MUX_PROFILE", []string{"--config", path}, []string{"MCP_MUX_PROFILE=issues"}},
	} {
		t.Run(how.name, func(t *testing.T) {
			cmd := exec.Command(testkit.MuxBin(t), how.args...)
			cmd.Env = append(os.Environ(), how.env...)
			c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
			cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			tools := map[string]bool{}
			for tool, err := range cs.Tools(testkit.CtxT(t), nil) {
				if err != nil {
					t.Fatal(err)
				}
				tools[tool.Name] = true
			}
			if !tools["gh__list_issues"] || tools["gh__delete_issue"] || slices.ContainsFunc(slices.Collect(maps.Keys(tools)), func(n string) bool { return strings.HasPrefix(n, "fs__") }) {
				t.Errorf("tools %q: want gh's, without delete_issue, and none of fs's", slices.Sorted(maps.Keys(tools)))
			}
		})
	}
	// fs is outside the profile: it never started, not even to learn its
	// catalog.
	if _, err := os.Stat(fsPids); err == nil {
		t.Errorf("fs started (it wrote %s) though the profile has only gh", fsPids)
	}
}

func TestStdioUnknownProfileExitsAtOnceNamingTheProfiles(t *testing.T) {
	path, fsPids := profileConfig(t)
	start := time.Now()
	cmd := exec.Command(testkit.MuxBin(t), "--profile", "nope", "--config", path)
	cmd.Stdin = strings.NewReader("") // an agent that would wait forever does not matter
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit: %v, want 1", err)
	}
	if want := `unknown profile "nope": the profiles of ` + path + ` are issues, files`; !strings.Contains(errb.String(), want) {
		t.Errorf("stderr %q lacks %q", errb.String(), want)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q: nothing may reach it", out.String())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s to refuse", took)
	}
	if _, err := os.Stat(fsPids); err == nil {
		t.Errorf("a backend started for an unknown profile")
	}
}

func TestCheckReportsProfileMistakes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp-mux.toml")
	src := fmt.Sprintf(`[[backend]]
name = "gh"
command = %q
args = ["-name", "gh"]

[profile.a]
backends = ["gh", "gitlab"]
clients = ["cursor*"]

[profile.b]
tools = ["gh__echo", "gh__ehco"]
clients = ["Cursor-Nightly"]
`, testkit.FixtureBin(t))
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCheck(t, "--config", path)
	if code == 0 || !strings.Contains(out, path+`:7: profile.a.backends #2: unknown backend "gitlab"; the backends are: gh`) {
		t.Errorf("check: exit %d, want 1 and the unknown backend at line 7:\n%s", code, out)
	}
	// Fixed, the rest is warnings: the overlap, and with --connect the
	// glob that matches nothing.
	if err := os.WriteFile(path, []byte(strings.Replace(src, `, "gitlab"`, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = runCheck(t, "--connect", "--config", path)
	for _, want := range []string{
		path + `:12: profile.b.clients #1: clients pattern "Cursor-Nightly" overlaps "cursor*" of profile "a" (line 6)`,
		path + `:11: profile.b.tools #2: pattern "gh__ehco" matches none of the`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check --connect (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, `"gh__echo" matches none`) {
		t.Errorf("a pattern that matches was reported:\n%s", out)
	}
}

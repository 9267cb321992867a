package e2e

import (
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

// The catalog before the backends, with the real binary: check --connect
// remembers every backend's catalog, check says so, and the next mcp-mux
// lists it whole at once without starting a backend until it is used.
func TestARememberedCatalogAcrossRuns(t *testing.T) {
	catalogs := filepath.Join(t.TempDir(), "catalogs")
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+catalogs)
	cfg := testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha"}, []string{"beta", "-name", "beta", "-tools", "shout"})
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
	if out := run("check", "-c", cfg); !strings.Contains(out, "alpha: not seen yet: starts at once") {
		t.Fatalf("check before any run:\n%s", out)
	}
	run("check", "--connect", "-c", cfg)
	if out := run("check", "-c", cfg); !strings.Contains(out, "alpha: remembered (") || !strings.Contains(out, "beta: remembered (") || !strings.Contains(out, "starts when first used") {
		t.Fatalf("check after check --connect:\n%s", out)
	}

	cmd := exec.Command(testkit.MuxBin(t), "-c", cfg)
	cmd.Env = env
	// check --connect declares no client capabilities, so what it
	// remembers is listed at once to an agent of none: another's starts
	// the backends (lazycaps_test.go in package mux).
	c := mcp.NewClient(&mcp.Implementation{Name: "some-agent", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	start := time.Now()
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools := listedTools(t, cs)
	t.Logf("spawn → first complete tools/list: %v", time.Since(start))
	if !slices.Contains(tools, "alpha__echo") || !slices.Contains(tools, "beta__shout") {
		t.Fatalf("the first list is not whole: %v", tools)
	}
	for _, b := range readBackends(t, cs).Backends {
		if b.State != "remembered" || b.PID != 0 {
			t.Errorf("%s: %q pid %d before any use: want remembered, no process", b.Name, b.State, b.PID)
		}
	}
	if got := callText(t, cs, "beta__shout", map[string]any{"text": "hi"}); !strings.Contains(got, "hi") {
		t.Errorf("beta__shout: %q", got)
	}
	for _, b := range readBackends(t, cs).Backends {
		want := map[string]string{"alpha": "remembered", "beta": "ready"}[b.Name]
		if b.State != want {
			t.Errorf("%s after a call to beta: %q, want %q", b.Name, b.State, want)
		}
	}
}

// MCP_MUX_CATALOGS must be "off" or an absolute directory: a typo of
// "off" made a directory of that name wherever the agent started
// mcp-mux, silently. check and serve say so, once, and remember
// nothing; under "off" check does not advise a check --connect that
// would not remember either.
func TestCatalogsEnvMustBeOffOrAbsolute(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha"})
	cwd := t.TempDir()
	envWith := func(v string) []string {
		return append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+v)
	}
	const said = `MCP_MUX_CATALOGS="of" is neither "off" nor an absolute path`
	for _, args := range [][]string{{"check", "-c", cfg}, {"check", "--connect", "-c", cfg}} {
		cmd := exec.Command(testkit.MuxBin(t), args...)
		cmd.Dir, cmd.Env = cwd, envWith("of")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mcp-mux %v: %v\n%s", args, err, out)
		}
		if n := strings.Count(string(out), said); n != 1 {
			t.Errorf("mcp-mux %v says %q %d times, want once:\n%s", args, said, n, out)
		}
	}

	cmd := exec.Command(testkit.MuxBin(t), "-c", cfg)
	cmd.Dir, cmd.Env = cwd, envWith("of")
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "some-agent", Version: "1"}, nil)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools := listedTools(t, cs); !slices.Contains(tools, "alpha__echo") {
		t.Errorf("tools: %v", tools)
	}
	cs.Close()
	if n := strings.Count(stderr.String(), said); n != 1 {
		t.Errorf("serving logs %q %d times, want once:\n%s", said, n, stderr)
	}
	if _, err := os.Stat(filepath.Join(cwd, "of")); err == nil {
		t.Errorf("MCP_MUX_CATALOGS=of made the directory %s", filepath.Join(cwd, "of"))
	}

	cmd = exec.Command(testkit.MuxBin(t), "check", "-c", cfg)
	cmd.Env = envWith("off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "check --connect remembers it") || !strings.Contains(string(out), "alpha: starts at once (MCP_MUX_CATALOGS=off: nothing is remembered)") {
		t.Errorf("check under MCP_MUX_CATALOGS=off:\n%s", out)
	}
}

// A remembered backend whose start failed: check does not say it starts
// when first used, but that its last start failed, when and why.
func TestCheckSaysARememberedBackendLastFailedToStart(t *testing.T) {
	catalogs := filepath.Join(t.TempDir(), "catalogs")
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+catalogs)
	broken := filepath.Join(t.TempDir(), "broken")
	cfg := testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha", "-fail-start-while", broken})
	check := func() string {
		t.Helper()
		cmd := exec.Command(testkit.MuxBin(t), "check", "-c", cfg)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mcp-mux check: %v\n%s", err, out)
		}
		return string(out)
	}
	cmd := exec.Command(testkit.MuxBin(t), "check", "--connect", "-c", cfg)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mcp-mux check --connect: %v\n%s", err, out)
	}
	if out := check(); !strings.Contains(out, "alpha: remembered (") {
		t.Fatalf("check after check --connect:\n%s", out)
	}

	// It no longer starts: its first use finds out.
	if err := os.WriteFile(broken, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(testkit.MuxBin(t), "-c", cfg)
	cmd.Env = env
	c := mcp.NewClient(&mcp.Implementation{Name: "some-agent", Version: "1"}, nil)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a call to alpha, which cannot start, succeeded")
	}
	// The memory is written apart from the call's answer: check reads it
	// while this mcp-mux still runs.
	testkit.Eventually(t, 10*time.Second, "check saying alpha's last start failed", func() bool {
		return strings.Contains(check(), "alpha: its last start failed (")
	})
	cs.Close()
	if out := check(); strings.Contains(out, "starts when first used") || !strings.Contains(out, "failing on purpose") {
		t.Errorf("check, alpha's last start failed:\n%s", out)
	}
}

// A catalog is remembered per set of client capabilities, and check
// --connect declares none: plain check must not say that a backend it
// alone has seen "starts when first used" by an agent that declares any
// (each of the five measured agents does), nor advise a check --connect
// that would not change that. Once an agent has run, its backends do
// start when first used by an agent like it.
func TestCheckSaysWhoseCatalogIsRemembered(t *testing.T) {
	catalogs := filepath.Join(t.TempDir(), "catalogs")
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+catalogs)
	cfg := testkit.WriteConfig(t, "", []string{"alpha", "-name", "alpha"})
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
	if out := run("check", "-c", cfg); strings.Contains(out, "check --connect remembers it") {
		t.Errorf("check before any run advises a check --connect that no agent with capabilities would use:\n%s", out)
	}
	run("check", "--connect", "-c", cfg)
	if out := run("check", "-c", cfg); strings.Contains(out, "starts when first used\n") || !strings.Contains(out, ") by check --connect: starts when first used by an agent that declares no capabilities") {
		t.Errorf("check after check --connect alone:\n%s", out)
	}

	cmd := exec.Command(testkit.MuxBin(t), "-c", cfg)
	cmd.Env = env
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.1.328"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}},
	})
	cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools := listedTools(t, cs); !slices.Contains(tools, "alpha__echo") {
		t.Fatalf("tools: %v", tools)
	}
	cs.Close() // exit waits for the memory's writes
	if out := run("check", "-c", cfg); !strings.Contains(out, "alpha: remembered (") || !strings.Contains(out, "starts when first used") {
		t.Errorf("check after an agent's session:\n%s", out)
	}
}

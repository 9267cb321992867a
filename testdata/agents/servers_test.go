package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// server is an MCP server as an agent's config names it: the same name
// whether the agent starts it itself or mcp-mux does, as a backend.
type server struct {
	name    string
	command string
	args    []string
	env     map[string]string
}

// markerEnv is set on every process a run starts (agent, mcp-mux,
// servers), holding the run's temporary directory: what is left after the
// agent exits is found by it in /proc (leftovers).
const markerEnv = "MCP_MUX_AGENTS_RUN"

// muxBinEnv names an mcp-mux binary to test instead of this tree's: a
// build of an older commit gives the "before" numbers.
const muxBinEnv = "MCP_MUX_AGENTS_BIN"

// nodeModule is a file of an npm package installed in testdata/NPMDIR, or
// why it is not there.
func nodeModule(npmDir, rel string) (string, string) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		return "", err.Error()
	}
	p := filepath.Join(root, "testdata", npmDir, "node_modules", rel)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Sprintf("testdata/%s/node_modules/%s does not exist (run: cd testdata/%s && npm ci --ignore-scripts)", npmDir, rel, npmDir)
	}
	return p, ""
}

// need is path, or skips t saying why it is missing; under CI, which
// installs everything (.ci/run), it fails instead.
func need(t *testing.T, path, why string) string {
	t.Helper()
	if why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; CI must run the agents suite (.ci/run installs it)", why)
		}
		t.Skipf("agents suite skipped: %s", why)
	}
	return path
}

// needModule is nodeModule's path, or skips (fails under CI).
func needModule(t *testing.T, npmDir, rel string) string {
	t.Helper()
	p, why := nodeModule(npmDir, rel)
	return need(t, p, why)
}

// servers are the four servers of a run, their state in dir (a directory
// of the run's own): three reference servers and one whose tools have
// long names.
func servers(t *testing.T, dir string) []server {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "", "node is not on PATH (Node.js 20 or later)")
	}
	ref := func(s string) string {
		return needModule(t, "interop", "@modelcontextprotocol/"+s+"/dist/index.js")
	}
	pw := needModule(t, "agents", "@executeautomation/playwright-mcp-server/dist/index.js")
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(files, "hello.txt"), []byte("hello\n"), 0o644)
	mark := map[string]string{markerEnv: dir}
	with := func(kv ...string) map[string]string {
		m := map[string]string{markerEnv: dir}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	return []server{
		{name: "server-everything", command: node, args: []string{ref("server-everything"), "stdio"}, env: mark},
		{name: "server-memory", command: node, args: []string{ref("server-memory")}, env: with("MEMORY_FILE_PATH", filepath.Join(dir, "memory.jsonl"))},
		{name: "server-filesystem", command: node, args: []string{ref("server-filesystem"), files}, env: mark},
		// Its browsers are not installed (npm ci --ignore-scripts): it lists
		// its tools all the same, which is all the suite asks of it.
		{name: "executeautomation-playwright", command: node, args: []string{pw}, env: with("PLAYWRIGHT_BROWSERS_PATH", filepath.Join(dir, "browsers"))},
	}
}

// muxServer is mcp-mux with srvs as its backends, as the one server an
// agent is given: the config in dir, the catalogs it remembers in
// catalogs (an absolute directory; empty is a cold start).
func muxServer(t *testing.T, dir, catalogs string, srvs []server) server {
	t.Helper()
	bin := os.Getenv(muxBinEnv)
	if bin == "" {
		bin = testkit.MuxBin(t)
	}
	var sb strings.Builder
	// The default [mux]: no tool_list, as a user who set nothing has it.
	for _, s := range srvs {
		q := make([]string, len(s.args))
		for i, a := range s.args {
			q[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&sb, "[[backend]]\nname = %q\ncommand = %q\nargs = [%s]\n", s.name, s.command, strings.Join(q, ", "))
		var env []string
		for _, k := range sortedKeys(s.env) {
			env = append(env, fmt.Sprintf("%s = %q", k, s.env[k]))
		}
		fmt.Fprintf(&sb, "env = { %s }\n\n", strings.Join(env, ", "))
	}
	cfg := filepath.Join(dir, "mcp-mux.toml")
	if err := os.WriteFile(cfg, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// What testkit.Main pointed at the test's own directories: agents pass
	// their servers only the environment their config gives.
	env := map[string]string{markerEnv: dir, "MCP_MUX_CATALOGS": catalogs}
	for _, k := range []string{"XDG_CACHE_HOME", "MCP_MUX_STATE_DIR", "MCP_MUX_CONTROL_DIR", "MCP_MUX_SECRET_STORE", "MCP_MUX_RUN_DIR", "MCP_MUX_SHARED"} {
		env[k] = os.Getenv(k)
	}
	return server{name: "mcp-mux", command: bin, args: []string{"--config", cfg}, env: env}
}

// truth is what a server itself lists, asked directly with the go-sdk's
// client: what each agent's rules are checked against.
type truth struct {
	instructions string
	tools        []*mcp.Tool
}

var (
	truthOnce sync.Once
	truths    map[string]truth
	truthErr  error
)

// serverTruth lists each of srvs once per test process.
func serverTruth(t *testing.T, srvs []server) map[string]truth {
	t.Helper()
	truthOnce.Do(func() {
		truths = map[string]truth{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, s := range srvs {
			wg.Go(func() {
				tr, err := listServer(s)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					truthErr = fmt.Errorf("listing %s directly: %w", s.name, err)
					return
				}
				truths[s.name] = tr
			})
		}
		wg.Wait()
	})
	if truthErr != nil {
		t.Fatal(truthErr)
	}
	return truths
}

func listServer(s server) (truth, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(s.command, s.args...)
	cmd.Env = os.Environ()
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agents-suite", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return truth{}, err
	}
	defer cs.Close()
	var tr truth
	tr.instructions = cs.InitializeResult().Instructions
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return truth{}, err
		}
		tr.tools = append(tr.tools, tool)
	}
	return tr, nil
}

// leftovers are the processes that still carry the run's marker: pid and
// command line.
func leftovers(dir string) []string {
	ents, _ := os.ReadDir("/proc")
	var left []string
	want := []byte(markerEnv + "=" + dir + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if zombie(stat) {
			continue // gone; its parent has yet to reap it
		}
		if strings.Contains(string(env), string(want)) || strings.Contains(string(cmdline), dir) {
			left = append(left, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")))
		}
	}
	return left
}

// zombie reports whether /proc/PID/stat says the process has exited.
func zombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// canonical is a JSON value re-encoded with sorted keys, to compare
// schemas whatever order of keys each side wrote.
func canonical(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v) // maps encode with sorted keys
	return string(b)
}

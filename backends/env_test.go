package backends

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// environOf is the environment b was started with: from /proc on Linux,
// elsewhere from the fixture's env tool (startEnv starts it with one).
func environOf(t *testing.T, b *Backend) map[string]string {
	t.Helper()
	var kvs []string
	if runtime.GOOS == "linux" {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", b.PID()))
		if err != nil {
			t.Fatal(err)
		}
		kvs = strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	} else {
		res, err := call(t, b, "env", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &kvs); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{}
	for _, kv := range kvs {
		// Windows keeps each drive's directory as "=C:=C:\...".
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" && !wineOwn(k) {
			env[k] = v
		}
	}
	return env
}

// wineOwn reports whether k is one of the WINE* variables Wine's loader
// puts in every process's environment, when the tests run under Wine.
func wineOwn(k string) bool {
	return testkit.UnderWine() && strings.HasPrefix(strings.ToUpper(k), "WINE")
}

// ourEnv is this process's environment, filtered by keep.
func ourEnv(keep func(string) bool) map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && keep(k) && !wineOwn(k) {
			env[k] = v
		}
	}
	return env
}

// isDefaultName is the default set, written out independently of the
// code under test.
func isDefaultName(k string) bool {
	if runtime.GOOS == "windows" {
		switch strings.ToUpper(k) {
		case "APPDATA", "COMSPEC", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT",
			"PROCESSOR_ARCHITECTURE", "PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP",
			"USERNAME", "USERPROFILE":
			return true
		}
		return false
	}
	switch k {
	case "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE", "TZ", "TMPDIR":
		return true
	}
	return strings.HasPrefix(k, "LC_")
}

func startEnv(t *testing.T, spec Spec) *Backend {
	t.Helper()
	spec.Name, spec.Command = "fx", testkit.FixtureBin(t)
	spec.Args = []string{"-name", "fx", "-env-tool"}
	b, err := Start(context.Background(), spec, Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	return b
}

func TestBackendGetsOnlyTheDefaultEnvironmentAndItsTable(t *testing.T) {
	t.Setenv("MUX_TEST_SECRET", "not-for-this-backend")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("LC_NUMERIC", "C")
	t.Setenv("TZ", "UTC")
	t.Setenv("TMPDIR", t.TempDir())
	// A default name holding an exported shell function is not passed on,
	// as in the official SDKs.
	t.Setenv("TERM", "() { :; }; echo pwned")
	b := startEnv(t, Spec{Env: map[string]string{"OWN": "own", "TZ": "Europe/Paris"}})

	want := ourEnv(isDefaultName)
	delete(want, "TERM")
	want["OWN"], want["TZ"] = "own", "Europe/Paris"
	if got := environOf(t, b); !reflect.DeepEqual(got, want) {
		t.Errorf("backend environment:\n got %v\nwant %v", keysOf(got), keysOf(want))
	}
}

func TestInheritEnvPassesTheNamedVariables(t *testing.T) {
	t.Setenv("MUX_TEST_ONE", "1")
	t.Setenv("MUX_TEST_TWO", "2")
	t.Setenv("MUX_PREFIXED_A", "a")
	t.Setenv("MUX_PREFIXED_B", "b")
	t.Setenv("MUX_OTHER", "other")

	named := startEnv(t, Spec{InheritEnv: []string{"MUX_TEST_ONE", "MUX_PREFIXED_*", "MUX_NOT_SET"}})
	want := ourEnv(func(k string) bool {
		return isDefaultName(k) || k == "MUX_TEST_ONE" || strings.HasPrefix(k, "MUX_PREFIXED_")
	})
	if got := environOf(t, named); !reflect.DeepEqual(got, want) {
		t.Errorf("inherit_env = [MUX_TEST_ONE, MUX_PREFIXED_*]:\n got %v\nwant %v", keysOf(got), keysOf(want))
	}

	all := startEnv(t, Spec{InheritEnv: []string{"*"}, Env: map[string]string{"MUX_OTHER": "overridden"}})
	want = ourEnv(func(string) bool { return true })
	want["MUX_OTHER"] = "overridden"
	if got := environOf(t, all); !reflect.DeepEqual(got, want) {
		t.Errorf("inherit_env = true:\n got %v\nwant %v", keysOf(got), keysOf(want))
	}
}

// keysOf shows names only: values may be secrets.
func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ChildEnv is computed from the environ given, never from the process's:
// the shared mcp-mux hashes it for a session whose environment is not its own.
func TestChildEnvIsComputedFromTheGivenEnviron(t *testing.T) {
	t.Setenv("MUX_TEST_OURS", "the process's")
	home := "HOME" // one of the variables a backend gets by default
	if runtime.GOOS == "windows" {
		home = "USERPROFILE"
	}
	environ := []string{"PATH=/session/bin", "MUX_TEST_OURS=the session's", "MUX_TEST_DROPPED=x", home + "=/home/session"}
	got := ChildEnv(Spec{InheritEnv: []string{"MUX_TEST_OURS"}, Env: map[string]string{"B": "2", "A": "1"}}, environ)
	want := []string{"PATH=/session/bin", "MUX_TEST_OURS=the session's", home + "=/home/session", "A=1", "B=2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChildEnv = %q, want %q", got, want)
	}
}

// A backend started with an environ of its own (a session's, in the shared
// mcp-mux) gets its variables from it, not from mcp-mux's environment, and
// its bare command is looked up on that environ's PATH.
func TestBackendStartsFromTheGivenEnviron(t *testing.T) {
	t.Setenv("MUX_TEST_SESSION", "the process's")
	bin := filepath.Join(t.TempDir(), "session-bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Ext(testkit.FixtureBin(t))
	copyFile(t, testkit.FixtureBin(t), filepath.Join(bin, "fx-on-session-path"+exe))
	var environ []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); envKey(k) != "PATH" && k != "MUX_TEST_SESSION" {
			environ = append(environ, kv)
		}
	}
	environ = append(environ, "PATH="+bin, "MUX_TEST_SESSION=the session's")

	spec := Spec{Name: "fx", Command: "fx-on-session-path", Args: []string{"-name", "fx", "-env-tool"},
		InheritEnv: []string{"MUX_TEST_SESSION"}, Environ: environ}
	b, err := Start(context.Background(), spec, Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("a command on the given environ's PATH: %v", err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	env := environOf(t, b)
	if env["MUX_TEST_SESSION"] != "the session's" || env["PATH"] != bin {
		t.Errorf("backend got MUX_TEST_SESSION=%q PATH=%q, want the given environ's", env["MUX_TEST_SESSION"], env["PATH"])
	}

	// On mcp-mux's PATH but not on the session's: not found.
	t.Setenv("PATH", bin)
	spec.Environ = append(environ, "PATH="+t.TempDir())
	if b, err := Start(context.Background(), spec, Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second}); err == nil {
		b.Stop(time.Second)
		t.Error("a command only on mcp-mux's PATH started for an environ whose PATH lacks it")
	} else if !strings.Contains(err.Error(), "not found") {
		t.Errorf("want a \"not found\" error, got %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

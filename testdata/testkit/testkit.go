// Package testkit is what the tests of more than one package share: the
// binaries they run (mcp-mux, the fixture MCP server, the raw server),
// each built once per test process; the fixture serving over HTTP in a
// process of its own; config files; and the small helpers every package
// had a copy of (Eventually, SyncBuffer, CtxT).
//
// It lives under testdata so that `go build ./...` and `go vet ./...` do
// not see it (.ci/run vets it by name), and so that the tests of backends
// can import it too, which they could not under mux/internal.
//
// A package whose tests use it runs them through Main:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
// Where the tests run without Go (the Windows test binaries under Wine,
// testdata/wine/run.sh), BinDirEnv names a directory of the binaries
// built beforehand, and nothing is built.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Main runs the tests of m and exits with their result. Before, it pins
// GOCACHE (so the builds below, and any `go` a test runs, use the usual
// build cache) and then points XDG_CACHE_HOME (LOCALAPPDATA on Windows)
// at a directory of the test
// process's own, so that what mcp-mux remembers across runs (initialize's
// instructions) never reaches the user's cache, and MCP_MUX_STATE_DIR
// there with MCP_MUX_SECRET_STORE=file, so that no sign-in or secret
// reaches the user's keyring or state directory. After, it removes that
// directory and the binaries built into it.
func Main(m *testing.M) {
	if os.Getenv(BinDirEnv) == "" { // else nothing is built
		if err := pinGOCACHE(); err != nil {
			fmt.Fprintln(os.Stderr, "testkit:", err)
			os.Exit(1)
		}
	}
	d, err := dir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testkit:", err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", filepath.Join(d, "cache"))
	// Nothing remembered of the backends' catalogs from one test to the
	// next: each starts its backends as its config says. The tests of
	// start when used name a file of their own.
	os.Setenv("MCP_MUX_CATALOGS", "off")
	// Sign-ins and ${secret:NAME} values: never the user's keyring or
	// state directory.
	os.Setenv("MCP_MUX_SECRET_STORE", "file")
	os.Setenv("MCP_MUX_STATE_DIR", filepath.Join(d, "state"))
	// The control endpoints of the mcp-mux processes tests start: never
	// among the user's, where `mcp-mux status` would show them.
	os.Setenv("MCP_MUX_CONTROL_DIR", filepath.Join(d, "control"))
	// The shared mcp-mux of the tests' sessions: never the user's. Each
	// launch runs in its own process, as the tests before it were
	// written for; the tests of the shared one ask for it (SharedEnv).
	os.Setenv("MCP_MUX_RUN_DIR", filepath.Join(d, "run"))
	// MCP_MUX_SHARED=1 in the environment runs a suite through it instead.
	if os.Getenv("MCP_MUX_SHARED") == "" {
		os.Setenv("MCP_MUX_SHARED", "0")
	}
	if runtime.GOOS == "windows" {
		os.Setenv("LOCALAPPDATA", filepath.Join(d, "cache")) // os.UserCacheDir there
	}
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// pinGOCACHE sets GOCACHE to where `go` keeps its build cache now: GOCACHE
// follows XDG_CACHE_HOME where it is not set, and a build into an empty
// cache takes a minute on a small machine.
func pinGOCACHE() error {
	if os.Getenv("GOCACHE") != "" {
		return nil
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return fmt.Errorf("go env GOCACHE: %v", err)
	}
	if c := strings.TrimSpace(string(out)); c != "" && c != "off" {
		os.Setenv("GOCACHE", c)
	}
	return nil
}

var (
	dirOnce sync.Once
	tmpDir  string
	dirErr  error
)

// dir is the test process's own temporary directory, made on first use.
func dir() (string, error) {
	dirOnce.Do(func() { tmpDir, dirErr = os.MkdirTemp("", "mcp-mux-testkit") })
	return tmpDir, dirErr
}

// binary is a main package of this module, built on first use.
type binary struct {
	name, pkg string // pkg relative to the module root
	once      sync.Once
	path      string
	err       error
}

var (
	muxBin       = &binary{name: "mcp-mux", pkg: "."}
	fixtureBin   = &binary{name: "fixture", pkg: "./testdata/fixture"}
	rawServerBin = &binary{name: "rawserver", pkg: "./backends/testdata/rawserver"}
	browserBin   = &binary{name: "browser", pkg: "./testdata/browser"}
)

// BinDirEnv is the variable that names a directory of prebuilt binaries
// (mcp-mux, fixture, rawserver; mcp-mux.exe... on Windows) for the tests
// to run instead of building them, which needs the go command: the
// Windows test binaries run under Wine, where there is no Go, get them so
// (testdata/wine/run.sh builds them with GOOS=windows).
const BinDirEnv = "MCP_MUX_TEST_BINDIR"

// MuxBin is mcp-mux itself, built from the module root.
func MuxBin(t testing.TB) string { t.Helper(); return muxBin.get(t) }

// FixtureBin is testdata/fixture, the MCP server the tests run as a
// backend (see its flags in testdata/fixture/main.go).
func FixtureBin(t testing.TB) string { t.Helper(); return fixtureBin.get(t) }

// RawServerBin is backends/testdata/rawserver, which writes exactly the
// bytes a test gives it.
func RawServerBin(t testing.TB) string { t.Helper(); return rawServerBin.get(t) }

// BrowserBin is testdata/browser, which stands for the user's browser
// ($BROWSER) in the tests of mcp-mux login.
func BrowserBin(t testing.TB) string { t.Helper(); return browserBin.get(t) }

func (b *binary) get(t testing.TB) string {
	t.Helper()
	b.once.Do(b.build)
	if b.err != nil {
		t.Fatalf("testkit: %v", b.err)
	}
	return b.path
}

func (b *binary) build() {
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe" // without it, exec looks for name.exe, .com, ...
	}
	if bin := os.Getenv(BinDirEnv); bin != "" {
		path := filepath.Join(bin, b.name+exe)
		if _, err := os.Stat(path); err != nil {
			b.err = fmt.Errorf("%s=%s: %v (build it first: go build -o %s %s)", BinDirEnv, bin, err, path, b.pkg)
			return
		}
		b.path = path
		return
	}
	d, err := dir()
	if err != nil {
		b.err = err
		return
	}
	root, err := ModuleRoot()
	if err != nil {
		b.err = err
		return
	}
	path := filepath.Join(d, b.name+exe)
	cmd := exec.Command("go", "build", "-o", path, b.pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.err = fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
		return
	}
	b.path = path
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// ModuleRoot is the directory of the module's go.mod.
func ModuleRoot() (string, error) {
	rootOnce.Do(func() {
		// This file is testdata/testkit/testkit.go under the root; with
		// -trimpath the path is not a file's, so ask go.
		_, file, _, ok := runtime.Caller(0)
		if ok && UnderWine() && strings.HasPrefix(file, "/") {
			file = "Z:" + filepath.FromSlash(file) // built on Linux: Wine's Z: is its /
		}
		if ok && filepath.IsAbs(file) {
			root = filepath.Dir(filepath.Dir(filepath.Dir(file)))
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				return
			}
		}
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			rootErr = fmt.Errorf("no module root: go env GOMOD: %v", err)
			return
		}
		root = filepath.Dir(strings.TrimSpace(string(out)))
	})
	return root, rootErr
}

// Eventually polls cond until it holds, failing t with what if d passes
// first.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(d, cond) {
		t.Fatalf("after %v, still waiting for %s", d, what)
	}
}

// Poll polls cond until it holds (true) or d passes (false), for a test
// that says more than Eventually would when it does not hold, or goes on.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
	return true
}

// pollEvery is how often Poll asks again.
const pollEvery = 10 * time.Millisecond

// Quiet lets d of real time pass, in which something must not happen: a
// response to a cancelled request, a second reload, a retry. There is no
// event to wait for, only a window after which it would have come; each
// caller says what must not come and why d is long enough. (Code with no
// process or network in it tests this in a synctest bubble instead.)
func Quiet(d time.Duration) { time.Sleep(d) }

// CtxT is a context for one call of a test: it ends after 20 s, or with
// the test.
func CtxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// SyncBuffer is a bytes.Buffer safe for one writer (a log, a process's
// stderr copied by exec) and a test reading it meanwhile.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Bytes is a copy of what was written so far.
func (s *SyncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

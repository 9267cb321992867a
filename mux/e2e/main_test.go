package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// running is mcp-mux started as an agent starts it (see startWire), with an
// MCP session on its pipes.
type running struct {
	*wire
	cs *mcp.ClientSession
}

func runMux(t *testing.T, config string) *running {
	t.Helper()
	w := startWire(t, config)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(w.out), Writer: nopClose{w.stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, w.stderr)
	}
	return &running{wire: w, cs: cs}
}

// nopClose keeps the client session from closing mcp-mux's stdin: the tests
// decide when the agent goes away.
type nopClose struct{ io.Writer }

func (nopClose) Close() error { return nil }

// backendPIDs reads the backends' pids from mcp-mux://backends.
func (r *running) backendPIDs(t *testing.T) []int {
	t.Helper()
	// A tools/list waits for the backends still starting, but only for
	// first_list_wait: on a loaded machine one may take longer.
	if _, err := r.cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	var pids []int
	var text string
	if !testkit.Poll(10*time.Second, func() bool {
		res, err := r.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
		if err != nil {
			t.Fatal(err)
		}
		text = res.Contents[0].Text
		var v struct {
			Backends []struct {
				PID int `json:"pid"`
			} `json:"backends"`
		}
		json.Unmarshal([]byte(text), &v)
		pids = nil
		for _, b := range v.Backends {
			if b.PID != 0 {
				pids = append(pids, b.PID)
			}
		}
		return len(pids) == len(v.Backends)
	}) {
		t.Fatalf("backend without pid: %s", text)
	}
	return pids
}

// alive reports whether pid is a live process (a zombie waiting for a
// reaper that is not ours counts as gone).
func alive(pid int) bool {
	if runtime.GOOS == "windows" {
		return processExists(pid) // and /proc would be Linux's, under Wine
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return processExists(pid)
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone fails t for each of pids still alive d from now.
func waitGone(t *testing.T, pids []int, d time.Duration) {
	t.Helper()
	testkit.Poll(d, func() bool { return !slices.ContainsFunc(pids, alive) })
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d still alive after %v", pid, d)
		}
	}
}

// readPidfile waits for the pidfile at path and returns the pids in it.
func readPidfile(t *testing.T, path string) []int {
	t.Helper()
	var data []byte
	if !testkit.Poll(5*time.Second, func() bool {
		var err error
		data, err = os.ReadFile(path)
		return err == nil
	}) {
		t.Fatalf("no pidfile %s", path)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		n, _ := strconv.Atoi(f)
		pids = append(pids, n)
	}
	return pids
}

// TestStdinEOFStopsEveryBackendAndGrandchild: the agent closes mcp-mux's
// stdin; mcp-mux exits 0 within a few seconds and leaves no process
// behind, including a backend that ignores EOF and SIGTERM and a
// grandchild (like node under npx).
func TestStdinEOFStopsEveryBackendAndGrandchild(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	cfg := testkit.WriteConfig(t, "",
		[]string{"notes", "-name", "notes", "-grandchild-pidfile", pidfile},
		[]string{"stubborn", "-name", "stubborn", "-ignore-eof"},
	)
	r := runMux(t, cfg)
	pids := append(r.backendPIDs(t), readPidfile(t, pidfile)[1])
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d not running before the test", pid)
		}
	}

	start := time.Now()
	r.stdin.Close()
	select {
	case <-r.exited:
		if r.err != nil {
			t.Errorf("mcp-mux exited with %v, want 0\nstderr:\n%s", r.err, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("mcp-mux still running 10 s after stdin EOF")
	}
	t.Logf("exited %v after stdin EOF (shutdown_grace 1s)", time.Since(start))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to exit, want within shutdown_grace + 1 s", d)
	}
	waitGone(t, pids, 2*time.Second)
}

func TestSIGTERMStopsEverything(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
	r := runMux(t, cfg)
	pids := r.backendPIDs(t)
	signalProcess(t, r.cmd.Process, syscall.SIGTERM)
	select {
	case <-r.exited:
		if r.err != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running after SIGTERM")
	}
	waitGone(t, pids, 2*time.Second)
}

// SIGHUP reloads instead: TestSIGHUPReloadsAndKeepsTheSession.
func TestSIGINTStopsEverything(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
			r := runMux(t, cfg)
			pids := r.backendPIDs(t)
			signalProcess(t, r.cmd.Process, sig)
			select {
			case <-r.exited:
				if r.err != nil {
					t.Errorf("exit after %v: %v, want 0", sig, r.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("still running after %v", sig)
			}
			waitGone(t, pids, 2*time.Second)
		})
	}
}

// TestSIGKILLOfMuxLeavesNoBackend: the kernel's parent-death signal ends
// the backends when mcp-mux cannot.
func TestSIGKILLOfMuxLeavesNoBackend(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}, []string{"stubborn", "-name", "stubborn", "-ignore-eof"})
	r := runMux(t, cfg)
	pids := r.backendPIDs(t)
	r.cmd.Process.Kill()
	<-r.exited
	waitGone(t, pids, 3*time.Second)
}

func TestStdoutCarriesOnlyJSONRPC(t *testing.T) {
	cfg := testkit.WriteConfig(t, `log_level = "debug"`, []string{"notes", "-name", "notes"})
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"notes__noise","arguments":{"text":"a banner, not JSON"}}}
`)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	answered := map[float64]bool{}
	for !answered[2] || !answered[3] {
		if !sc.Scan() {
			t.Fatalf("stdout ended early: %v\n%s", sc.Err(), stderr.String())
		}
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg["jsonrpc"] != "2.0" {
			t.Errorf("non-JSON-RPC line on stdout: %q", sc.Text())
		}
		if id, ok := msg["id"].(float64); ok {
			answered[id] = true
		}
	}
	stdin.Close()
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("non-JSON line on stdout: %q", sc.Text())
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
	if !strings.Contains(stderr.String(), "fixture notes ready") {
		t.Errorf("the backend's stderr was not captured into the log:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "a banner, not JSON") {
		t.Errorf("the backend's stdout noise was not logged:\n%s", stderr.String())
	}
}

// runCheck runs mcp-mux check and returns its stdout and exit code.
// TestMalformedFramesOnStdinGetErrorsAndServingGoesOn: the go-sdk alone
// would end the session at the first undecodable line.
func TestMalformedFramesOnStdinGetErrorsAndServingGoesOn(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"})
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	roundTrip := func(line string) map[string]any {
		t.Helper()
		io.WriteString(stdin, line+"\n")
		for sc.Scan() {
			var msg map[string]any
			if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
				t.Fatalf("stdout line is not JSON: %q", sc.Text())
			}
			if _, isNote := msg["method"]; !isNote {
				return msg
			}
		}
		t.Fatalf("stdout closed after %q", line)
		return nil
	}
	code := func(msg map[string]any) float64 {
		e, _ := msg["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	for _, c := range []struct {
		line string
		code float64
	}{
		{`this is not json`, -32700},
		{`{"jsonrpc":"2.0","id":2,"method":`, -32700},
		{`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`, -32600},
		{`{"jsonrpc":"1.0","id":4,"method":"ping"}`, -32600},
		{`{"jsonrpc":"2.0","id":5,"method":"no/such/method"}`, -32601},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"not an object"}`, -32602},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__echo","arguments":[1,2]}}`, -32602},
		{`{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":42}}`, -32602},
	} {
		if got := code(roundTrip(c.line)); got != c.code {
			t.Errorf("%s: code %v, want %v", c.line, got, c.code)
		}
	}
	res := roundTrip(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"notes__echo","arguments":{"still":"serving"}}}`)
	if res["id"] != float64(9) || res["result"] == nil {
		t.Errorf("a valid request after the bad ones: %v", res)
	}
}

func runCheck(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), append([]string{"check"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	out = append(out, stderr.Bytes()...)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func TestCheckReportsConfigMistakesWithFileAndLine(t *testing.T) {
	bad, _ := filepath.Glob("../../testdata/config/*.toml")
	n := 0
	for _, path := range bad {
		if filepath.Base(path) == "good.toml" {
			continue
		}
		n++
		t.Run(filepath.Base(path), func(t *testing.T) {
			if runtime.GOOS == "windows" && filepath.Base(path) == "log-file-stdout.toml" {
				t.Skip("no /dev/stdout on Windows: it is a path there (mux/config TestConfigWindowsPaths)")
			}
			out, code := runCheck(t, "--config", path)
			if code != 1 {
				t.Errorf("exit %d, want 1\n%s", code, out)
			}
			if !regexp.MustCompile(regexp.QuoteMeta(path) + `:\d+: `).MatchString(out) {
				t.Errorf("no FILE:LINE: in\n%s", out)
			}
			if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic") {
				t.Errorf("stack trace for a user mistake:\n%s", out)
			}
		})
	}
	if n < 9 {
		t.Errorf("only %d bad fixture configs", n)
	}
	if out, code := runCheck(t, "--config", "../../testdata/config/good.toml"); code != 0 {
		t.Errorf("good.toml: exit %d\n%s", code, out)
	}
	if out, code := runCheck(t, "--config", "../../mcp-mux.toml.example"); code != 0 {
		t.Errorf("the example: exit %d\n%s", code, out)
	}
}

func TestCheckConnectReportsBackendsAndCollisions(t *testing.T) {
	cfg := testkit.WriteConfig(t, "",
		[]string{"notes", "-name", "notes", "-resources", "2"},
		[]string{"copy", "-name", "copy", "-uri-base", "fixture://notes/", "-resources", "1", "-subscribe=false"},
	)
	// Both unprefixed (two equal non-empty prefixes are a config error):
	// every tool collides.
	data, _ := os.ReadFile(cfg)
	for _, name := range []string{"notes", "copy"} {
		data = bytes.Replace(data, []byte(`name = "`+name+`"`), []byte(`name = "`+name+"\"\nprefix = \"\""), 1)
	}
	os.WriteFile(cfg, data, 0o644)

	out, code := runCheck(t, "--connect", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"backend notes", "backend copy", "state        ready", "subscribe    no", "resources    2",
		`tool "stats": notes wins over copy`, `resource "fixture://notes/res/1": notes wins over copy`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}

	jcmd := exec.Command(testkit.MuxBin(t), "check", "--connect", "--json", "--config", cfg)
	jout, _ := jcmd.Output()
	code = jcmd.ProcessState.ExitCode()
	var rep struct {
		OK       bool `json:"ok"`
		Backends []struct {
			Name, State string
			Tools       int
		} `json:"backends"`
		Collisions []map[string]string `json:"collisions"`
	}
	if err := json.Unmarshal(jout, &rep); err != nil || code != 0 || !rep.OK || len(rep.Backends) != 2 || len(rep.Collisions) < 14 {
		t.Errorf("json report (exit %d, %v): %s", code, err, jout)
	}
}

func TestCheckConnectFailsWhenABackendCannotStart(t *testing.T) {
	cfg := testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}, []string{"broken", "-fail-start"})
	out, code := runCheck(t, "--connect", "--config", cfg)
	if code != 1 || !strings.Contains(out, "failing on purpose") {
		t.Errorf("exit %d, want 1 with the backend's reason:\n%s", code, out)
	}
}

// leaks reports whether out contains secret or any 7-byte piece of it.
func leaks(out, secret string) bool {
	for i := 0; i+7 <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+7]) {
			return true
		}
	}
	return strings.Contains(out, secret)
}

// runWith runs mcp-mux with args (stdin empty) and returns its stdout,
// stderr and exit code.
func runWith(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("mcp-mux %v still running after 30 s", args)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// TestCheckAndServeNeverPrintEnvSecrets: an env value broken in any way is
// reported by FILE:LINE and what is wrong, never with the value, by check
// (plain and --json) and by serve.
func TestCheckAndServeNeverPrintEnvSecrets(t *testing.T) {
	// A file that does not parse stops serve too (exit 1); a mistake in
	// one backend's entry (parses) only disables that backend.
	cases := []struct {
		entry, secret, want string
		parses              bool
	}{
		{`API_TOKEN = "S3CR3Tq7Zx\u00"`, "S3CR3Tq7Zx", "invalid escape sequence", false},
		{`API_TOKEN = "xS3CR3Tw8Yv\x4"`, "xS3CR3Tw8Yv", "invalid escape sequence", false},
		{`API_TOKEN = "US3CR3Tp6Xu\U0000"`, "US3CR3Tp6Xu", "invalid escape sequence", false},
		{`PIN = 0738491625`, "0738491625", "leading zero", false},
		{`API_TOKEN = tokQ7xZsecretW`, "tokQ7xZsecretW", "expected a value", false},
		{`GITHUB_TOKEN = "${ghp_16C7e42F292c6912E7710c838347Ae178B4a}"`, "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "not set", true},
		{`"API_TOKEN=S3CR3Tj1Sq" = ""`, "S3CR3Tj1Sq", "invalid environment variable name", true},
	}
	for _, c := range cases {
		t.Run(c.want+"/"+c.secret[:4], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcp-mux.toml")
			src := fmt.Sprintf("[[backend]]\nname = \"api\"\ncommand = %q\nenv = { %s }\n", testkit.FixtureBin(t), c.entry)
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"check", "--config", path}, {"check", "--json", "--config", path}, {"--config", path}} {
				stdout, stderr, code := runWith(t, "", args...)
				all := stdout + stderr
				if want := 1; code != want && (args[0] == "check" || !c.parses) {
					t.Errorf("%v: exit %d, want %d\n%s", args, code, want, all)
				} else if args[0] != "check" && c.parses && code != 0 {
					t.Errorf("%v: exit %d, want 0 (serving the file, without the backend)\n%s", args, code, all)
				}
				if leaks(all, c.secret) {
					t.Errorf("%v: the output shows the value:\n%s", args, all)
				}
				if !strings.Contains(all, c.want) {
					t.Errorf("%v: the output does not say %q:\n%s", args, c.want, all)
				}
				if args[1] == "--json" {
					if !strings.Contains(stdout, `"line": 4`) {
						t.Errorf("%v: no line 4 in\n%s", args, stdout)
					}
				} else if !strings.Contains(all, path+":4: ") {
					t.Errorf("%v: no %s:4: in\n%s", args, path, all)
				}
			}
		})
	}
}

// TestLogFileThatIsStdoutIsRefused: stdout carries the protocol, so a
// log_file that is stdout by any name (or the file stdout is redirected to)
// is refused: by check where it can tell (exit 1), and by serve, which
// logs to stderr instead, says why there, and writes nothing on stdout.
func TestLogFileThatIsStdoutIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix: /dev/stdout, /proc/self/fd/1, and the file stdout is redirected to, which mcp-mux compares with log_file only there")
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "to-stdout.log")
	if err := os.Symlink("/dev/stdout", link); err != nil {
		t.Fatal(err)
	}
	for _, lf := range []string{"/dev/stdout", "/proc/self/fd/1", "/dev/fd/1", link} {
		cfg := testkit.WriteConfig(t, "log_file = "+strconv.Quote(lf), []string{"notes", "-name", "notes"})
		out, code := runCheck(t, "--config", cfg)
		if code != 1 || !strings.Contains(out, cfg+":3: mux.log_file: ") || !strings.Contains(out, "stdout") {
			t.Errorf("check, log_file %s: exit %d, want 1 and %s:3: mux.log_file: ... stdout:\n%s", lf, code, cfg, out)
		}
		stdout, stderr, code := runWith(t, "", "--config", cfg)
		if code != 0 || stdout != "" || !strings.Contains(stderr, "log_file") || !strings.Contains(stderr, "stdout") {
			t.Errorf("serve, log_file %s: exit %d, want 0 with the reason on stderr and nothing on stdout\nstdout: %q\nstderr: %s", lf, code, stdout, stderr)
		}
	}

	// The file stdout is redirected to, by its name or through a symlink:
	// only serve can tell, and only the process whose stdout it is: a
	// session does not hand it to the shared process.
	t.Run("in-process", func(t *testing.T) { logFileIsRedirectedStdout(t, t.TempDir()) })
	t.Run("shared", func(t *testing.T) {
		sharedDirs(t)
		logFileIsRedirectedStdout(t, t.TempDir())
	})
}

func logFileIsRedirectedStdout(t *testing.T, dir string) {
	outFile := filepath.Join(dir, "stdout.txt")
	outLink := filepath.Join(dir, "stdout-link.log")
	if err := os.Symlink(outFile, outLink); err != nil {
		t.Fatal(err)
	}
	for _, lf := range []string{outFile, outLink} {
		f, err := os.Create(outFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg := testkit.WriteConfig(t, "log_file = "+strconv.Quote(lf), []string{"notes", "-name", "notes"})
		cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = f, &stderr
		err = cmd.Run()
		f.Close()
		data, _ := os.ReadFile(outFile)
		if code := cmd.ProcessState.ExitCode(); code != 0 || len(data) != 0 || !strings.Contains(stderr.String(), "stdout") {
			t.Errorf("serve with stdout > %s, log_file %s: exit %d (%v), want 0, an empty stdout and the reason on stderr\nstdout file: %q\nstderr: %s", outFile, lf, code, err, data, stderr.String())
		}
	}
}

// TestNewLogFileIs0600AndAnExistingOneKeepsItsMode: logs may show backend
// output nobody else should read. Even with umask 0 a new log file is
// 0600; an existing file's mode is left as the user set it.
func TestNewLogFileIs0600AndAnExistingOneKeepsItsMode(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.log")
	if err := os.WriteFile(existing, []byte("old line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		mode os.FileMode
	}{{filepath.Join(dir, "new.log"), 0o600}, {existing, 0o640}} {
		cfg := testkit.WriteConfig(t, "log_file = "+strconv.Quote(c.file), []string{"notes", "-name", "notes"})
		cmd := exec.Command(testkit.MuxBin(t), "--config", cfg) // stdin empty: serve, then exit
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		restore := clearUmask(t) // inherited by the child at fork
		err := cmd.Start()
		restore()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
		fi, err := os.Stat(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.mode {
			t.Errorf("%s: mode %v, want %v", filepath.Base(c.file), got, c.mode)
		}
		data, _ := os.ReadFile(c.file)
		if !strings.Contains(string(data), "config loaded") {
			t.Errorf("%s: the log was not written there:\n%s", filepath.Base(c.file), data)
		}
	}
	if data, _ := os.ReadFile(existing); !strings.HasPrefix(string(data), "old line\n") {
		t.Errorf("the existing log was not appended to:\n%s", data)
	}
}

// TestRelativePathsInConfigAreRelativeToItsDirectory: the agent starts
// mcp-mux in whatever directory it likes; log_file, cwd and a command
// with a "/" are found next to the config file all the same.
func TestRelativePathsInConfigAreRelativeToItsDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "conf")
	for _, d := range []string{"logs", "data", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "bin", "fixture")
	if runtime.GOOS == "windows" {
		link += ".exe" // bin/fixture is found as bin/fixture.exe there
	}
	if runtime.GOOS == "windows" {
		// A symlink needs a privilege there: a copy.
		exe, err := os.ReadFile(testkit.FixtureBin(t))
		if err != nil || os.WriteFile(link, exe, 0o755) != nil {
			t.Fatal(err)
		}
	} else if err := os.Symlink(testkit.FixtureBin(t), link); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	pidsA, pidsB := filepath.Join(root, "a.pids"), filepath.Join(root, "b.pids")
	cfg := filepath.Join(dir, "mcp-mux.toml")
	src := fmt.Sprintf(`[mux]
log_file = "logs/mux.log"
shutdown_grace = "1s"

[[backend]]
name = "a"
command = "bin/fixture"
args = ["-name", "a", "-grandchild-pidfile", %q]

[[backend]]
name = "b"
command = "../bin/fixture"
cwd = "data"
args = ["-name", "b", "-grandchild-pidfile", %q]
`, pidsA, pidsB)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}

	// check, from elsewhere and with the config named relative to the working directory.
	for _, c := range [][2]string{{elsewhere, cfg}, {root, "conf/mcp-mux.toml"}} {
		stdout, stderr, code := runWith(t, c[0], "check", "--config", c[1])
		if code != 0 {
			t.Errorf("check --config %s in %s: exit %d\n%s%s", c[1], c[0], code, stdout, stderr)
		}
	}

	// serve, from elsewhere: the backends run, b in conf/data, and the log
	// lands in conf/logs.
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	cmd.Dir = elsewhere
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitExit := func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve: %v\n%s", err, stderr.String())
		}
	}
	a, b := readPidfile(t, pidsA), readPidfile(t, pidsB)
	for _, c := range []struct {
		pid  int
		want string
	}{{a[0], elsewhere}, {b[0], filepath.Join(dir, "data")}} {
		if runtime.GOOS != "linux" {
			break // a process's working directory is in /proc
		}
		got, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", c.pid))
		if err != nil || got != c.want {
			t.Errorf("backend %d runs in %q (%v), want %q", c.pid, got, err, c.want)
		}
	}
	waitExit()
	data, err := os.ReadFile(filepath.Join(dir, "logs", "mux.log"))
	if err != nil || !strings.Contains(string(data), "config loaded") {
		t.Errorf("no log in conf/logs/mux.log (%v):\n%s\nstderr:\n%s", err, data, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "logs")); err == nil {
		t.Errorf("a logs directory appeared in the working directory")
	}

	// A relative cwd that does not exist: the message says relative to what.
	os.WriteFile(cfg, []byte(strings.Replace(src, `cwd = "data"`, `cwd = "nodata"`, 1)), 0o644)
	out, code := runCheck(t, "--config", cfg)
	want := fmt.Sprintf(`%s:13: backend #2 (b).cwd: directory "nodata" (relative to the config file's directory %s) does not exist`, cfg, dir)
	if code != 1 || !strings.Contains(out, want) {
		t.Errorf("exit %d, want 1 and %q in\n%s", code, want, out)
	}
}

// TestCheckConnectStopsWithinASecondOnSIGINT: Ctrl-C during check
// --connect, while one backend is still starting (10 s) and one ignores
// stdin EOF and SIGTERM, ends it within a second, says so, exits 130, and
// leaves no process behind, however long shutdown_grace is.
func TestCheckConnectStopsWithinASecondOnSIGINT(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			slowPids, stubbornPids := filepath.Join(dir, "slow.pids"), filepath.Join(dir, "stubborn.pids")
			cfg := filepath.Join(dir, "mcp-mux.toml")
			src := fmt.Sprintf(`[mux]
shutdown_grace = "5s"
startup_timeout = "30s"

[[backend]]
name = "slow"
command = %[1]q
args = ["-name", "slow", "-start-delay", "10s", "-grandchild-pidfile", %[2]q]

[[backend]]
name = "stubborn"
command = %[1]q
args = ["-name", "stubborn", "-ignore-eof", "-grandchild-pidfile", %[3]q]

[[backend]]
name = "notes"
command = %[1]q
args = ["-name", "notes"]
`, testkit.FixtureBin(t), slowPids, stubbornPids)
			if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(testkit.MuxBin(t), "check", "--connect", "--config", cfg)
			var stdout bytes.Buffer
			stderr := &testkit.SyncBuffer{}
			cmd.Stdout, cmd.Stderr = &stdout, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			defer func() {
				cmd.Process.Kill()
				<-exited
			}()
			// stubborn and notes are ready (check says so as each is),
			// slow is still starting: every process is there.
			testkit.Eventually(t, 10*time.Second, "stubborn and notes ready", func() bool {
				return strings.Contains(stderr.String(), "backend stubborn: ready") && strings.Contains(stderr.String(), "backend notes: ready")
			})
			if strings.Contains(stderr.String(), "backend slow:") {
				t.Fatalf("slow settled already, 10 s early:\n%s", stderr)
			}
			pids := append(readPidfile(t, slowPids), readPidfile(t, stubbornPids)...)
			for _, p := range descendantsOf(cmd.Process.Pid) {
				if !slices.Contains(pids, p) {
					pids = append(pids, p)
				}
			}
			if len(pids) < 5 {
				t.Fatalf("only %d processes found: %v", len(pids), pids)
			}

			signalProcess(t, cmd.Process, sig)
			sent := time.Now()
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				t.Fatalf("still running 5 s after %v\nstderr:\n%s", sig, stderr.String())
			}
			took := time.Since(sent)
			t.Logf("exited %v after %v; exit %d; stderr: %q; stdout: %q", took, sig, cmd.ProcessState.ExitCode(), stderr.String(), stdout.String())
			if took > time.Second {
				t.Errorf("took %v to exit after %v, want within 1 s", took, sig)
			}
			if code, want := cmd.ProcessState.ExitCode(), 128+int(sig); code != want {
				t.Errorf("exit code %d, want %d", code, want)
			}
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
			}
			waitGone(t, pids, 200*time.Millisecond)
		})
	}
}

// stdinClosed reports whether process parent has closed its end of
// process child's stdin (a pipe or socket, seen in /proc/*/fd: the links
// of both ends name the same pipe): false while it holds it, or if
// child's stdin cannot be seen.
func stdinClosed(parent, child int) bool {
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", child))
	if err != nil || !strings.Contains(target, ":[") {
		return false
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", parent))
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", parent, e.Name())); err == nil && l == target {
			return false
		}
	}
	return true
}

// descendantsOf lists every live process below pid, from the parent links
// (processChildren; a process that was orphaned already is no longer
// below it).
func descendantsOf(pid int) []int {
	children := processChildren()
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// TestEveryDescendantDiesWithMux: however mcp-mux ends, SIGKILL included,
// nothing started under it survives: not a background child that ignores
// stdin EOF, not one that called setsid, not one orphaned by a double fork
// before the end, not the fixture's own grandchild.
func TestEveryDescendantDiesWithMux(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid(1):", err)
	}
	ends := []struct {
		name string
		end  func(r *running)
	}{
		{"SIGKILL", func(r *running) { r.cmd.Process.Kill() }},
		{"SIGTERM", func(r *running) { r.cmd.Process.Signal(syscall.SIGTERM) }},
		{"stdin EOF", func(r *running) { r.stdin.Close() }},
	}
	for _, end := range ends {
		t.Run(end.name, func(t *testing.T) {
			dir := t.TempDir()
			var cfg strings.Builder
			cfg.WriteString("[mux]\nshutdown_grace = \"1s\"\n\n")
			// The shell writes the escaping process's pid, then becomes the
			// fixture (exec), so the backend itself is an MCP server.
			scripts := []struct{ name, script string }{
				{"background", `sleep 1000 & echo $! > "$1"; exec "$2" -name background`},
				{"setsid", `setsid sleep 1000 & echo $! > "$1"; exec "$2" -name setsid`},
				{"orphan", `(setsid sleep 1000 & echo $! > "$1"); exec "$2" -name orphan`},
			}
			for _, s := range scripts {
				fmt.Fprintf(&cfg, "[[backend]]\nname = %q\ncommand = \"/bin/sh\"\nargs = [\"-c\", %q, \"sh\", %q, %q]\n\n",
					s.name, s.script, filepath.Join(dir, s.name), testkit.FixtureBin(t))
			}
			fmt.Fprintf(&cfg, "[[backend]]\nname = \"grandchild\"\ncommand = %q\nargs = [\"-name\", \"grandchild\", \"-grandchild-pidfile\", %q]\n",
				testkit.FixtureBin(t), filepath.Join(dir, "grandchild"))
			path := filepath.Join(dir, "mcp-mux.toml")
			if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
				t.Fatal(err)
			}

			r := runMux(t, path)
			r.backendPIDs(t)
			escapees := map[string]int{}
			for _, name := range []string{"background", "setsid", "orphan", "grandchild"} {
				pids := readPidfile(t, filepath.Join(dir, name))
				escapees[name] = pids[len(pids)-1]
			}
			tree := descendantsOf(r.cmd.Process.Pid)
			all := append([]int(nil), tree...)
			for name, pid := range escapees {
				if !alive(pid) {
					t.Fatalf("%s: process %d not running before the test", name, pid)
				}
				if !slices.Contains(all, pid) { // the orphan is no longer in the tree
					all = append(all, pid)
				}
			}
			t.Cleanup(func() {
				for _, pid := range all {
					if alive(pid) {
						killProcess(pid)
					}
				}
			})

			end.end(r)
			select {
			case <-r.exited:
			case <-time.After(10 * time.Second):
				t.Fatal("mcp-mux still running 10 s later")
			}
			left := func() []int {
				var out []int
				for _, pid := range all {
					if alive(pid) {
						out = append(out, pid)
					}
				}
				return out
			}
			testkit.Poll(2*time.Second, func() bool { return len(left()) == 0 })
			survivors := left()
			t.Logf("%d of %d processes left 2 s after %s of mcp-mux", len(survivors), len(all), end.name)
			for name, pid := range escapees {
				if alive(pid) {
					t.Errorf("%s: process %d survived %s of mcp-mux", name, pid, end.name)
				}
			}
			if len(survivors) > 0 {
				t.Errorf("processes left: %v (tree before: %v)", survivors, tree)
			}
		})
	}
}

// wineOwn reports whether k is one of the WINE* variables Wine's loader
// puts in every process's environment, when the tests run under Wine.
func wineOwn(k string) bool {
	return testkit.UnderWine() && strings.HasPrefix(strings.ToUpper(k), "WINE")
}

// TestBackendsGetAMinimalEnvironment: a variable of mcp-mux's environment
// reaches only the backends that name it in inherit_env (or inherit all);
// the others get the default set (PATH, HOME, locale, ...) and their own
// env table, and no value is ever logged.
func TestBackendsGetAMinimalEnvironment(t *testing.T) {
	t.Setenv("MUX_E2E_TOKEN", "tok-secret-value")
	t.Setenv("MUX_E2E_OTHER", "other-secret-value")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("LC_TIME", "C")
	t.Setenv("TZ", "UTC")
	dir := t.TempDir()
	backend := func(name, extra string) string {
		return fmt.Sprintf("[[backend]]\nname = %q\ncommand = %q\nargs = [\"-name\", %q, \"-env-tool\"]\n%s\n\n", name, testkit.FixtureBin(t), name, extra)
	}
	cfg := "[mux]\nshutdown_grace = \"1s\"\n\n" +
		backend("plain", `env = { OWN = "own-value", LANG = "fr_FR.UTF-8" }`) +
		backend("named", `inherit_env = ["MUX_E2E_TOKEN"]`) +
		backend("prefix", `inherit_env = ["MUX_E2E_*"]`) +
		backend("all", "inherit_env = true")
	path := filepath.Join(dir, "mcp-mux.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runMux(t, path)
	r.backendPIDs(t)
	res, err := r.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Backends []struct {
			Name string `json:"name"`
			PID  int    `json:"pid"`
		} `json:"backends"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &v); err != nil {
		t.Fatal(err)
	}

	// The expectation is written out here, not taken from the code under test.
	defaults := map[string]string{}
	for _, kv := range os.Environ() {
		k, val, _ := strings.Cut(kv, "=")
		if runtime.GOOS == "windows" {
			switch strings.ToUpper(k) {
			case "APPDATA", "COMSPEC", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT",
				"PROCESSOR_ARCHITECTURE", "PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP",
				"USERNAME", "USERPROFILE":
				defaults[k] = val
			}
			continue
		}
		switch k {
		case "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE", "TZ", "TMPDIR":
			defaults[k] = val
		default:
			if strings.HasPrefix(k, "LC_") {
				defaults[k] = val
			}
		}
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, val := range defaults {
			m[k] = val
		}
		for k, val := range extra {
			m[k] = val
		}
		return m
	}
	all := map[string]string{}
	for _, kv := range os.Environ() {
		if k, val, _ := strings.Cut(kv, "="); k != "" && !wineOwn(k) {
			all[k] = val
		}
	}
	want := map[string]map[string]string{
		"plain":  with(map[string]string{"OWN": "own-value", "LANG": "fr_FR.UTF-8"}),
		"named":  with(map[string]string{"MUX_E2E_TOKEN": "tok-secret-value"}),
		"prefix": with(map[string]string{"MUX_E2E_TOKEN": "tok-secret-value", "MUX_E2E_OTHER": "other-secret-value"}),
		"all":    all,
	}
	if len(v.Backends) != len(want) {
		t.Fatalf("backends: %s", res.Contents[0].Text)
	}
	for _, b := range v.Backends {
		// From /proc on Linux; elsewhere the fixture's env tool tells.
		var kvs []string
		if runtime.GOOS == "linux" {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", b.PID))
			if err != nil {
				t.Fatal(err)
			}
			kvs = strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		} else if err := json.Unmarshal([]byte(callText(t, r.cs, b.Name+"__env", nil)), &kvs); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, kv := range kvs {
			// Windows keeps each drive's directory as "=C:=C:\...".
			if k, val, _ := strings.Cut(kv, "="); k != "" && !wineOwn(k) {
				got[k] = val
			}
		}
		w := want[b.Name]
		for k, val := range w {
			if g, ok := got[k]; !ok {
				t.Errorf("%s: %s missing from its environment", b.Name, k)
			} else if g != val {
				t.Errorf("%s: %s has the wrong value", b.Name, k)
			}
		}
		for k := range got {
			if _, ok := w[k]; !ok {
				t.Errorf("%s: %s reached the backend but was not meant to", b.Name, k)
			}
		}
	}
	r.stdin.Close()
	<-r.exited
	for _, secret := range []string{"tok-secret-value", "other-secret-value", "own-value"} {
		if strings.Contains(r.stderr.String(), secret) {
			t.Errorf("a value was logged: %s", secret)
		}
	}
}

// TestCheckConnectCtrlCWhileStoppingEndsAtOnce: Ctrl-C while check is
// giving a backend that ignores stdin EOF its shutdown_grace (5 s) kills
// it and ends the command within a second.
func TestCheckConnectCtrlCWhileStoppingEndsAtOnce(t *testing.T) {
	canSignal(t, syscall.SIGINT) // and stdinClosed reads Linux's /proc
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "stubborn.pids")
	cfg := filepath.Join(dir, "mcp-mux.toml")
	src := fmt.Sprintf("[mux]\nshutdown_grace = \"5s\"\n\n[[backend]]\nname = \"stubborn\"\ncommand = %q\nargs = [\"-name\", \"stubborn\", \"-ignore-eof\", \"-grandchild-pidfile\", %q]\n", testkit.FixtureBin(t), pidfile)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testkit.MuxBin(t), "check", "--connect", "--config", cfg)
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	pids := readPidfile(t, pidfile)
	// Started, reported, now in its grace: check closed the backend's
	// stdin, which the backend ignores.
	testkit.Eventually(t, 10*time.Second, "check to close the backend's stdin", func() bool {
		return strings.Contains(stderr.String(), "backend stubborn: ready") && stdinClosed(cmd.Process.Pid, pids[0])
	})
	signalProcess(t, cmd.Process, syscall.SIGINT)
	sent := time.Now()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after SIGINT\nstderr:\n%s", stderr.String())
	}
	took := time.Since(sent)
	t.Logf("exited %v after SIGINT; exit %d; stderr: %q", took, cmd.ProcessState.ExitCode(), stderr.String())
	if took > time.Second || cmd.ProcessState.ExitCode() != 130 {
		t.Errorf("exit %d after %v, want 130 within 1 s", cmd.ProcessState.ExitCode(), took)
	}
	waitGone(t, pids, 200*time.Millisecond)
}

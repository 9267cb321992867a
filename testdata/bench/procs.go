//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// mode is what the agent (this program) talks to.
type mode int

const (
	direct   mode = iota // the fixture itself
	relay                // the relay, which runs the fixture
	muxed                // mcp-mux, configured with the fixture(s) as backends
	before               // as muxed, another mcp-mux binary (-before)
	mcpmu                // mcpmu serve --http (-mcpmu), the HTTP rows only
	bridge               // the bridge, which runs the fixture: the go-sdk client's rows only
	allCores             // as muxed, with GOMAXPROCS=NumCPU (its rule set aside): the go-sdk client's rows only
)

func (m mode) String() string {
	return [...]string{"direct", "relay", "mcp-mux", "mcp-mux (before)", "mcpmu", "bridge", "mcp-mux, every core"}[m]
}

func (m mode) isMux() bool { return m == muxed || m == before || m == allCores }

// fixtureSpec is one fixture process: its -name and further flags.
type fixtureSpec struct {
	name string
	args []string
	toml string // more lines for its [[backend]] in a mcp-mux config, if any
}

func (f fixtureSpec) argv() []string { return append([]string{"-name", f.name}, f.args...) }

// proc is a started process under test, in its own process group, with
// its stdio on pipes of ours.
type proc struct {
	mode    mode
	cmd     *exec.Cmd
	stdin   *os.File // our write end
	stdout  *os.File // our read end
	logPath string   // its stderr
	started time.Time
	waited  chan struct{}
	waitErr error
	url     string // an HTTP server's endpoint; stop then sends SIGTERM (see http.go)
}

// procs tracks every process started, so that an error or Ctrl-C kills
// them all.
var procs struct {
	sync.Mutex
	live map[*proc]struct{}
	seq  int
}

// start runs the process under test for mode m with the given fixtures
// (exactly one unless m is a mcp-mux).
func (b *bench) start(m mode, fixtures ...fixtureSpec) (*proc, error) {
	seq := nextSeq()
	var argv []string
	switch m {
	case direct:
		argv = append([]string{b.fixture}, fixtures[0].argv()...)
	case relay:
		argv = append([]string{b.relay, b.fixture}, fixtures[0].argv()...)
	case muxed, before:
		bin := b.mux
		if m == before {
			bin = b.before
		}
		cfg := filepath.Join(b.dir, fmt.Sprintf("mux-%d.toml", seq))
		if err := os.WriteFile(cfg, muxConfigWith(b.fixture, b.toolListAll(bin), fixtures), 0o600); err != nil {
			return nil, fmt.Errorf("writing the mcp-mux config: %w", err)
		}
		argv = []string{bin, "--config", cfg}
	}
	return b.launch(m, fmt.Sprintf("%s-%d", m, seq), argv, nil, "")
}

// toolListAll is the [mux] line that gives the agent every tool, for the
// rows that wait for a full tools/list: the default, "auto", gives an agent
// it does not know search_tools and call_tool in place of more than 64
// tools, and ten fixtures list 160. It is "" for a mcp-mux older than
// tool_list (-before), which lists every tool anyway and refuses a key it
// does not know: bin check says which.
func (b *bench) toolListAll(bin string) string {
	const line = "tool_list = \"all\"\n"
	toolListKnown.Lock()
	defer toolListKnown.Unlock()
	if known, ok := toolListKnown.m[bin]; ok {
		if known {
			return line
		}
		return ""
	}
	cfg := filepath.Join(b.dir, "tool-list-check.toml")
	known := os.WriteFile(cfg, muxConfigWith(b.fixture, line, []fixtureSpec{{name: "fx"}}), 0o600) == nil &&
		exec.Command(bin, "check", "--config", cfg).Run() == nil
	if toolListKnown.m == nil {
		toolListKnown.m = map[string]bool{}
	}
	toolListKnown.m[bin] = known
	if known {
		return line
	}
	return ""
}

// toolListKnown is, per mcp-mux binary, whether its config has tool_list.
var toolListKnown struct {
	sync.Mutex
	m map[string]bool
}

// nextSeq numbers the files (configs, logs) of each process started.
func nextSeq() int {
	procs.Lock()
	defer procs.Unlock()
	procs.seq++
	return procs.seq
}

// launch starts argv as the process under test for mode m, with env added
// to ours, its stderr to the log file named for tag; url is its endpoint
// if it serves HTTP ("" for stdio).
func (b *bench) launch(m mode, tag string, argv, env []string, url string) (*proc, error) {
	return b.launchIn(m, tag, argv, env, url, "")
}

// launchIn is launch with dir as the working directory ("": ours).
func (b *bench) launchIn(m mode, tag string, argv, env []string, url, dir string) (*proc, error) {
	logPath := filepath.Join(b.dir, tag+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating a log file: %w", err)
	}
	defer logf.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Dir = inR, outW, logf, dir
	// mcp-mux would otherwise remember every backend in the user's cache
	// (files of this run's temporary directory, never seen again), and the
	// second start of a backend in a run would not start it: the rows that
	// time a start would time the memory. The catalog rows set their own.
	// Each mcp-mux serves in-process, as an agent's did before the shared
	// mcp-mux and as the rows have always measured it (the shared row sets
	// its own: shared.go), and none could meet a shared process outside
	// this run (the run directory is the run's).
	cmd.Env = append(append(os.Environ(), "MCP_MUX_CATALOGS=off", shEnvOff, shRunDir+"="+b.runDir()), env...)
	if os.Getenv("GOTRACEBACK") == "" {
		cmd.Env = append(cmd.Env, "GOTRACEBACK=system") // for dumpGoroutines
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{mode: m, cmd: cmd, stdin: inW, stdout: outR, logPath: logPath, waited: make(chan struct{}), url: url}
	p.started = time.Now()
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	procs.Lock()
	if procs.live == nil {
		procs.live = make(map[*proc]struct{})
	}
	procs.live[p] = struct{}{}
	procs.Unlock()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.waited)
	}()
	return p, nil
}

// muxConfig is a config as a user would write it: defaults everywhere, the
// fixtures as backends.
func muxConfig(fixture string, fixtures []fixtureSpec) []byte {
	return muxConfigWith(fixture, "", fixtures)
}

// muxConfigWith is muxConfig with more lines for [mux].
func muxConfigWith(fixture, muxLines string, fixtures []fixtureSpec) []byte {
	var b bytes.Buffer
	b.WriteString("[mux]\nstartup_timeout = \"30s\"\n" + muxLines)
	for _, f := range fixtures {
		fmt.Fprintf(&b, "\n[[backend]]\nname = %s\ncommand = %s\nargs = [", tomlString(f.name), tomlString(fixture))
		for i, a := range f.argv() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tomlString(a))
		}
		// Its goroutine dump, if a request goes unanswered (see
		// dumpGoroutines), then shows the runtime's goroutines too.
		b.WriteString("]\nenv = { GOTRACEBACK = 'system' }\n" + f.toml)
	}
	return b.Bytes()
}

// tomlString quotes s as a TOML literal string when it can, which needs no
// escaping.
func tomlString(s string) string {
	if !strings.ContainsAny(s, "'\n\r") {
		return "'" + s + "'"
	}
	return strconv.Quote(s) // close enough for what the benchmark writes
}

// stop ends the process as an agent would (stdin EOF; an HTTP server, which
// does not read its stdin, as a service manager would: SIGTERM), then kills
// its process group if it is still there after grace.
func (p *proc) stop(grace time.Duration) {
	p.stdin.Close()
	if p.url != "" {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.waited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.waited
	}
	p.stdout.Close()
	procs.Lock()
	delete(procs.live, p)
	procs.Unlock()
}

// killAll stops every process still running, for errors and Ctrl-C.
func killAll() {
	procs.Lock()
	live := make([]*proc, 0, len(procs.live))
	for p := range procs.live {
		live = append(live, p)
	}
	procs.Unlock()
	// stdin EOF first, as an agent ends a server: a relay then reaps its
	// child and mcp-mux stops its backends; what is still there after the
	// grace is killed.
	var wg sync.WaitGroup
	for _, p := range live {
		wg.Go(func() { p.stop(2 * time.Second) })
	}
	wg.Wait()
}

// logTail is the last n lines of the process's stderr, for error reports.
func (p *proc) logTail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// procStat is what /proc says about one process.
type procStat struct {
	pid  int
	ppid int
	comm string
	cpu  time.Duration // user+sys of the process itself (not of its children)
}

// clockTick is USER_HZ, which is 100 on every Linux the benchmark runs on.
const clockTick = 100

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// comm is in parentheses and may hold anything: fields follow the last ')'.
	s := string(data)
	open, closeIdx := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closeIdx < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[closeIdx+1:])
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return procStat{pid: pid, ppid: ppid, comm: s[open+1 : closeIdx], cpu: time.Duration(ut+st) * time.Second / clockTick}, nil
}

// descendants are every live process below pid.
func descendants(pid int) []procStat {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]procStat{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(n); err == nil {
			children[st.ppid] = append(children[st.ppid], st)
		}
	}
	var out []procStat
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// peakRSS is VmHWM of pid, in bytes.
func peakRSS(pid int) (int64, error) { return statusBytes(pid, "VmHWM") }

// rss is VmRSS of pid, in bytes.
func rss(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// statusBytes is the field (in kB) of /proc/pid/status, in bytes.
func statusBytes(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// leftovers are processes still running one of the binaries in dir (the
// fixture and relay the benchmark built), which should all have exited.
func leftovers(dir string) []procStat {
	entries, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", n))
		if err != nil || !strings.HasPrefix(exe, dir+string(os.PathSeparator)) {
			continue
		}
		if st, err := readStat(n); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// selfCPU is the user+sys time of this program so far (the client side).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ourCPU is the user+sys time of this program and of every process it
// started and reaped (their descendants included, as each was reaped).
func ourCPU() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}

// machineCPU is the CPU time every process on the machine has used since
// boot (all cores), from /proc/stat.
func machineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i, v := range f {
		if i == 0 || i == 4 || i == 5 || i > 8 {
			continue // the label, idle, iowait, guest (already in user)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTick
}

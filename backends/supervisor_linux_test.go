package backends

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/mcp-mux/mcp-mux/backends/internal/supervisor"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// shBackend starts the fixture through /bin/sh -c script, with "$1" a file
// the script may write a pid to and "$2" the fixture.
func shBackend(t *testing.T, script string) (*Backend, string) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pid")
	spec := Spec{Name: "fx", Command: "/bin/sh", Args: []string{"-c", script, "sh", pidfile, testkit.FixtureBin(t)}}
	b, err := Start(context.Background(), spec, Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	return b, pidfile
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// TestCrashTakesAlongWhatLeftTheGroup: a crashed backend's process group is
// killed; a child that called setsid (or was orphaned) is not in it, and
// must go too; under the standby (standby_linux_test.go) as under a
// supervisor started for the backend.
func TestCrashTakesAlongWhatLeftTheGroup(t *testing.T) {
	for _, tt := range []struct {
		name, script string
		standby      bool
	}{
		{"setsid", `setsid sleep 1000 & echo $! > "$1"; exec "$2" -name fx`, false},
		{"orphan", `(setsid sleep 1000 & echo $! > "$1"); exec "$2" -name fx`, false},
		{"setsid under the standby", `setsid sleep 1000 & echo $! > "$1"; exec "$2" -name fx`, true},
		{"orphan under the standby", `(setsid sleep 1000 & echo $! > "$1"); exec "$2" -name fx`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.standby {
				withStandby(t)
			}
			b, pidfile := shBackend(t, tt.script)
			escapee := readPid(t, pidfile)
			if !alive(escapee) {
				t.Fatal("the escapee is not running")
			}
			go call(t, b, "crash", map[string]any{"code": 3})
			select {
			case <-b.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("Done not closed after a crash")
			}
			if err := b.Err(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
				t.Errorf("Err() = %v, want exit status 3", err)
			}
			if alive(escapee) {
				t.Errorf("process %d (%s) outlived its crashed backend", escapee, tt.name)
			}
		})
	}
}

// TestKillEndsWhatLeftTheGroup: Kill, for a hung backend, ends its whole
// tree at once.
func TestKillEndsWhatLeftTheGroup(t *testing.T) {
	b, pidfile := shBackend(t, `setsid sleep 1000 & echo $! > "$1"; exec "$2" -name fx -ignore-eof`)
	escapee := readPid(t, pidfile)
	b.Kill(context.DeadlineExceeded)
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after Kill")
	}
	if alive(escapee) {
		t.Errorf("process %d outlived Kill", escapee)
	}
}

// TestExitReasonSurvivesTheSupervisor: the supervisor exits as the backend
// did, so crash reports say what the backend did, core-dumping signals
// included (Go's runtime would turn a re-raised SIGQUIT into a goroutine dump
// and ignore a SIGSEGV sent by kill).
func TestExitReasonSurvivesTheSupervisor(t *testing.T) {
	for _, tt := range []struct{ script, want string }{
		{`exit 5`, "exit status 5"},
		{`kill -TERM $$`, "killed by signal terminated"},
		{`kill -QUIT $$`, "killed by signal quit"},
		{`kill -SEGV $$`, "killed by signal segmentation fault"},
		{`kill -ABRT $$`, "killed by signal aborted"},
		{`kill -KILL $$`, "killed by signal killed"},
	} {
		t.Run(tt.script, func(t *testing.T) {
			// The sleep holds stdin and stdout open, so that the exit, not
			// an EOF, is what Start sees first; the supervisor ends it. In
			// an empty directory: a core dump, if any, lands there.
			spec := Spec{Name: "sh", Command: "/bin/sh", Args: []string{"-c", "sleep 5 <&0 & " + tt.script}, Cwd: t.TempDir()}
			_, err := Start(context.Background(), spec, Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second})
			if err == nil || !strings.Contains(err.Error(), "exited during initialize: "+tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestArgsAndEnvReachTheBackendByteForByte: on Linux an argument or an env
// value may be any bytes but NUL; passing them through the supervisor must
// not "fix" invalid UTF-8.
func TestArgsAndEnvReachTheBackendByteForByte(t *testing.T) {
	odd := "caf\xe9-\xff\xfe"
	spec := Spec{Name: "fx", Command: testkit.FixtureBin(t), Args: []string{"-name", "fx", odd}, // the fixture ignores arguments after its flags
		Env: map[string]string{"ODD": odd}}
	b, err := Start(context.Background(), spec, Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop(time.Second)
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(b.PID()) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if want := "-name\x00fx\x00" + odd + "\x00"; !strings.HasSuffix(string(cmdline), want) {
		t.Errorf("cmdline %q does not hold %q", cmdline, want)
	}
	if got := environOf(t, b)["ODD"]; got != odd {
		t.Errorf("ODD = %q, want %q", got, odd)
	}
}

// TestAnEmptyEnvironmentReachesTheBackendEmpty: a backend given no
// variable at all gets none, not the supervisor's own.
func TestAnEmptyEnvironmentReachesTheBackendEmpty(t *testing.T) {
	saved := os.Environ()
	os.Clearenv()
	t.Cleanup(func() {
		for _, kv := range saved {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
	})
	b, err := Start(context.Background(), Spec{Name: "fx", Command: testkit.FixtureBin(t), Args: []string{"-name", "fx"}},
		Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop(time.Second)
	if env := environOf(t, b); len(env) != 0 {
		t.Errorf("the backend's environment is %v, want it empty", env)
	}
}

// TestWithoutProcTheBackendStillStarts: where /proc/self/exe cannot be run
// (a bare chroot), a backend starts as before there was a supervisor, and
// the log says what that costs.
func TestWithoutProcTheBackendStillStarts(t *testing.T) {
	saved := selfExe
	selfExe = "/nonexistent/proc/self/exe"
	defer func() { selfExe = saved }()
	freshSupervisor(t)
	b, logs, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, b, "echo", map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "without a supervisor") {
		t.Errorf("no warning in the log:\n%s", logs)
	}
	if ppid := parentOf(t, b.PID()); ppid != os.Getpid() {
		t.Errorf("the backend's parent is %d, want us (%d)", ppid, os.Getpid())
	}
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// TestBackendRunsUnderItsSupervisor: the backend (whose pid PID reports)
// is a child of the supervisor, a child of mcp-mux.
func TestBackendRunsUnderItsSupervisor(t *testing.T) {
	b, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sup := supervisorOf(t, b)
	if sup == b.PID() || parentOf(t, b.PID()) != sup || parentOf(t, sup) != os.Getpid() {
		t.Errorf("backend %d (parent %d), supervisor %d (parent %d), us %d", b.PID(), parentOf(t, b.PID()), sup, parentOf(t, sup), os.Getpid())
	}
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(sup) + "/comm"); strings.TrimSpace(string(comm)) != "mcp-mux-superv" {
		t.Errorf("supervisor's name %q", comm)
	}
}

// TestSignalsSentToTheSupervisorAreIgnored: Go's runtime would end the
// supervisor on SIGTERM, SIGINT or SIGHUP and leave what the backend
// started unsupervised; it ignores them, and the backend goes on serving.
func TestSignalsSentToTheSupervisorAreIgnored(t *testing.T) {
	b, pidfile := shBackend(t, `setsid sleep 1000 & echo $! > "$1"; exec "$2" -name fx`)
	escapee := readPid(t, pidfile)
	sup := supervisorOf(t, b)
	// Ignored at the kernel (SIG_IGN), a signal is discarded as it is
	// sent: once Kill returned, nothing can follow from it. Caught or left
	// to its default, it would act a moment later.
	if !testkit.SignalsIgnored(sup, int(syscall.SIGTERM), int(syscall.SIGINT), int(syscall.SIGHUP)) {
		t.Fatalf("the supervisor does not ignore SIGTERM, SIGINT and SIGHUP at the kernel: SigIgn %s", testkit.ProcStatus(sup, "SigIgn"))
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if err := syscall.Kill(sup, sig); err != nil {
			t.Fatal(err)
		}
	}
	if !alive(sup) || !alive(b.PID()) {
		t.Fatalf("supervisor alive %v, backend alive %v: both should be", alive(sup), alive(b.PID()))
	}
	if _, err := call(t, b, "echo", map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	// Still the supervisor: stopping ends what left the group too.
	b.Stop(time.Second)
	testkit.Poll(5*time.Second, func() bool { return !alive(escapee) })
	if alive(escapee) {
		t.Errorf("pid %d (setsid) outlived its backend's stop", escapee)
	}
}

// TestSupervisorWithANonBlockingLifelineWaitsForTheCommand: the lifeline
// is read in blocking reads, where EAGAIN would pass for mcp-mux gone. A
// supervisor handed a non-blocking one still waits for its command, starts
// the backend and keeps it.
func TestSupervisorWithANonBlockingLifelineWaitsForTheCommand(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(fds[0]), "lifeline")
	defer ours.Close()
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	if err := syscall.SetNonblock(fds[1], true); err != nil {
		t.Fatal(err)
	}
	pid, err := syscall.ForkExec(selfExe, []string{supervisor.Arg0}, &syscall.ProcAttr{
		Env:   []string{"GOMAXPROCS=1"},
		Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), uintptr(fds[1])},
	})
	syscall.Close(fds[1])
	if err != nil {
		t.Fatal(err)
	}
	// The supervisor reads before the command is there.
	testkit.Eventually(t, 5*time.Second, "the supervisor to wait in a read of its lifeline", func() bool {
		return testkit.InSyscall(pid, syscall.SYS_RECVMSG, 3)
	})
	msg := supervisor.EncodeStart(1, supervisor.Launch{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: []string{}})
	n := int(null.Fd())
	if err := syscall.Sendmsg(fds[0], msg, syscall.UnixRights(n, n, n), nil, 0); err != nil {
		t.Fatal(err)
	}
	report := make([]byte, 64)
	got, _ := ours.Read(report)
	r, _, _ := supervisor.ParseReply(report[:got])
	if !r.Started() {
		t.Fatalf("report %q: want the backend's pid", report[:got])
	}
	backend := r.Pid
	t.Cleanup(func() { syscall.Kill(backend, syscall.SIGKILL) })
	// Waiting on the lifeline again, it did not take EAGAIN for the end.
	testkit.Eventually(t, 5*time.Second, "the supervisor to wait in a read of its lifeline", func() bool {
		return testkit.InSyscall(pid, syscall.SYS_RECVMSG, 3)
	})
	if !alive(backend) || !alive(pid) {
		t.Fatalf("backend alive %v, supervisor alive %v: both should be, the lifeline is open", alive(backend), alive(pid))
	}
	ours.Close() // mcp-mux gone: everything goes
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if alive(backend) {
		t.Errorf("the backend (pid %d) outlived its supervisor", backend)
	}
}

// TestLeftBackendIsStoppedOnceMuxIsGone: a backend left to its supervisor
// (Leave, for mcp-mux's exit) gets its grace once mcp-mux is gone (here:
// its stdin and lifeline closed, as the exit closes them), then its tree
// is ended, SIGTERM and SIGKILL included, the grandchild too. Without
// Leave the lifeline's end kills it all at once
// (TestKillEndsWhatLeftTheGroup).
func TestLeftBackendIsStoppedOnceMuxIsGone(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	spec := Spec{Name: "fx", Command: testkit.FixtureBin(t), Args: []string{"-name", "fx", "-ignore-eof", "-grandchild-pidfile", pidfile}}
	b, err := Start(context.Background(), spec, Options{Logger: log.New(&testkit.SyncBuffer{}), StartupTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	var grandchild int
	testkit.Eventually(t, 5*time.Second, "the grandchild's pid", func() bool {
		data, _ := os.ReadFile(pidfile)
		f := strings.Fields(string(data))
		if len(f) == 2 {
			grandchild, _ = strconv.Atoi(f[1])
		}
		return grandchild != 0
	})
	t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) })

	const grace = 2 * time.Second
	if !b.Leave(grace) {
		t.Fatal("Leave = false under a supervisor")
	}
	b.stdin.Close()
	b.proc.cut()
	if !alive(b.PID()) {
		t.Fatal("the backend did not get its grace once mcp-mux was gone")
	}
	select {
	case <-b.Done():
	case <-time.After(grace + 5*time.Second):
		t.Fatalf("still running %v after mcp-mux was gone, with a grace of %v", grace+5*time.Second, grace)
	}
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "killed by signal killed") {
		t.Errorf("Err() = %v, want killed by signal killed (it ignores stdin EOF and SIGTERM)", err)
	}
	if alive(grandchild) {
		t.Errorf("the grandchild %d outlived its backend", grandchild)
	}
}

// supervisorOf is the process a backend runs under: its parent.
func supervisorOf(t *testing.T, b *Backend) int {
	t.Helper()
	return parentOf(t, b.PID())
}

// TestBackendsShareOneSupervisor: however many backends mcp-mux runs, one
// supervisor is the parent of them all (ten sessions' shared mcp-mux with
// five npm servers ran five, one process each).
func TestBackendsShareOneSupervisor(t *testing.T) {
	var sups []int
	for range 5 {
		b, _, err := start(t, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if sup := supervisorOf(t, b); !slices.Contains(sups, sup) {
			sups = append(sups, sup)
		}
	}
	if len(sups) != 1 {
		t.Fatalf("five backends run under %d supervisors %v, want one", len(sups), sups)
	}
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(sups[0]) + "/comm"); strings.TrimSpace(string(comm)) != "mcp-mux-superv" || parentOf(t, sups[0]) != os.Getpid() {
		t.Errorf("the backends' parent %d is %q, a child of %d: want our supervisor", sups[0], comm, parentOf(t, sups[0]))
	}
}

// TestABackendsEndTakesItsOwnDescendantsOnly: under one supervisor, a
// backend that crashes, or is stopped, takes along what it started, setsid
// and orphaned ones included, and nothing of the backend beside it.
func TestABackendsEndTakesItsOwnDescendantsOnly(t *testing.T) {
	for _, end := range []string{"crash", "stop"} {
		t.Run(end, func(t *testing.T) {
			a, aPids := shBackend(t, `(setsid sleep 1000 & echo $! > "$1"); exec "$2" -name fx`)
			b, bPids := shBackend(t, `(setsid sleep 1000 & echo $! > "$1"); exec "$2" -name fx`)
			aEscapee, bEscapee := readPid(t, aPids), readPid(t, bPids)
			if end == "crash" {
				go call(t, a, "crash", map[string]any{"code": 3})
			} else {
				go a.Stop(time.Second)
			}
			select {
			case <-a.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("Done not closed after the %s", end)
			}
			if alive(aEscapee) {
				t.Errorf("process %d outlived the %s of the backend that started it", aEscapee, end)
			}
			if !alive(bEscapee) || !alive(b.PID()) {
				t.Fatalf("the other backend (alive %v) or what it started (alive %v) went with it", alive(b.PID()), alive(bEscapee))
			}
			if _, err := call(t, b, "echo", map[string]any{"a": 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAKilledSupervisorEndsItsBackendsAndTheNextStartsAnew: kill -9 of the
// supervisor ends the backends under it (their parent-death signal), each
// says so, and a backend started after it runs under a new supervisor.
func TestAKilledSupervisorEndsItsBackendsAndTheNextStartsAnew(t *testing.T) {
	var bs []*Backend
	for range 2 {
		b, _, err := start(t, Options{})
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	sup := supervisorOf(t, bs[0])
	for _, b := range bs {
		syscall.Kill(supervisorOf(t, b), syscall.SIGKILL)
	}
	for i, b := range bs {
		select {
		case <-b.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("backend %d still up 5 s after its supervisor was killed", i)
		}
		if alive(b.PID()) {
			t.Errorf("backend %d (pid %d) outlived its supervisor", i, b.PID())
		}
		if err := b.Err(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("backend %d: Err() = %v, want it killed", i, err)
		}
	}
	next, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := supervisorOf(t, next); got == sup || !alive(got) {
		t.Errorf("the next backend runs under %d, want a new supervisor (the killed one was %d)", got, sup)
	}
	if _, err := call(t, next, "echo", map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
}

package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/charmbracelet/log"
	"golang.org/x/sys/windows"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// alive reports whether pid runs (not merely whether a handle to the
// exited process is still open somewhere).
func alive(pid int) bool {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return false // no such process
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	return err == nil && ev == uint32(windows.WAIT_TIMEOUT)
}

// waitGone polls until none of pids runs, or d passed.
func waitGone(d time.Duration, pids ...int) bool {
	return testkit.Poll(d, func() bool { return !slices.ContainsFunc(pids, alive) })
}

// jobPids lists the processes in the job of the backend with pid.
func jobPids(t *testing.T, pid int) []int {
	t.Helper()
	j := lookupJob(pid)
	if j == nil || j.h == 0 {
		t.Fatalf("backend %d has no job", pid)
	}
	var list struct { // JOBOBJECT_BASIC_PROCESS_ID_LIST
		Assigned, InList uint32
		Pids             [64]uintptr
	}
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectBasicProcessIdList,
		uintptr(unsafe.Pointer(&list)), uint32(unsafe.Sizeof(list)), nil); err != nil {
		t.Fatalf("listing the job's processes: %v", err)
	}
	var pids []int
	for _, p := range list.Pids[:list.InList] {
		pids = append(pids, int(p))
	}
	return pids
}

// startWithGrandchild starts the fixture, which ignores stdin EOF and
// starts a grandchild, and returns the backend and the grandchild's pid,
// after checking that both are in the backend's job.
func startWithGrandchild(t *testing.T) (*Backend, int) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pids")
	b, _, err := start(t, Options{}, "-ignore-eof", "-grandchild-pidfile", pidfile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild := readGrandchild(t, pidfile)
	if !alive(b.PID()) || !alive(grandchild) {
		t.Fatalf("not running: backend %v, grandchild %v", alive(b.PID()), alive(grandchild))
	}
	in := jobPids(t, b.PID())
	if !slices.Contains(in, b.PID()) || !slices.Contains(in, grandchild) {
		t.Fatalf("job holds %v, want the backend %d and the grandchild %d", in, b.PID(), grandchild)
	}
	return b, grandchild
}

func readGrandchild(t *testing.T, pidfile string) int {
	t.Helper()
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		t.Fatalf("pidfile %q", data)
	}
	pid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid)); err == nil {
			windows.TerminateProcess(h, 1)
			windows.CloseHandle(h)
		}
	})
	return pid
}

func TestStopEndsBackendAndGrandchildThroughTheJob(t *testing.T) {
	b, grandchild := startWithGrandchild(t)
	begin := time.Now()
	b.Stop(200 * time.Millisecond)
	t.Logf("stopped in %v", time.Since(begin))
	if alive(b.PID()) || alive(grandchild) {
		t.Errorf("still running after Stop: backend %v, grandchild %v", alive(b.PID()), alive(grandchild))
	}
	if lookupJob(b.PID()) != nil || groupAlive(b.PID()) {
		t.Error("the job is still held after Stop")
	}
}

func TestKillEndsTheWholeJobAtOnce(t *testing.T) {
	b, grandchild := startWithGrandchild(t)
	b.Kill(context.DeadlineExceeded)
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after Kill")
	}
	if !waitGone(time.Second, b.PID(), grandchild) {
		t.Errorf("still running after Kill: backend %v, grandchild %v", alive(b.PID()), alive(grandchild))
	}
	if err := b.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() = %v, want the Kill reason", err)
	}
}

// TestCrashTakesTheGrandchildAlong: what a crashed backend started goes
// with it, as the supervisor does on Linux.
func TestCrashTakesTheGrandchildAlong(t *testing.T) {
	b, grandchild := startWithGrandchild(t)
	go call(t, b, "crash", map[string]any{"code": 3})
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after a crash")
	}
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Err() = %v, want exit status 3", err)
	}
	if !waitGone(time.Second, grandchild) {
		t.Errorf("grandchild %d outlived its crashed backend", grandchild)
	}
}

// TestStopAsksWithCtrlBreakFirst: a backend that ignores stdin EOF gets a
// CTRL_BREAK before its job is ended; a console program's default handler
// exits on it with STATUS_CONTROL_C_EXIT (the job's end would give exit
// status 1).
func TestStopAsksWithCtrlBreakFirst(t *testing.T) {
	testkit.SkipUnderWine(t, "no console control events (GenerateConsoleCtrlEvent fails), so no CTRL_BREAK")
	if !hasConsole() {
		t.Skip("no console: CTRL_BREAK reaches only processes sharing ours")
	}
	b, _ := startWithGrandchild(t)
	b.Stop(100 * time.Millisecond)
	st := b.proc.cmd.ProcessState
	if st == nil || uint32(st.ExitCode()) != uint32(windows.STATUS_CONTROL_C_EXIT) {
		t.Errorf("exit: %v, want STATUS_CONTROL_C_EXIT (0x%X)", st, uint32(windows.STATUS_CONTROL_C_EXIT))
	}
}

// holderEnv makes this test binary, run again, a stand-in for mcp-mux: it
// starts a backend with a grandchild, writes "<backend> <grandchild>" to
// the file the variable names, and waits to be killed.
const holderEnv = "MCP_MUX_TEST_JOB_HOLDER"

func init() {
	path := os.Getenv(holderEnv)
	if path == "" {
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(2)
	}
	gcFile := path + ".grandchild"
	spec := Spec{Name: "fx", Command: os.Getenv(holderEnv + "_FIXTURE"), Args: []string{"-name", "fx", "-ignore-eof", "-grandchild-pidfile", gcFile}}
	b, err := Start(context.Background(), spec, Options{Logger: log.New(os.Stderr), StartupTimeout: 10 * time.Second})
	if err != nil {
		fail(err)
	}
	data, err := os.ReadFile(gcFile)
	if err != nil {
		fail(err)
	}
	gc := strings.Fields(string(data))[1]
	if err := os.WriteFile(path+".tmp", []byte(fmt.Sprintf("%d %s", b.PID(), gc)), 0o600); err != nil {
		fail(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		fail(err)
	}
	// Not a wait of a test: the helper process only has to stay alive
	// until the test kills it (a bare select{} could trip the runtime's
	// deadlock check). The test waits on the pid file above, then on the
	// processes.
	for {
		time.Sleep(time.Hour)
	}
}

// TestMuxKilledTakesItsBackendsAlong: mcp-mux ended by TerminateProcess
// (no chance to clean up) takes every backend and what they started with
// it: its job handles close with it.
func TestMuxKilledTakesItsBackendsAlong(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), holderEnv+"="+pidfile, holderEnv+"_FIXTURE="+testkit.FixtureBin(t))
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	var data []byte
	if !testkit.Poll(20*time.Second, func() bool {
		var err error
		data, err = os.ReadFile(pidfile)
		return err == nil
	}) {
		t.Fatal("the holder did not start its backend")
	}
	var backend, grandchild int
	if _, err := fmt.Sscan(string(data), &backend, &grandchild); err != nil {
		t.Fatalf("pidfile %q: %v", data, err)
	}
	for _, pid := range []int{backend, grandchild} {
		t.Cleanup(func() {
			if h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid)); err == nil {
				windows.TerminateProcess(h, 1)
				windows.CloseHandle(h)
			}
		})
	}
	if !alive(backend) || !alive(grandchild) {
		t.Fatalf("not running: backend %v, grandchild %v", alive(backend), alive(grandchild))
	}
	holder.Process.Kill() // TerminateProcess
	holder.Wait()
	if !waitGone(2*time.Second, backend, grandchild) {
		t.Errorf("outlived the killed mcp-mux: backend %v, grandchild %v", alive(backend), alive(grandchild))
	}
}

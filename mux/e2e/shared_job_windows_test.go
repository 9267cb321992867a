package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/windows"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// An agent that runs its MCP servers in a job object that kills on close
// (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE) ends every process in it when it
// exits. The shared process its session started breaks away from that job
// where the job allows it: the other agents' sessions go on with the same
// process and backend.
func TestTheSharedProcessOutlivesTheJobOfTheAgentThatStartedIt(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	job := newAgentJob(t, windows.JOB_OBJECT_LIMIT_BREAKAWAY_OK)
	first := startSharedInJob(t, job, cfg, dir)
	first.call(t, "fx__echo", map[string]any{"n": 1})
	other := startShared(t, cfg, dir, nil, nil)
	other.call(t, "fx__echo", map[string]any{"n": 2})
	doc := onlyShared(t)
	if len(doc.Sessions) != 2 || len(doc.Backends) != 1 {
		t.Fatalf("status shows %d sessions and backends %+v, want 2 sessions of one backend", len(doc.Sessions), doc.Backends)
	}
	closeJob(t, job) // the agent exits
	select {
	case <-first.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the session in the agent's job still runs 10 s after the job was closed")
	}
	if !alive(doc.PID) {
		t.Fatalf("the shared process %d ended with the job of the agent whose session started it\nstderr:\n%s", doc.PID, first.stderr)
	}
	if got := other.call(t, "fx__echo", map[string]any{"n": 3}); !strings.Contains(got, "3") {
		t.Errorf("the other session's echo: %q", got)
	}
	if next := onlyShared(t); next.PID != doc.PID || len(next.Backends) != 1 || next.Backends[0].PID != doc.Backends[0].PID {
		t.Errorf("after the job's end: shared process %d with backends %+v, want the same process %d and backend %d", next.PID, next.Backends, doc.PID, doc.Backends[0].PID)
	}
}

// A job that forbids breaking away fails a start that asks to: the
// session starts the shared process in the job instead, and serves through
// it all the same, with no warning. The job's end takes the shared process
// with it; another session then meets a new one, as after a kill.
func TestASessionInAJobThatForbidsBreakawayStillShares(t *testing.T) {
	sharedDirs(t)
	cfg := testkit.WriteConfig(t, "", []string{"fx", "-name", "fx"})
	dir := t.TempDir()
	job := newAgentJob(t, 0)
	first := startSharedInJob(t, job, cfg, dir)
	first.call(t, "fx__echo", map[string]any{"n": 1})
	doc := onlyShared(t)
	if len(doc.Sessions) != 1 || doc.Sessions[0].PID != first.cmd.Process.Pid {
		t.Fatalf("status shows sessions %+v, want the session in the job (pid %d)", doc.Sessions, first.cmd.Process.Pid)
	}
	if s := first.stderr.String(); strings.Contains(s, "serving in this process") {
		t.Errorf("the session in the job warned:\n%s", s)
	}
	other := startShared(t, cfg, dir, nil, nil)
	other.call(t, "fx__echo", map[string]any{"n": 2})
	closeJob(t, job)
	testkit.Eventually(t, 10*time.Second, "the shared process in the job gone with it", func() bool { return !alive(doc.PID) })
	// Its session meets a new one as soon as it sees the old one gone (a
	// call sent before that is answered with an error, as after a kill).
	testkit.Eventually(t, 10*time.Second, "the other session in a new shared process", func() bool {
		d := sharedProcs(t)
		return len(d) == 1 && d[0].PID != doc.PID && len(d[0].Sessions) == 1 && d[0].Sessions[0].PID == other.cmd.Process.Pid
	})
	if got := other.call(t, "fx__echo", map[string]any{"n": 3}); !strings.Contains(got, "3") {
		t.Errorf("the other session's echo after the job's end: %q", got)
	}
}

// newAgentJob is a job object as an agent makes one for its MCP servers:
// it kills its processes when its handle closes, with more limits.
func newAgentJob(t *testing.T, more uint32) windows.Handle {
	t.Helper()
	h, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		t.Fatalf("CreateJobObject: %v", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | more},
	}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(h)
		t.Fatalf("SetInformationJobObject: %v", err)
	}
	t.Cleanup(func() { windows.CloseHandle(h) }) // a second close fails harmlessly
	return h
}

func closeJob(t *testing.T, h windows.Handle) {
	t.Helper()
	if err := windows.CloseHandle(h); err != nil {
		t.Fatalf("closing the job: %v", err)
	}
}

// startSharedInJob is startShared with the session process in job from
// its first instruction: created suspended, assigned, then resumed.
func startSharedInJob(t *testing.T, job windows.Handle, cfg, dir string) *sharedSession {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	s := &sharedSession{cmd: cmd, stdin: stdin, stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-s.exited
		}
	})
	var assignErr error
	if err := cmd.Process.WithHandle(func(ph uintptr) { assignErr = windows.AssignProcessToJobObject(job, windows.Handle(ph)) }); err != nil || assignErr != nil {
		cmd.Process.Kill()
		t.Fatalf("putting the session in the job: %v", errors.Join(err, assignErr))
	}
	if err := resumeThreads(uint32(cmd.Process.Pid)); err != nil {
		cmd.Process.Kill()
		t.Fatalf("resuming the session: %v", err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(testkit.CtxT(t), &mcp.IOTransport{Reader: stdout, Writer: nopClose{stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	return s
}

// resumeThreads resumes the threads of a process created suspended.
func resumeThreads(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(snap)
	n := 0
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return err
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("no thread found")
	}
	return nil
}

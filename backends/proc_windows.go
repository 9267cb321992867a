package backends

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows every backend runs in a job object of its own, created with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: what the backend starts is in the job
// too, and Windows kills every process in it when its last handle closes.
// mcp-mux holds the only handle, so the backend's whole tree ends when
// mcp-mux lets it go (cut) or when mcp-mux dies, however it dies: Windows
// closes a dead process's handles.
//
// A process cannot be created in a job (os/exec exposes no
// PROC_THREAD_ATTRIBUTE_JOB_LIST), only put in one once it exists. So the
// backend is created suspended, assigned to its job, and only then
// resumed: no code of it runs, and nothing it starts can escape, before it
// is in the job. Should mcp-mux die in between, or a job not be made, the
// job mcp-mux puts itself in (selfJob) still takes the backend along.

// jobs holds the job of each running backend, by its pid: the seams
// backend.go calls (signalGroup, groupAlive) name a backend by pid.
var (
	jobsMu sync.Mutex
	jobs   = map[int]*job{}
)

// job is one backend's job object and its leader, the backend's process.
type job struct {
	h      windows.Handle // 0 when the backend could not be put in a job
	leader *os.Process
}

// terminateCode is the exit status of what the job's end kills, as
// os.Process.Kill gives on Windows.
const terminateCode = 1

// startProc starts cmd's program in a kill-on-close job of its own, and
// in a process group of its own, the target of CTRL_BREAK (Stop's polite
// ask; the group also keeps the Ctrl-C typed in mcp-mux's console from
// reaching it, as on Unix).
func startProc(cmd *exec.Cmd) (*proc, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	if IsBatchFile(cmd.Path) {
		if err := throughCmd(cmd); err != nil {
			return nil, err
		}
	}
	joinSelfJob()
	flags := uint32(windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_SUSPENDED)
	if !hasConsole() {
		// Without a console of mcp-mux's to share, Windows would open a
		// console window for every backend that is a console program.
		flags |= windows.CREATE_NO_WINDOW
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= flags
	h, jobErr := newKillOnCloseJob()
	if err := cmd.Start(); err != nil {
		if h != 0 {
			windows.CloseHandle(h)
		}
		return nil, err
	}
	pid := cmd.Process.Pid
	if jobErr == nil {
		var assignErr error
		jobErr = cmd.Process.WithHandle(func(ph uintptr) {
			assignErr = windows.AssignProcessToJobObject(h, windows.Handle(ph))
		})
		if jobErr == nil {
			jobErr = assignErr
		}
	}
	if jobErr != nil && h != 0 {
		windows.CloseHandle(h)
		h = 0
	}
	if err := resumeProcess(uint32(pid)); err != nil {
		// Suspended for ever otherwise: end it (its job, if it has one,
		// goes with the handle).
		cmd.Process.Kill()
		cmd.Wait()
		if h != 0 {
			windows.CloseHandle(h)
		}
		return nil, fmt.Errorf("resuming it after its creation: %w", err)
	}
	j := &job{h: h, leader: cmd.Process}
	jobsMu.Lock()
	jobs[pid] = j
	jobsMu.Unlock()
	p := &proc{cmd: cmd, wait: cmd.Wait, pid: pid, unsupervised: h == 0}
	p.release = func() { releaseJob(pid, j) }
	return p, nil
}

// throughCmd makes cmd, whose program is a batch file (npx.cmd), start
// cmd.exe, from the system directory, with a command line that passes
// its arguments unchanged (batch.go), or says which one it cannot pass.
func throughCmd(cmd *exec.Cmd) error {
	line, err := BatchCommandLine(cmd.Path, cmd.Args[1:])
	if err != nil {
		return err
	}
	sys, err := windows.GetSystemDirectory()
	if err != nil {
		return fmt.Errorf("finding cmd.exe to run %s with: %w", cmd.Path, err)
	}
	cmd.Path = filepath.Join(sys, "cmd.exe")
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CmdLine = line
	return nil
}

// newKillOnCloseJob creates a job that kills its processes when its last
// handle closes. The handle is not inheritable: no child may keep it open.
func newKillOnCloseJob() (windows.Handle, error) {
	h, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("creating a job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE},
	}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(h)
		return 0, fmt.Errorf("making a job object kill on close: %w", err)
	}
	return h, nil
}

// selfJobErr is why mcp-mux is not in a job of its own (nil when it is);
// set once, by joinSelfJob.
var (
	selfJobOnce sync.Once
	selfJobErr  error
)

// joinSelfJob puts mcp-mux in a kill-on-close job whose one handle it
// keeps open until it exits: every process it starts from then on is born
// in that job, so whatever escaped a backend's own job (a backend that
// could not be put in one, one created just before mcp-mux died) dies with
// mcp-mux too. A job mcp-mux was started in (the agent's) stays in force:
// since Windows 8 jobs nest.
func joinSelfJob() {
	selfJobOnce.Do(func() {
		h, err := newKillOnCloseJob()
		if err != nil {
			selfJobErr = err
			return
		}
		if err := windows.AssignProcessToJobObject(h, windows.CurrentProcess()); err != nil {
			windows.CloseHandle(h)
			selfJobErr = fmt.Errorf("putting mcp-mux in a job object: %w", err)
		}
		// h stays open on purpose: its closing, at mcp-mux's exit, is the
		// kill.
	})
}

// hasConsole reports whether mcp-mux is attached to a console, which its
// backends then share (an agent starting it with CREATE_NO_WINDOW gives it
// one without a window).
var hasConsole = sync.OnceValue(func() bool {
	name, _ := windows.UTF16PtrFromString("CONOUT$")
	h, err := windows.CreateFile(name, windows.GENERIC_READ|windows.GENERIC_WRITE,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		return false
	}
	windows.CloseHandle(h)
	return true
})

// resumeProcess resumes the threads of a process created suspended (its
// main thread; os/exec closes the handle CreateProcess returned for it).
func resumeProcess(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("listing threads: %w", err)
	}
	defer windows.CloseHandle(snap)
	resumed := 0
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return fmt.Errorf("opening thread %d: %w", te.ThreadID, err)
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return fmt.Errorf("resuming thread %d: %w", te.ThreadID, err)
		}
		resumed++
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return fmt.Errorf("listing threads: %w", err)
	}
	if resumed == 0 {
		return fmt.Errorf("no thread of process %d found", pid)
	}
	return nil
}

// releaseJob is proc.cut on Windows: it ends what is left in the job and
// closes the handle. It waits (a moment at most) for the job to be empty,
// so that a backend counts as gone only once its whole tree is: after
// this, groupAlive no longer knows the pid.
func releaseJob(pid int, j *job) {
	jobsMu.Lock()
	if jobs[pid] == j {
		delete(jobs, pid)
	}
	jobsMu.Unlock()
	if j.h == 0 {
		j.leader.Kill()
		return
	}
	windows.TerminateJobObject(j.h, terminateCode)
	deadline := time.Now().Add(time.Second)
	for j.active() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	windows.CloseHandle(j.h)
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, which
// x/sys/windows does not define.
type jobAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

// active reports whether any process of the job still runs (for a backend
// without a job: whether its own process does).
func (j *job) active() bool {
	if j.h == 0 {
		return j.leaderRunning()
	}
	var info jobAccounting
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		return false
	}
	return info.ActiveProcesses > 0
}

// leaderRunning reports whether the backend's own process has not exited.
func (j *job) leaderRunning() bool {
	running := false
	j.leader.WithHandle(func(h uintptr) {
		ev, err := windows.WaitForSingleObject(windows.Handle(h), 0)
		running = err == nil && ev == uint32(windows.WAIT_TIMEOUT)
	})
	return running
}

func lookupJob(pid int) *job {
	jobsMu.Lock()
	defer jobsMu.Unlock()
	return jobs[pid]
}

// StartStandby and DiscardStandby do nothing: only on Linux does mcp-mux
// start a supervisor ahead of its first backend.
func StartStandby()   {}
func DiscardStandby() {}

// Supervised is whether each backend process runs under a supervisor that
// outlives mcp-mux to stop it (Leave): not here. The job objects end the
// backends' trees when mcp-mux exits, but at once, with no grace: mcp-mux
// stops every backend itself before it exits.
const Supervised = false

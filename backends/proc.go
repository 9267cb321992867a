package backends

import (
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// proc is what runs for one backend.
type proc struct {
	// cmd is the backend where mcp-mux starts it itself; nil under a
	// supervisor (Linux).
	cmd *exec.Cmd
	// wait waits for the backend to exit, as cmd.Wait (under a supervisor:
	// until the supervisor reports it, once what it started is gone).
	wait func() error
	// pid is the backend's own process, the leader of its process group.
	pid int
	// sup (Linux only) is the supervisor the backend runs under, and id
	// the backend's there.
	sup *supervisorConn
	id  uint32
	// release (Windows only) ends what is left in the backend's job object
	// and closes it.
	release func()
	cutOnce sync.Once
	// unsupervised is set when nothing was found to end the backend's whole
	// tree with (Linux: no supervisor; Windows: no job object).
	unsupervised bool
}

// cut lets the backend's tree go: the supervisor (Linux) or the job
// object (Windows) kills what is left of it.
func (p *proc) cut() {
	p.cutOnce.Do(func() {
		if p.sup != nil {
			p.sup.cut(p.id)
		}
		if p.release != nil {
			p.release()
		}
	})
}

// leave tells the supervisor that mcp-mux exits and leaves the backend to
// it, with grace (see supervisor.EncodeLeave); false if there is no
// supervisor to tell, or it did not take the order.
func (p *proc) leave(grace time.Duration) bool {
	return p.sup != nil && p.sup.leave(p.id, grace)
}

// exitStatus is how a backend ended, as its supervisor saw it, for
// exitReason; an exit status 0 is no error.
type exitStatus struct {
	code   int
	signal string // the signal that killed it, or ""
}

func (e *exitStatus) Error() string {
	if e.signal != "" {
		return "signal: " + e.signal
	}
	return "exit status " + strconv.Itoa(e.code)
}

// StandbyEnv=1 in the environment of an mcp-mux process that will serve
// has it start the supervisor of its first backend (Linux) as soon as its
// Go runtime starts, before main runs (see StartStandby): the session gives
// it to the shared process it starts.
const StandbyEnv = "MCP_MUX_STANDBY"

package backends

import (
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/mcp-mux/mcp-mux/backends/internal/supervisor"
)

// proc is what runs for one backend.
type proc struct {
	// cmd is what mcp-mux starts and waits on: on Linux the backend's
	// supervisor, whose exit mirrors the backend's; elsewhere the backend.
	// nil for a standby supervisor (Linux), which mcp-mux started early.
	cmd *exec.Cmd
	// wait waits for what cmd is (or the standby) to exit, as cmd.Wait.
	wait func() error
	// pid is the backend's own process, the leader of its process group.
	pid int
	// lifeline (Linux only) is the one write end of a pipe the supervisor
	// reads: EOF, when mcp-mux closes it or dies however it dies, makes the
	// supervisor kill every process under it.
	lifeline *os.File
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
		if p.lifeline != nil {
			p.lifeline.Close()
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
	if p.lifeline == nil {
		return false
	}
	// Nothing else is written on the lifeline after the launch: the few
	// bytes fit at once, unless the supervisor is gone.
	p.lifeline.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := p.lifeline.Write(supervisor.EncodeLeave(grace))
	return err == nil
}

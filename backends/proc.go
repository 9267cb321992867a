package backends

import (
	"os"
	"os/exec"
	"sync"
)

// proc is what runs for one backend.
type proc struct {
	// cmd is what mcp-mux starts and waits on: on Linux the backend's
	// supervisor, whose exit mirrors the backend's; elsewhere the backend.
	cmd *exec.Cmd
	// pid is the backend's own process, the leader of its process group.
	pid int
	// lifeline (Linux only) is the one write end of a pipe the supervisor
	// reads: EOF, when mcp-mux closes it or dies however it dies, makes the
	// supervisor kill every process under it.
	lifeline *os.File
	cutOnce  sync.Once
	// unsupervised is set on Linux when there was no supervisor to start.
	unsupervised bool
}

// cut closes the lifeline: the supervisor kills the backend's whole tree
// (if anything is left of it) and exits.
func (p *proc) cut() {
	p.cutOnce.Do(func() {
		if p.lifeline != nil {
			p.lifeline.Close()
		}
	})
}

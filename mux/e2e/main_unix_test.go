//go:build unix

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// processExists reports whether pid exists (a zombie counts).
func processExists(pid int) bool { return syscall.Kill(pid, 0) == nil }

// killProcess ends pid at once.
func killProcess(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// clearUmask sets the umask to 0 until the returned func restores it.
func clearUmask(t *testing.T) (restore func()) {
	old := syscall.Umask(0)
	return func() { syscall.Umask(old) }
}

// killGroupOnCancel runs cmd in a process group of its own, which its
// context's end kills whole, even if cmd is stuck.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// nonblocking reports whether f's open file description has O_NONBLOCK,
// without changing it (as f.Fd would).
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	}); err != nil || errno != 0 {
		t.Fatalf("fcntl: %v %v", err, errno)
	}
	return flags&syscall.O_NONBLOCK != 0
}

// mcp-mux waits on its stdin and stdout pipes with the runtime's poller,
// which needs them non-blocking; a pipe is shared with whoever else holds
// it (a wrapper script that reads on after mcp-mux, say), so it is left
// blocking again when mcp-mux exits.
func TestStdioPipesAreBlockingAgainAfterExit(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer outW.Close()
	defer outR.Close()
	cmd := exec.Command(testkit.MuxBin(t), "--config", testkit.WriteConfig(t, "", []string{"notes", "-name", "notes"}))
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once it answers, it has made them non-blocking.
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize: %q %v", line, err)
	}
	if !nonblocking(t, inR) {
		t.Log("stdin is blocking while mcp-mux runs: it does not use the poller")
	}
	inW.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if nonblocking(t, inR) {
		t.Error("stdin's pipe was left non-blocking")
	}
	if nonblocking(t, outW) {
		t.Error("stdout's pipe was left non-blocking")
	}
}

// processChildren maps each live process to its children, from the
// parent links in /proc (none where there is no /proc).
func processChildren() map[int][]int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], child)
	}
	return children
}

// peakRSS is a process's peak resident set in bytes (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// signalProcess sends p sig.
func signalProcess(t *testing.T, p *os.Process, sig syscall.Signal) {
	t.Helper()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// canSignal lets t go on: it can send sig here.
func canSignal(*testing.T, syscall.Signal) {}

// stopProcess asks p to end, for a test's cleanup.
func stopProcess(p *os.Process) { p.Signal(syscall.SIGTERM) }

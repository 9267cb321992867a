//go:build unix

package backends

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// alive reports whether pid runs; on Linux a zombie (exited, not reaped)
// does not count.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		// No /proc outside Linux: there a zombie counts.
		return runtime.GOOS != "linux" && syscall.Kill(pid, 0) == nil
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i+2 < len(s) && s[i+2] != 'Z'
}

func TestKilledBackendReportsSignal(t *testing.T) {
	b, _, err := start(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(b.PID(), syscall.SIGKILL)
	<-b.Done()
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "killed by signal killed") {
		t.Errorf("Err() = %v", err)
	}
}

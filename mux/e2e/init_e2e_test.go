package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Every launch of mcp-mux runs every package's init, and most launches
// are sessions that only relay to the shared process: what an init of
// ours builds, each of them holds. So no package of mcp-mux's allocates
// much at init (mux/search's word sets were 118 KB, made now on first
// use), and mux/cores, which takes the process to one thread for the rest
// of its start (a session's Anonymous memory 2.41-2.45 → 2.06-2.07 MB), is
// initialized before the inits that allocate: an import added to it that
// initializes late would lose that.
func TestTheInitsOfALaunchAreSmallAndOnOneThread(t *testing.T) {
	const (
		module    = "github.com/mcp-mux/mcp-mux"
		maxOurs   = 48 << 10 // bytes one package of ours may allocate at init
		maxBefore = 64 << 10 // bytes the inits before mux/cores may allocate in all
	)
	cmd := exec.Command(testkit.MuxBin(t), "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mcp-mux version: %v\n%s", err, out)
	}
	// "init PKG @0.5 ms, 0.01 ms clock, 1234 bytes, 5 allocs"
	before, coresSeen, lines := 0, false, 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		lines++
		pkg := f[1]
		bytes, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("cannot read %q", line)
		}
		if pkg == module+"/mux/cores" {
			coresSeen = true
			if before > maxBefore {
				t.Errorf("the inits before mux/cores allocated %d bytes, want at most %d: it takes the process to one thread too late", before, maxBefore)
			}
		}
		if !coresSeen {
			before += bytes
		}
		if strings.HasPrefix(pkg, module+"/") && bytes > maxOurs {
			t.Errorf("the init of %s allocates %d bytes, want at most %d: every launch holds them (make them on first use)", pkg, bytes, maxOurs)
		}
	}
	if lines == 0 || !coresSeen {
		t.Fatalf("no init of mux/cores in GODEBUG=inittrace=1's output (%d inits):\n%s", lines, out)
	}
}

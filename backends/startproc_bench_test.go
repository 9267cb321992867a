//go:build linux

package backends

import (
	"os/exec"
	"testing"
)

func BenchmarkStartProc(b *testing.B) {
	for _, sup := range []bool{true, false} {
		name := "supervised"
		if !sup {
			name = "direct"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				var p *proc
				var err error
				if sup {
					p, err = startProc(cmd)
				} else {
					p, err = startUnsupervised(cmd)
				}
				if err != nil {
					b.Fatal(err)
				}
				p.cut()
				p.wait()
			}
		})
	}
}

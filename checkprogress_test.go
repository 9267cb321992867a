package main

import (
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-mux/mcp-mux/mux"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// TestLiveProgressRedrawsItsStatusLine: on a terminal, the backends still
// starting are one line rewritten in place, under the lines of those that
// settled, and it is erased at the end.
func TestLiveProgressRedrawsItsStatusLine(t *testing.T) {
	// In a bubble, the redraw ticker runs on the fake clock: one
	// redrawEvery later the status line is there, without polling for it.
	synctest.Test(t, func(t *testing.T) {
		out := &testkit.SyncBuffer{}
		cfg := &config.File{Backends: []config.Backend{{Name: "a"}, {Name: "off", Disabled: true}, {Name: "b"}}}
		p := newProgress(out, true, cfg)
		time.Sleep(redrawEvery)
		synctest.Wait()
		if !strings.Contains(out.String(), "starting a, b…") {
			t.Fatalf("no status line after %v: %q", redrawEvery, out.String())
		}
		p.settled(mux.BackendStatus{Name: "a", State: "ready", Tools: 1, Prompts: 2})
		p.settled(mux.BackendStatus{Name: "b", State: "failed", LastError: "exit status 1"})
		p.close()
		got := out.String()
		want := regexp.MustCompile(`^(\r\x1b\[Kstarting a, b… \d+\.\ds)+\r\x1b\[Kbackend a: ready \(1 tool, 2 prompts, 0 resources, 0 templates\) after \d+\.\ds\n\r\x1b\[Kstarting b… \d+\.\ds\r\x1b\[Kbackend b: failed: exit status 1\n\r\x1b\[K\r\x1b\[K$`)
		if !want.MatchString(got) {
			t.Errorf("got %q", got)
		}
	})
}

// TestProgressOffATerminalIsNeverSilent: off a terminal (a pipe, a CI log),
// a check whose backends take long to start (npx downloading a package:
// 13-22 s) said nothing until the first one settled. It says which are
// starting at once, which are still starting every stillEvery, and each
// backend's line as it settles.
func TestProgressOffATerminalIsNeverSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &testkit.SyncBuffer{}
		cfg := &config.File{Backends: []config.Backend{{Name: "a"}, {Name: "b"}}}
		p := newProgress(out, false, cfg)
		if got := out.String(); got != "starting a, b…\n" {
			t.Fatalf("at the start: %q", got)
		}
		time.Sleep(stillEvery)
		synctest.Wait()
		p.settled(mux.BackendStatus{Name: "a", State: "ready", Tools: 1})
		time.Sleep(stillEvery)
		synctest.Wait()
		p.settled(mux.BackendStatus{Name: "b", State: "failed", LastError: "exit status 1"})
		time.Sleep(stillEvery)
		synctest.Wait()
		p.close()
		want := "starting a, b…\nstill starting a, b… 5s\nbackend a: ready (1 tool, 0 prompts, 0 resources, 0 templates) after 5.0s\nstill starting b… 10s\nbackend b: failed: exit status 1\n"
		if got := out.String(); got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	})
}

// TestCheckSaysOneOfAThingInTheSingular: "1 resources" and "OK (1
// backends)" read as a program that does not count.
func TestCheckSaysOneOfAThingInTheSingular(t *testing.T) {
	var out strings.Builder
	writeStartPlans(&out, []mux.StartPlan{{Name: "notes", Remembered: true, Seen: time.Now(), Tools: 1, Prompts: 1, Resources: 1}})
	if got := out.String(); !strings.Contains(got, "remembered (1 tool, 1 prompt, 1 resource; seen ") {
		t.Errorf("got %q", got)
	}
}

// TestProgressSaysWhenGoRunIsCompiling: a backend run with `go run` (the
// shipped example's) spends its first start compiling; the progress lines
// say so while it is still starting, not only "starting".
func TestProgressSaysWhenGoRunIsCompiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &testkit.SyncBuffer{}
		cfg := &config.File{Backends: []config.Backend{
			{Name: "a", Command: "/usr/local/go/bin/go", Args: []string{"run", "./testdata/fixture"}},
			{Name: "b", Command: "go", Args: []string{"run", "."}},
			{Name: "c", Command: "go", Args: []string{"version"}},
		}}
		p := newProgress(out, false, cfg)
		time.Sleep(stillEvery)
		synctest.Wait()
		p.settled(mux.BackendStatus{Name: "a", State: "ready", Tools: 1})
		time.Sleep(stillEvery)
		synctest.Wait()
		p.settled(mux.BackendStatus{Name: "b", State: "ready", Tools: 1})
		time.Sleep(stillEvery)
		synctest.Wait()
		p.close()
		want := "starting a, b, c… (go run compiles a, b first)\n" +
			"still starting a, b, c… 5s (go run compiles a, b first)\n" +
			"backend a: ready (1 tool, 0 prompts, 0 resources, 0 templates) after 5.0s\n" +
			"still starting b, c… 10s (go run compiles b first)\n" +
			"backend b: ready (1 tool, 0 prompts, 0 resources, 0 templates) after 10.0s\n" +
			"still starting c… 15s\n"
		if got := out.String(); got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	})
	// The example's: every backend compiles.
	p := &progress{pending: []string{"notes", "tasks"}, goRun: map[string]bool{"notes": true, "tasks": true}}
	if got := p.compiling(); got != " (go run compiles them first)" {
		t.Errorf("every backend a go run: %q", got)
	}
}

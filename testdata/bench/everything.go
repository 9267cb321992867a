//go:build linux

package main

// The stdio latency and throughput rows again, against the reference
// server-everything from npm (Node.js) in place of the fixture. The
// fixture is a go-sdk server on two threads, whose own hand-offs between
// them cost it more per request than a hop does (its p50 falls by a third
// with GOMAXPROCS=1) and vary from run to run; measured against it, the
// relay and mcp-mux came out level, where against server-everything, as
// measured from outside the repository, mcp-mux was 0.3-0.55 behind the
// relay. These rows are that comparison, in the same rounds as the rest.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Metric keys of the server-everything rows.
const (
	mEvReadP50 = "everything_read_p50"
	mEvCallP50 = "everything_call_p50"
	mEvReads8  = "everything_reads8_per_s"
)

// Its resource (of a template: mcp-mux routes it by the template) and its
// tool.
const (
	evURI  = "demo://resource/dynamic/text/1"
	evName = "ev"
)

var evArgs = map[string]any{"message": "hello"}

// everythingServer is the argv of server-everything on stdio, or why it
// cannot run: testdata/interop's npm ci installs it.
func everythingServer() ([]string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	js := filepath.Join(root, "testdata", "interop", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(js); err != nil {
		return nil, errors.New("server-everything is not installed (cd testdata/interop && npm ci)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not on PATH")
	}
	return []string{node, js, "stdio"}, nil
}

// everythingSetup decides whether the rows run: not with -quick, which CI
// runs, and only where server-everything is installed.
func (b *bench) everythingSetup() {
	if b.quick {
		b.everythingSkip = "not with -quick"
		return
	}
	argv, err := everythingServer()
	if err != nil {
		b.everythingSkip = err.Error()
		return
	}
	b.everything = argv
}

// everythingRun measures the latency rows and 8 callers' reads against
// server-everything, directly, through the relay and through mcp-mux.
func (b *bench) everythingRun(ctx context.Context, m mode, s sample) error {
	p, err := b.startEverything(m)
	if err != nil {
		return err
	}
	c, err := connect(ctx, p)
	if err != nil {
		p.stop(time.Second)
		return err
	}
	defer c.close()
	echo := "echo"
	if m.isMux() {
		echo = evName + "__echo"
	}
	if _, err := c.waitFullTools(ctx, []string{echo}); err != nil {
		return err
	}
	read := func() error { return c.readResource(ctx, evURI) }
	call := func() error { _, err := c.callTool(ctx, echo, evArgs); return err }
	for range b.warmup {
		if err := read(); err != nil {
			return err
		}
		if err := call(); err != nil {
			return err
		}
	}
	reads, calls := make([]time.Duration, b.latencyN), make([]time.Duration, b.latencyN)
	for i := range reads {
		t := time.Now()
		if err := read(); err != nil {
			return err
		}
		reads[i] = time.Since(t)
	}
	for i := range calls {
		t := time.Now()
		if err := call(); err != nil {
			return err
		}
		calls[i] = time.Since(t)
	}
	s[mEvReadP50], s[mEvCallP50] = percentile(reads, 50), percentile(calls, 50)
	rate, _, err := throughput(ctx, 8, b.duration, func(int) error { return read() })
	s[mEvReads8] = rate
	return err
}

// startEverything starts server-everything for mode m.
func (b *bench) startEverything(m mode) (*proc, error) {
	seq := nextSeq()
	argv := b.everything
	switch m {
	case relay:
		argv = append([]string{b.relay}, argv...)
	case muxed, before:
		bin := b.mux
		if m == before {
			bin = b.before
		}
		quoted := make([]string, len(argv)-1)
		for i, a := range argv[1:] {
			quoted[i] = tomlString(a)
		}
		cfg := filepath.Join(b.dir, fmt.Sprintf("mux-everything-%d.toml", seq))
		toml := fmt.Sprintf("[mux]\nstartup_timeout = \"30s\"\n\n[[backend]]\nname = %s\ncommand = %s\nargs = [%s]\n",
			tomlString(evName), tomlString(argv[0]), strings.Join(quoted, ", "))
		if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
			return nil, fmt.Errorf("writing the mcp-mux config: %w", err)
		}
		argv = []string{bin, "--config", cfg}
	}
	return b.launch(m, fmt.Sprintf("everything-%s-%d", m, seq), argv, nil, "")
}

package mux

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/log"
)

// Report is what `mcp-mux check --connect` found: each backend started,
// initialized and listed, and every name or URI two backends both offer.
type Report struct {
	Config     string          `json:"config"`
	OK         bool            `json:"ok"`
	Backends   []BackendStatus `json:"backends"`
	Collisions []Collision     `json:"collisions"`
}

// Inspect starts every enabled backend of cfg, waits for each to be ready
// or to fail, takes the report, and stops them all.
func Inspect(ctx context.Context, cfg *Config, logger *log.Logger, version string) *Report {
	m := New(cfg, logger, version)
	defer m.Close()
	m.Start()
	m.waitStarted(ctx)
	r := &Report{Config: cfg.Path, OK: true, Backends: m.Status(), Collisions: m.Collisions()}
	for _, b := range r.Backends {
		if b.State != stateReady {
			r.OK = false
		}
	}
	return r
}

// Collisions lists every tool or prompt name and resource URI offered by
// more than one backend, with the winner (first in config order).
func (m *Mux) Collisions() []Collision {
	out := append([]Collision{}, m.cat.get().collisions...)
	rc := m.resourceCollisions()
	slices.SortFunc(rc, func(a, b Collision) int { return cmp.Compare(a.Name, b.Name) })
	return append(out, rc...)
}

// WriteText prints the report as a table per backend, then the collisions.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "config: %s\n\n", r.Config)
	for _, b := range r.Backends {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "backend %s\n", b.Name)
		fmt.Fprintf(tw, "  state\t%s\n", b.State)
		if b.LastError != "" {
			fmt.Fprintf(tw, "  error\t%s\n", b.LastError)
		}
		if b.State == stateReady {
			fmt.Fprintf(tw, "  protocol\t%s\n", b.ProtocolVersion)
			fmt.Fprintf(tw, "  server\t%s\n", b.Server)
			fmt.Fprintf(tw, "  subscribe\t%s\n", yesNo(b.Subscribe))
			fmt.Fprintf(tw, "  listChanged\t%s\n", strings.Join(append([]string{}, b.ListChanged...), ", "))
			fmt.Fprintf(tw, "  resources\t%d\n", b.Resources)
			fmt.Fprintf(tw, "  templates\t%d\n", b.Templates)
			fmt.Fprintf(tw, "  tools\t%d\n", b.Tools)
			fmt.Fprintf(tw, "  prompts\t%d\n", b.Prompts)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if len(r.Collisions) == 0 {
		fmt.Fprintln(w, "collisions: none")
	} else {
		fmt.Fprintf(w, "collisions: %d (the first backend in config order wins)\n", len(r.Collisions))
		for _, c := range r.Collisions {
			fmt.Fprintf(w, "  %s %q: %s wins over %s\n", c.Kind, c.Name, c.Winner, c.Loser)
		}
	}
	if r.OK {
		fmt.Fprintln(w, "\nOK: every backend started")
	} else {
		fmt.Fprintln(w, "\nFAIL: some backends did not start")
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

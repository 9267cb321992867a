package mux

import (
	"cmp"
	"context"
	"slices"

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
		if !b.Ready() {
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

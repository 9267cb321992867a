package config

import "fmt"

// When a backend starts ([mux] start and each backend's start).
const (
	// StartAuto starts a backend whose catalog is remembered from an
	// earlier run when it is first used, and one never seen at once.
	StartAuto = "auto"
	// StartEager starts it at once, every time (as before there was a
	// remembered catalog).
	StartEager = "eager"
	// StartLazy is StartAuto, and a backend started only to learn its
	// catalog is stopped once it has it, until it is used.
	StartLazy = "lazy"
)

// validateStart checks a start value at key.
func (p *parser) validateStart(key keyPath, v string) {
	switch v {
	case "", StartAuto, StartEager, StartLazy:
	default:
		p.add(key, "%s", fmt.Sprintf("must be %q (a remembered backend starts when first used; the default), %q (every backend starts at once) or %q (as auto, and a backend started only to learn its catalog stops once it has it) (got %q)", StartAuto, StartEager, StartLazy, v))
	}
}

// validateIdleStop checks an idle_stop value at key.
func (p *parser) validateIdleStop(key keyPath, d Duration) {
	if d.Duration < 0 {
		p.add(key, "must not be negative (got %s); remove the key to never stop an idle backend", d.Duration)
	}
}

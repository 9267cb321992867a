package config

import "fmt"

// When a backend starts ([mux] start and each backend's start), and
// whether sessions share it (share).
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

// validateShare checks a backend's share value at key, and makes it
// ShareAuto when absent.
func (p *parser) validateShare(key keyPath, v *string) {
	switch *v {
	case "":
		*v = ShareAuto
	case ShareAuto, ShareAlways, ShareNever:
	default:
		msg := fmt.Sprintf("must be %q (shared between the sessions for which its command, args, cwd and env are the same; the default), %q (one for every session) or %q (one per session) (got %q)", ShareAuto, ShareAlways, ShareNever, *v)
		if s := Closest(*v, []string{ShareAuto, ShareAlways, ShareNever}); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		p.add(key, "%s", msg)
	}
}

package mux

import (
	"slices"
	"time"

	"github.com/mcp-mux/mcp-mux/backends/secrets"
)

// A backend whose entry names a ${secret:NAME} that is not stored is
// failed until it is, and `mcp-mux secret set NAME` in a terminal is
// picked up by itself, as a `login` is (waitLogin): without saving the
// config file or a SIGHUP.

// secretPoll is how often such a backend looks at the secrets' stamp.
const secretPoll = time.Second

// waitSecrets waits until one of the secrets mem's entry lacks is stored,
// then reads the config file again: the reload starts the backend with
// its value (or with what it still lacks as its reason). It ends when the
// member is stopped, which that reload does, or when every secret it
// waited for was stored.
func (mem *member) waitSecrets() {
	waiting := slices.Clone(mem.spec.MissingSecrets)
	t := time.NewTicker(secretPoll)
	defer t.Stop()
	// The stamp is read before the store is asked: a secret stored after
	// the asking changes the stamp after it was read.
	last := secrets.Stamp()
	for {
		n := len(waiting)
		waiting = slices.DeleteFunc(waiting, func(name string) bool {
			_, err := secrets.Get(name)
			return err == nil
		})
		if len(waiting) < n {
			// The names are not logged: one that looks like a token is
			// not shown in the config's messages either.
			mem.log.Info("a secret its entry names is stored now: reading the config file again")
			mem.m.Reload() // logs what it did, or why not
		}
		if len(waiting) == 0 {
			return
		}
		for {
			select {
			case <-mem.ctx.Done():
				return
			case <-t.C:
			}
			if s := secrets.Stamp(); s != last {
				last = s
				break
			}
		}
	}
}

package mux

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Supervision: a backend that exits, breaks its connection or hangs is
// restarted with exponential backoff, and what the agent set up with it
// (subscriptions) is restored. Too many crashes within restart_window, or
// restart = "never", leave it failed until mux restarts.

const (
	defaultBackoff = 500 * time.Millisecond
	maxBackoff     = 30 * time.Second
	// healthyAfter of running resets the backoff and the crash count.
	healthyAfter = time.Minute
	// pingTimeout bounds the liveness check after a request timed out.
	pingTimeout = 2 * time.Second
)

// run owns the backend's lifecycle until mux closes: start, serve, and on
// a crash decide between restarting and giving up.
func (mem *member) run() {
	m := mem.m
	if mem.spec.Broken != "" {
		// Its config entry has mistakes (config.LoadForServing): it is
		// failed since newMember, until a reload mends them; a secret
		// it lacks, once stored, starts that reload.
		if len(mem.spec.MissingSecrets) > 0 {
			mem.waitSecrets()
		}
		return
	}
	switch {
	case mem.atRest: // Start put it at rest (lazy.go)
		if !mem.waitUse(stateRemembered) {
			return
		}
	case mem.startsWhenUsed(): // a reload added it
		if !mem.sleep(stateRemembered) {
			return
		}
	}
	backoff := m.backoffBase
	var crashes []time.Time
	for attempt := 0; ; attempt++ {
		began := time.Now()
		mem.mu.Lock()
		spec := mem.spec // whole: a reload may be changing its prefix or filters
		mem.mu.Unlock()
		b, err := mem.start(spec)
		if err != nil && mem.ctx.Err() == nil {
			mem.rememberFailure(spec, err)
		}
		if err == nil {
			r := b.InitializeResult()
			mem.mu.Lock()
			mem.initResult = r
			mem.mu.Unlock()
			if m.cfg.Mux.Instructions == "" && m.instr.store(spec, r.Instructions) {
				mem.log.Info("its instructions changed since the last run: an agent that connected before it started has the previous ones, the next session gets these")
			}
		}
		mem.markInitialized()
		if err == nil {
			if !mem.serve(b, attempt > 0 || mem.replaces) {
				return // mux is closing, or the member was stopped
			}
			err = b.Err()
			if errors.Is(err, backends.ErrMoved) {
				// The pool moved it to the instance of its agents'
				// roots: not a crash, start (join) that one at once.
				mem.setState(stateStarting, nil)
				continue
			}
			if mem.reinitting { // not a crash: start it again at once
				// Its catalog stays listed and requests wait for the new
				// process (backendForUse), as for a start when used: the
				// agent sees no failure of mux's own making.
				mem.reinitting = false
				mem.setState(stateStarting, nil)
				continue // a restart: its subscriptions are restored
			}
			if mem.idling { // not a crash: it waits for its next use
				mem.idling = false
				if !mem.sleep(stateIdle) {
					return
				}
				attempt = -1
				continue
			}
			if time.Since(began) >= healthyAfter {
				backoff, crashes = m.backoffBase, nil
			}
		}
		if mem.ctx.Err() != nil {
			mem.markStarted()
			return
		}
		if errors.Is(err, backends.ErrNeedsLogin) {
			// Not a crash, and nothing to retry: the agent launched
			// mcp-mux headless, and only the user can sign in. The
			// others serve; this one connects once a login is stored.
			if !mem.waitLogin(spec, err) {
				return
			}
			backoff, crashes = m.backoffBase, nil
			continue
		}
		set := m.settings()
		now := time.Now()
		for len(crashes) > 0 && now.Sub(crashes[0]) > set.RestartWindow.Duration {
			crashes = crashes[1:]
		}
		crashes = append(crashes, now)
		giveUp := true
		switch {
		case errors.Is(err, backends.ErrUnauthorized):
			// A token to fix, not a crash: retrying cannot help, and
			// would only hammer the server with refused requests.
			mem.log.Error("backend failed: unauthorized, not retried (fix its headers and reload)", "reason", err)
			mem.setDown(stateFailed, err)
		case mem.spec.Restart == config.RestartNever:
			mem.log.Error("backend down; not restarted (restart = \"never\")", "reason", err)
			mem.setDown(stateFailed, err)
		case len(crashes) >= set.RestartMax:
			mem.log.Error("backend failed: too many crashes, not restarted", "crashes", len(crashes), "within", set.RestartWindow.Duration, "reason", err)
			mem.setDown(stateFailed, err)
		default:
			giveUp = false
			mem.setDown(stateRestarting, err)
			mem.log.Warn("backend down; restarting", "in", backoff, "reason", err)
		}
		mem.markStarted()
		if giveUp {
			return
		}
		select {
		case <-mem.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
		mem.mu.Lock()
		mem.restarts++
		mem.mu.Unlock()
	}
}

// start starts the backend of spec, or joins the one the pool runs for it
// (WithPool): the same process, unless its share is "never".
func (mem *member) start(spec config.Backend) (*backends.Backend, error) {
	m := mem.m
	run := spec.SpecIn(m.environ, m.cwd)
	opts := mem.withClientRequests(m.startOptions(mem))
	if m.pool == nil || spec.Share == config.ShareNever {
		return backends.Start(mem.ctx, run, opts)
	}
	ident := backends.Identity(run)
	if spec.Share == config.ShareAlways {
		// The first session's environment serves all.
		ident = "always\x00" + spec.Name
	}
	return m.pool.Start(mem.ctx, ident, run, opts)
}

// waitLogin marks the member as needing a login, says so in the log once,
// and waits until the sign-in changes (`mcp-mux login NAME` in another
// terminal) or the member is stopped (false).
func (mem *member) waitLogin(spec config.Backend, err error) bool {
	mem.setDown(stateNeedsLogin, err)
	mem.log.Warn("backend needs a sign-in: run `"+oauthCommand(spec.Name)+"` in a terminal; it connects by itself once signed in, the other backends serve meanwhile", "reason", err)
	mem.markStarted()
	if werr := backends.WaitSignIn(mem.ctx, spec.Spec(), err); werr != nil {
		if mem.ctx.Err() == nil {
			mem.log.Error("cannot watch for a sign-in: restart mcp-mux once signed in", "err", werr)
			<-mem.ctx.Done()
		}
		return false
	}
	mem.log.Info("the sign-in changed: connecting")
	// "Needs a sign-in" is no longer why it is down: once ready it must
	// not show that as its last error (a failure to connect sets its own).
	mem.mu.Lock()
	mem.lastErr = ""
	mem.mu.Unlock()
	mem.setState(stateStarting, nil)
	return true
}

// serve makes b the member's backend and refreshes its catalog on demand
// until b goes down (true) or the member is stopped (false). After a
// restart it first restores the subscriptions the agent holds on it.
func (mem *member) serve(b *backends.Backend, restarted bool) bool {
	m := mem.m
	mem.mu.Lock()
	if mem.stopped {
		mem.mu.Unlock()
		b.Stop(m.settings().ShutdownGrace.Duration)
		return false
	}
	mem.b, mem.logLevel = b, ""
	mem.mu.Unlock()

	// The first catalog fetch is part of starting: a first tools/list
	// waits for it (up to first_list_wait), and is not told of it later.
	mem.mu.Lock()
	wasKnown := mem.known && mem.state != stateRestarting
	mem.mu.Unlock()
	ctx, cancel := context.WithTimeout(mem.ctx, m.settings().StartupTimeout.Duration)
	mem.refresh(ctx, allKinds, false)
	mem.restoreLogLevel(ctx, b)
	if restarted {
		mem.resubscribe(ctx, b)
	}
	cancel()
	changed := mem.remember(b)
	mem.setState(stateReady, nil)
	m.cat.rebuild(m)
	switch {
	case restarted:
		// Its part of the lists went away while it was down.
		m.lists.markBackend(mem.spec.Name, allKinds)
		mem.announceRestored()
	case wasKnown:
		// Its remembered catalog was listed: only a change is news.
		if changed != 0 {
			mem.log.Info("its catalog changed since it was remembered: list_changed sent")
			m.lists.markBackend(mem.spec.Name, changed)
		}
	case m.first.over.Load():
		// A list went out without it: it came late, or a reload added it.
		m.lists.markBackend(mem.spec.Name, capKinds(b))
	}
	mem.markStarted()
	mem.mu.Lock()
	late := mem.late
	mem.mu.Unlock()
	if late {
		mem.log.Info("backend ready (late: after the first list; list_changed sent)", "pid", b.PID(), "server", serverInfo(b), "restart", restarted)
	} else {
		mem.log.Info("backend ready", "pid", b.PID(), "server", serverInfo(b), "restart", restarted)
	}
	if restarted {
		m.logHealth(mem.spec.Name + " is back")
	}
	m.logFilterWarnings()

	idle, stopIdle := mem.idleTicker()
	defer stopIdle()
	if mem.specNow().StartPolicy(m.settings()) == config.StartLazy && mem.lastUse.Load() == 0 {
		// Started only to learn its catalog: it has it.
		mem.log.Info("stopping it: started only to learn its catalog (start = \"lazy\")")
		mem.stopIdle(b)
		return true
	}
	for {
		select {
		case <-mem.ctx.Done():
			return false
		case <-b.Done():
			return true
		case <-idle:
			mem.idleChecks.Add(1)
			if after := mem.specNow().IdleAfter(m.settings()); mem.idleNow(after) {
				mem.log.Info("stopping it: idle", "idle_stop", after)
				mem.stopIdle(b)
				return true
			}
		case <-mem.reinit:
			if m.agent.stale(mem) {
				mem.reinitting = true
				mem.drainForRestart()
				b.Stop(m.settings().ShutdownGrace.Duration)
				return true
			}
		case <-mem.wake:
			mem.mu.Lock()
			k := mem.dirty
			mem.dirty = 0
			mem.mu.Unlock()
			ctx, cancel := context.WithTimeout(mem.ctx, m.requestTimeout(mem))
			mem.refresh(ctx, k, true)
			cancel()
		}
	}
}

// resubscribe re-sends resources/subscribe for every forwarded URI still
// held on this backend: the new process knows nothing of them. It runs
// before the backend is marked ready, so no new subscribe can race it.
func (mem *member) resubscribe(ctx context.Context, b *backends.Backend) {
	uris := mem.m.subs.ForwardedURIs(mem.spec.Name)
	if len(uris) == 0 {
		return
	}
	if !b.SupportsSubscribe() {
		mem.log.Warn("restarted backend no longer supports subscribe; its subscriptions are kept without it", "count", len(uris))
		return
	}
	n := 0
	for _, uri := range uris {
		if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			mem.log.Warn("re-subscribe after restart failed", "uri", uri, "err", err)
			continue
		}
		n++
	}
	mem.log.Info("subscriptions restored after restart", "count", n)
}

// announceRestored tells every session holding a URI on this backend that
// it was updated: its contents may have changed while the backend was down.
func (mem *member) announceRestored() {
	m := mem.m
	for _, sub := range m.subs.Backend(mem.spec.Name) {
		if s := m.sessionRecord(sub.Session); s != nil {
			m.notifyUpdated(s, &mcp.ResourceUpdatedNotificationParams{URI: sub.URI})
		}
	}
}

// capKinds are the parts of the catalog b has.
func capKinds(b *backends.Backend) kinds {
	var k kinds
	caps := b.Capabilities()
	if caps.Tools != nil {
		k |= kindTools
	}
	if caps.Prompts != nil {
		k |= kindPrompts
	}
	if caps.Resources != nil {
		k |= kindResources
	}
	return k
}

func serverInfo(b *backends.Backend) string {
	if r := b.InitializeResult(); r != nil && r.ServerInfo != nil {
		return r.ServerInfo.Name + " " + r.ServerInfo.Version
	}
	return ""
}

func (mem *member) markStarted() {
	mem.markInitialized()
	mem.startedOnce.Do(func() { close(mem.started) })
}

func (mem *member) markInitialized() { mem.initOnce.Do(func() { close(mem.initialized) }) }

func (mem *member) setState(state string, err error) {
	mem.mu.Lock()
	mem.state = state
	mem.since = time.Now()
	if err != nil {
		mem.lastErr = err.Error()
	}
	mem.changedLocked()
	mem.mu.Unlock()
	mem.m.builtinChanged(uriBackends)
}

// setDown records that the backend is not serving: its part of the lists
// disappears (the agent is told), requests for it fail at once naming its
// state, and requests in flight fail as its connection closes.
func (mem *member) setDown(state string, err error) {
	mem.mu.Lock()
	// Listed from memory counts: a backend at rest whose start failed
	// leaves the lists as a running one that crashed does.
	wasListed, late := mem.listedLocked(), mem.late && mem.state == stateStarting
	mem.state = state
	mem.since = time.Now()
	if err != nil && !errors.Is(err, backends.ErrStopped) {
		mem.lastErr = err.Error()
	}
	mem.b = nil
	mem.changedLocked()
	mem.mu.Unlock()
	if wasListed {
		mem.m.cat.rebuild(mem.m)
		mem.m.lists.markBackend(mem.spec.Name, allKinds)
		mem.m.logHealth(mem.spec.Name + " is down (" + state + ")")
	}
	if late {
		// A list_changed held for it to start (holdForLate) need not.
		mem.m.lists.poke()
	}
	mem.m.builtinChanged(uriBackends)
}

// logHealth logs one line of what just happened to a backend and how many
// serve now, with the others that do not and why (mcp-mux://backends has
// the details): the agent's own status of mcp-mux says "connected"
// whatever its backends do.
func (m *Mux) logHealth(what string) {
	members := m.members()
	serving := 0
	var down []string
	for _, mem := range members {
		if mem.serving() || mem.listed() { // at rest (lazy.go) is not down
			serving++
			continue
		}
		mem.mu.Lock()
		down = append(down, mem.spec.Name+" ("+mem.state+")")
		mem.mu.Unlock()
	}
	kv := []any{"serving", fmt.Sprintf("%d of %d", serving, len(members))}
	if len(down) > 0 {
		kv = append(kv, "down", strings.Join(down, ", "))
		m.log.Warn("backends: "+what, kv...)
		return
	}
	m.log.Info("backends: "+what, kv...)
}

// stop stops the backend process, if any, with grace, and keeps run from
// starting another: run and the poller end.
func (mem *member) stop(grace time.Duration) {
	if b := mem.halt(); b != nil {
		b.Stop(grace)
	}
	mem.mu.Lock()
	mem.state = stateStopped
	mem.b = nil
	mem.mu.Unlock()
}

// halt keeps run from starting another backend and ends the poller; it
// returns the backend that runs, if any, for the caller to stop.
func (mem *member) halt() *backends.Backend {
	mem.cancel()
	mem.mu.Lock()
	defer mem.mu.Unlock()
	mem.stopped = true
	return mem.b
}

// checkAlive runs after a request to b timed out: a backend that does not
// even answer ping is hung, and is killed so that run restarts it. One that
// answers is just slow on that request.
func (mem *member) checkAlive(b *backends.Backend) {
	ctx, cancel := context.WithTimeout(mem.m.ctx, pingTimeout)
	defer cancel()
	if err := b.Session().Ping(ctx, nil); err != nil && mem.m.ctx.Err() == nil {
		mem.log.Error("backend does not answer ping after a timeout: killing it to restart", "err", err)
		b.Kill(fmt.Errorf("hung: no answer to ping within %s after a request timed out", pingTimeout))
	}
}

package mux

// Hot reload: the config file read again while serving is compared with the
// config in effect (diffConfig, a pure function) and the difference is
// applied to the running mux (applyReload), without ending the agent's
// session. watch.go starts a reload when the file changes; main does on
// SIGHUP.

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// exposureKeys are the [[backend]] keys that change only what the agent
// sees of a backend, not its process: a reload applies them to the running
// backend by rebuilding the merged catalog.
var exposureKeys = map[string]bool{"prefix": true, "tools": true, "exclude_tools": true, "prompts": true, "exclude_prompts": true, "pin": true, "override": true}

// liveSettings are the [mux] keys a reload applies at once. Every other key
// (and any key added later, until it is listed here) is logged as "needs
// restart": name and instructions are read by the agent once, at
// initialize; log_file is opened, and max_message_size sizes the agent's
// connection, at start; max_subscriptions bounds the subscription registry
// made at start; tool_separator and max_request_time are read on every
// request without synchronisation.
var liveSettings = map[string]bool{
	"log_level":       true, // mcp-mux's own lines; a running backend's own (its stderr) and the go-sdk's keep the level they started with
	"request_timeout": true,
	"startup_timeout": true, // for the starts from then on
	"first_list_wait": true, // matters until the first list only
	"shutdown_grace":  true,
	"restart_max":     true,
	"restart_window":  true,
	"tool_list":       true, // each session's list is decided anew: tools/list_changed
	"tool_list_max":   true,
	"start":           true, // for the backends started from then on
	"idle_stop":       true, // read at each backend's next check
	"audit_log":       true, // the new file is opened (observe.go)
	"audit_arguments": true,
}

// reloadPlan is what a reload changes, backends by name and [mux] settings
// by key, each in config order.
type reloadPlan struct {
	add      []string // new, or enabled now: started
	remove   []string // gone, or disabled now: stopped, their subscriptions dropped
	restart  []string // what runs them changed: stopped and started anew
	expose   []string // only their prefix or filters changed: applied at once
	reorder  bool     // the order of the backends kept changed (= precedence)
	profiles bool     // the [profile.NAME] tables changed: each session's view is decided anew

	live         []string // [mux] keys applied at once
	needsRestart []string // [mux] keys that take effect when mcp-mux restarts
}

// changes reports whether applying p changes anything.
func (p reloadPlan) changes() bool {
	return len(p.add)+len(p.remove)+len(p.restart)+len(p.expose)+len(p.live) > 0 || p.reorder || p.profiles
}

// diffConfig compares two loaded configs: old, in effect, and next.
func diffConfig(old, next *config.File) reloadPlan {
	var p reloadPlan
	oldOrder, oldSpecs := enabledSpecs(old)
	newOrder, newSpecs := enabledSpecs(next)
	var kept, shares []string
	for _, name := range newOrder {
		o, ok := oldSpecs[name]
		n := newSpecs[name]
		if ok && o.Share != n.Share {
			shares = append(shares, fmt.Sprintf("share of backend %q", name))
		}
		switch {
		case !ok:
			p.add = append(p.add, name)
			continue
		case !specFieldsEqual(o, n, false) || o.Broken != n.Broken:
			p.restart = append(p.restart, name)
		case !specFieldsEqual(o, n, true) || o.EffectivePrefix() != n.EffectivePrefix():
			// The effective prefix, not the key: prefix = "<name>" is
			// the same as no prefix.
			p.expose = append(p.expose, name)
		}
		kept = append(kept, name)
	}
	for _, name := range oldOrder {
		if _, ok := newSpecs[name]; !ok {
			p.remove = append(p.remove, name)
		}
	}
	oldKept := slices.DeleteFunc(slices.Clone(oldOrder), func(name string) bool { _, ok := newSpecs[name]; return !ok })
	p.reorder = !slices.Equal(oldKept, kept)
	p.profiles = !reflect.DeepEqual(old.Profiles, next.Profiles)

	ov, nv := reflect.ValueOf(old.Mux), reflect.ValueOf(next.Mux)
	for i := range ov.NumField() {
		key := fieldKey(ov.Type().Field(i))
		if key == "" || valuesEqual(ov.Field(i), nv.Field(i)) {
			continue
		}
		if liveSettings[key] {
			p.live = append(p.live, key)
		} else {
			p.needsRestart = append(p.needsRestart, key)
		}
	}
	if !slices.EqualFunc(old.Tokens, next.Tokens, func(a, b config.Token) bool {
		return a.Name == b.Name && a.Value == b.Value && slices.Equal(a.Profiles, b.Profiles) // not where they are
	}) {
		// The HTTP door took them when it started (door.HTTPOptions).
		p.needsRestart = append(p.needsRestart, "[[token]]")
	}
	p.needsRestart = append(p.needsRestart, shares...)
	return p
}

// enabledSpecs are cfg's enabled backends: their names in config order,
// and their specs by name.
func enabledSpecs(cfg *config.File) ([]string, map[string]config.Backend) {
	var order []string
	specs := map[string]config.Backend{}
	for _, s := range cfg.Backends {
		if !s.Disabled {
			order = append(order, s.Name)
			specs[s.Name] = s
		}
	}
	return order, specs
}

// specFieldsEqual compares the exposure keys of two specs but prefix
// (exposure), or all the others.
func specFieldsEqual(a, b config.Backend, exposure bool) bool {
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range av.NumField() {
		key := fieldKey(av.Type().Field(i))
		// share is read when the shared mcp-mux groups its sessions:
		// restarting the backend would change nothing (diffConfig says
		// it needs a restart).
		if key == "" || key == "disabled" || key == "prefix" || key == "share" || exposureKeys[key] != exposure {
			continue
		}
		if !valuesEqual(av.Field(i), bv.Field(i)) {
			return false
		}
	}
	return true
}

// fieldKey is a config struct field's key; "" for one not in the file.
func fieldKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if !f.IsExported() || name == "-" {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

// valuesEqual is reflect.DeepEqual, except that an empty list or table
// equals a missing one.
func valuesEqual(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Slice, reflect.Map:
		if a.Len() == 0 && b.Len() == 0 {
			return true
		}
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// errClosed is Reload's answer once the mux is closing.
var errClosed = errors.New("mcp-mux is closing")

// Reload reads the config file again and applies what changed (see
// applyReload). An invalid file is logged, one line per problem, and
// changes nothing: the error says why. Reloads run one at a time, and
// Close waits for one in progress.
func (m *Mux) Reload() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errClosed
	}
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()

	path := m.cfg.Path
	next, err := config.LoadForServingIn(path, m.environ)
	if err != nil {
		var ce *config.Error
		if !errors.As(err, &ce) {
			ce = &config.Error{Problems: []config.Problem{{File: path, Message: err.Error()}}}
		}
		m.log.Error("config file not applied: it has mistakes, the running config stays", "path", path, "problems", len(ce.Problems))
		for _, p := range ce.Problems {
			m.log.Error(p.String())
		}
		return err
	}
	for _, w := range next.Warnings {
		m.log.Warn(w.String())
	}
	next = onlyProfile(next, m.launch) // the launch's profile's backends only (profile.go)
	m.keepRunning(m.conf.Load().cfg, next)
	m.reloadAudit(next) // whether or not anything else changed: one not written is tried again
	logBroken(m.log, next)
	plan := diffConfig(m.conf.Load().cfg, next)
	for _, key := range plan.needsRestart {
		m.log.Warn("needs restart: "+key, "path", path)
	}
	if !plan.changes() {
		m.log.Info("config file read again: nothing to apply", "path", path)
		return nil
	}
	m.applyReload(next, plan)
	return nil
}

// keepRunning makes a saved mistake cost nothing that runs: a backend whose
// entry has mistakes in next (Broken) but ran with cur's entry keeps cur's,
// and a [mux] key with a mistake keeps cur's value, each logged.
func (m *Mux) keepRunning(cur, next *config.File) {
	for i := range next.Backends {
		n := &next.Backends[i]
		if n.Broken == "" {
			continue
		}
		for _, o := range cur.Backends {
			if o.Name == n.Name && o.Broken == "" && !o.Disabled {
				m.log.Warn("backend's entry has mistakes: it keeps running with its previous settings; fix them and save", "backend", n.Name)
				for _, line := range strings.Split(n.Broken, "\n") {
					m.log.Warn(line)
				}
				*n = o
				break
			}
		}
	}
	if len(next.Invalid) > 0 {
		copyFields(&next.Mux, &cur.Mux, func(key string) bool { return slices.Contains(next.Invalid, key) })
		m.log.Warn("[mux] settings with mistakes keep their values", "keys", strings.Join(next.Invalid, ", "))
	}
}

// logBroken logs each backend of cfg that its mistakes keep from running
// (config.LoadForServing), with them.
func logBroken(logger *log.Logger, cfg *config.File) {
	for _, b := range cfg.Backends {
		if b.Broken == "" || b.Disabled {
			continue
		}
		logger.Error("backend not started: its [[backend]] entry has mistakes; fix them and save the file, mcp-mux reloads it", "backend", b.Name)
		for _, line := range strings.Split(b.Broken, "\n") {
			logger.Error(line)
		}
	}
}

// applyReload makes next (loaded, and compared by diffConfig into p) the
// config in effect: the live [mux] settings take its values, the others
// keep theirs; backends added start, removed ones stop and lose their
// subscriptions, changed ones are stopped and started anew (their
// subscriptions restored), prefix and filter changes apply to the running
// backend, and precedence follows next's order. Untouched backends keep
// their process. The agent hears list_changed.
func (m *Mux) applyReload(next *config.File, p reloadPlan) {
	cur := m.conf.Load()
	eff := *next
	eff.Mux = cur.cfg.Mux
	copyFields(&eff.Mux, &next.Mux, func(key string) bool { return liveSettings[key] })
	if slices.Contains(p.live, "log_level") {
		m.setLogLevel(eff.Mux.LogLevel)
	}

	old := m.roster.Load()
	r := &roster{byName: map[string]*member{}}
	var starting []*member
	for _, spec := range next.Backends {
		if spec.Disabled {
			continue
		}
		mem, ok := old.byName[spec.Name]
		switch {
		case !ok || slices.Contains(p.restart, spec.Name):
			mem = newMember(m, spec)
			mem.replaces = ok
			starting = append(starting, mem)
		case slices.Contains(p.expose, spec.Name):
			m.setExposure(mem, spec)
		}
		r.add(mem)
	}
	var stopping []*member
	for _, mem := range old.members {
		if r.byName[mem.spec.Name] != mem {
			stopping = append(stopping, mem)
		}
	}

	// Each session's view before: a reload may change it (profile.go).
	viewsBefore := m.sessionProfiles()

	m.mu.Lock()
	if m.closed {
		// Close stopped the members it found; these were never started.
		m.mu.Unlock()
		for _, mem := range starting {
			mem.cancel()
		}
		return
	}
	m.roster.Store(r)
	gen := cur.generation + 1
	m.conf.Store(&loadedConfig{cfg: &eff, generation: gen, loaded: time.Now()})
	m.mu.Unlock()

	// Their subscriptions end before the agent hears of it; the backends
	// are stopped, so there is nothing to unsubscribe at them.
	for _, name := range p.remove {
		m.dropSubscriptions(name)
	}
	// A session whose view lost a backend loses its subscriptions there.
	viewChanged := m.viewsChanged(viewsBefore)
	for _, s := range viewChanged {
		m.dropHiddenSubscriptions(s)
	}
	m.reloadObserving(p)
	// Off the lists at once; the new ones join as each is ready. Each
	// session hears of what changes in its view only.
	m.cat.rebuild(m)
	if p.reorder {
		m.lists.mark(allKinds) // precedence: which of two backends' names wins
	}
	for _, name := range slices.Concat(p.remove, p.restart, p.expose) {
		m.lists.markBackend(name, allKinds)
	}
	for _, s := range viewChanged {
		m.lists.markSession(s, allKinds)
	}
	if slices.Contains(p.live, "tool_list") || slices.Contains(p.live, "tool_list_max") {
		m.lists.mark(kindTools) // each session's list decided anew (toolsearch.go)
	}
	var wg sync.WaitGroup
	for _, mem := range stopping {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mem.stop(m.settings().ShutdownGrace.Duration)
		}()
	}
	wg.Wait()
	for _, mem := range starting {
		m.startMember(mem)
	}
	m.builtinChanged(uriBackends)
	m.log.Info("config reloaded", "path", next.Path, "generation", gen,
		"added", p.add, "removed", p.remove, "restarted", p.restart, "exposure_changed", p.expose, "reordered", p.reorder, "profiles_changed", p.profiles, "settings", p.live)
}

// setExposure gives a running member the prefix and filters of spec. The
// catalog's rebuild reads them holding its lock, others holding mu.
func (m *Mux) setExposure(mem *member, spec config.Backend) {
	m.cat.mu.Lock()
	defer m.cat.mu.Unlock()
	mem.mu.Lock()
	defer mem.mu.Unlock()
	copyFields(&mem.spec, &spec, func(key string) bool { return exposureKeys[key] })
	mem.prefix = mem.spec.EffectivePrefix()
}

// copyFields copies the fields of src whose key is picked into dst; only
// those fields of dst are written.
func copyFields[T any](dst, src *T, pick func(key string) bool) {
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := range dv.NumField() {
		if key := fieldKey(dv.Type().Field(i)); key != "" && pick(key) {
			dv.Field(i).Set(sv.Field(i))
		}
	}
}

// setLogLevel applies a new log_level to mux's log and its backends'.
func (m *Mux) setLogLevel(level string) {
	l, err := log.ParseLevel(level)
	if err != nil {
		return // validated when loaded
	}
	m.log.SetLevel(l)
	for _, mem := range m.members() {
		mem.log.SetLevel(l)
	}
}

// dropSubscriptions ends every subscription held on a backend that a
// reload removed.
func (m *Mux) dropSubscriptions(backend string) {
	held := m.subs.Backend(backend)
	for _, s := range held {
		m.subs.Unsubscribe(s.Session, s.URI, nil)
	}
	if len(held) > 0 {
		m.log.Info("backend removed: its subscriptions end", "backend", backend, "count", len(held))
		m.builtinChanged(uriSubscriptions)
	}
}

// sessionProfiles is the profile of each session's view (nil: all).
func (m *Mux) sessionProfiles() map[*session]*config.Profile {
	out := map[*session]*config.Profile{}
	for _, s := range m.allSessions() {
		var p *config.Profile
		if v := m.viewOf(s); v != nil {
			p = v.p
		}
		out[s] = p
	}
	return out
}

// viewsChanged are the sessions of before (sessionProfiles) whose view is
// not the same now.
func (m *Mux) viewsChanged(before map[*session]*config.Profile) []*session {
	var out []*session
	for s, old := range before {
		var now *config.Profile
		if v := m.viewOf(s); v != nil {
			now = v.p
		}
		if !sameProfile(old, now) {
			out = append(out, s)
		}
	}
	return out
}

// sameProfile reports whether a and b make the same view: the same
// table, wherever it is in the file.
func sameProfile(a, b *config.Profile) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Line, y.Line, x.PatternLines, y.PatternLines = 0, 0, nil, nil
	return reflect.DeepEqual(x, y)
}

// dropHiddenSubscriptions ends the subscriptions s holds on backends its
// view no longer has: it could not read them any more. A backend is told
// when s was its last holder of the URI.
func (m *Mux) dropHiddenSubscriptions(s *session) {
	v := m.viewOf(s)
	n := 0
	for _, sub := range m.subs.Session(s.id) {
		if sub.Backend == builtinBackend || !hiddenFromView(v, sub.Backend) {
			continue
		}
		removed, err := m.subs.Unsubscribe(s.id, sub.URI, func(backend string) error {
			return m.unforward(m.ctx, backend, sub.URI)
		})
		if err != nil {
			m.log.Warn("backend refused unsubscribe", "uri", sub.URI, "err", err)
		}
		if removed {
			n++
		}
	}
	if n > 0 {
		m.log.Info("session's profile no longer has the backends of some subscriptions: they end", "session", s.id, "count", n)
		m.builtinChanged(uriSubscriptions)
	}
}

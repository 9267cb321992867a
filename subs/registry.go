// Package subs is the mux's record of which agent session subscribed to which
// resource on which backend.
//
// The mux needs this record for three jobs: deciding when a backend must
// actually be sent resources/subscribe or resources/unsubscribe (only for the
// first and the last interested session), fanning a backend's
// notifications/resources/updated out to the right sessions, and replaying
// subscriptions when a backend restarts. Everything here is in memory and
// safe for concurrent use; the package imports only the standard library so
// that it can be tested without any MCP machinery.
package subs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mode says whether the backend itself knows about a subscription. It is
// recorded per subscription because the answer decides whether removing the
// subscription has to reach the backend.
type Mode int

const (
	// Forwarded means the backend was sent resources/subscribe and must be
	// sent resources/unsubscribe once nobody holds the key any more.
	Forwarded Mode = iota
	// LocalOnly means the backend cannot subscribe, so the mux keeps the
	// subscription purely for its own bookkeeping (for example to poll or
	// to answer listing requests) and never talks to the backend about it.
	LocalOnly
)

// String gives the names used in logs and in the JSON status output, which
// are meant to be read by people rather than matched against numbers.
func (m Mode) String() string {
	switch m {
	case Forwarded:
		return "forwarded"
	case LocalOnly:
		return "local-only"
	default:
		return fmt.Sprintf("Mode(%d)", int(m))
	}
}

// MarshalText makes encoding/json write the readable name instead of an
// opaque integer, so status dumps stay stable if the constants are reordered.
func (m Mode) MarshalText() ([]byte, error) {
	switch m {
	case Forwarded, LocalOnly:
		return []byte(m.String()), nil
	default:
		return nil, fmt.Errorf("subs: invalid mode %d", int(m))
	}
}

// UnmarshalText accepts what MarshalText writes, so a dumped Sub can be
// decoded again (tests and tooling round-trip status output).
func (m *Mode) UnmarshalText(text []byte) error {
	switch string(text) {
	case "forwarded":
		*m = Forwarded
	case "local-only":
		*m = LocalOnly
	default:
		return fmt.Errorf("subs: unknown mode %q", text)
	}
	return nil
}

// Sub is one session's subscription to one URI. Callers get copies, so they
// may keep or change them without affecting the registry.
type Sub struct {
	Session string    `json:"session"`
	Backend string    `json:"backend"`
	URI     string    `json:"uri"`
	Since   time.Time `json:"since"`
	Mode    Mode      `json:"mode"`
}

// ErrLimit lets callers test for "too many subscriptions" with errors.Is
// without depending on the concrete *LimitError type.
var ErrLimit = errors.New("subscription limit reached")

// LimitError carries the limit so the message sent back to the agent can
// tell it how many subscriptions it may hold, instead of a bare refusal.
type LimitError struct{ Limit int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("subscription limit reached: at most %d per session", e.Limit)
}

// Is ties every *LimitError to ErrLimit so errors.Is works through wrapping.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// entry is the state of one (backend, uri) key. It exists only while some
// session holds the key or a forward/unforward for it is in flight.
type entry struct {
	// holders is the set of sessions holding the key; see holderSet for why
	// it is not simply a map.
	holders holderSet
	// fwd counts holders in Forwarded mode. The backend is subscribed exactly
	// while fwd > 0 (or while a forward is in flight), so this, not the
	// number of holders, decides when to forward and unforward.
	fwd int
	// busy is non-nil while a forward or unforward for the key runs without
	// the registry lock. Anyone wanting to change the key waits for it to be
	// closed and then looks again, which is what keeps one forward per key
	// and stops a re-subscribe from being overtaken by an older unforward.
	// Invariant: busy != nil implies fwd == 0.
	busy chan struct{}
}

// sessionState is the state of one agent session.
type sessionState struct {
	// subs maps URI to Sub; the same *Sub is shared with the entry so each
	// subscription's record is stored only once.
	subs map[string]*Sub
	// pending holds URIs whose Subscribe is waiting for forward. They count
	// against the limit (otherwise concurrent subscribes could overshoot it)
	// and the channel lets a duplicate Subscribe, an Unsubscribe or an
	// EndSession wait for the outcome instead of guessing. Nil when empty.
	pending map[string]chan struct{}
}

// Registry records subscriptions. The zero value is not usable; call New.
type Registry struct {
	limit int

	// mu guards everything below. It is never held while calling forward or
	// unforward, because those talk to a backend and may take a long time.
	mu sync.RWMutex
	// backends maps backend -> uri -> entry. Two levels (rather than a
	// struct key) make Backend and ForwardedURIs proportional to one
	// backend's keys instead of all keys.
	backends map[string]map[string]*entry
	// lens counts one backend's keys by URI length. Subscribers looks up a
	// prefix only where a key of that length exists, which keeps its cost
	// linear in the URI's length however many '/' it holds (hashing every
	// prefix of a URI of n slashes is quadratic).
	lens     map[string]map[int]int
	sessions map[string]*sessionState
	n        int // number of recorded subscriptions
}

// New returns an empty registry. maxPerSession bounds how much memory and
// backend traffic one misbehaving agent can cause; <= 0 disables the bound.
func New(maxPerSession int) *Registry {
	if maxPerSession < 0 {
		maxPerSession = 0
	}
	return &Registry{
		limit:    maxPerSession,
		backends: make(map[string]map[string]*entry),
		lens:     make(map[string]map[int]int),
		sessions: make(map[string]*sessionState),
	}
}

// Limit reports the per-session bound so callers can advertise it; 0 means
// unlimited.
func (r *Registry) Limit() int { return r.limit }

// Subscribe records that session wants updates for uri from backend.
//
// It is idempotent per (session, uri) because agents retry and the protocol
// has no subscription ids: a URI the session already holds returns
// (false, nil) and changes nothing, even at the limit. A new subscription
// beyond the limit returns *LimitError and records nothing.
//
// With mode Forwarded, the backend must be subscribed before anything is
// recorded, so that a failure leaves no trace: if no Forwarded holder of
// (backend, uri) exists yet, forward is called first (without the registry
// lock, it is a network call) and its error is returned as is. Concurrent
// calls for the same key wait for the one running forward instead of calling
// it again; if it failed, one of them tries again. A Subscribe that arrives
// while the last holder's unforward is running waits for it and then forwards
// again, so the backend ends up subscribed. forward may be nil (success).
//
// Mixed modes on one key are allowed: LocalOnly holders never cause a
// forward, and the first Forwarded holder forwards even if LocalOnly holders
// already exist (otherwise it would be recorded as Forwarded while the
// backend knows nothing).
//
// forward must not call back into the registry for the same key, since that
// call would wait for forward itself.
func (r *Registry) Subscribe(session, backend, uri string, mode Mode, forward func() error) (added bool, err error) {
	r.mu.Lock()
	for {
		ss := r.sessions[session]
		if ss != nil {
			if _, ok := ss.subs[uri]; ok {
				r.mu.Unlock()
				return false, nil
			}
			if ch, ok := ss.pending[uri]; ok {
				// The same session is already subscribing to uri; its
				// outcome decides ours, so wait and look again.
				r.waitLocked(ch)
				continue
			}
			if r.limit > 0 && len(ss.subs)+len(ss.pending) >= r.limit {
				r.mu.Unlock()
				return false, &LimitError{Limit: r.limit}
			}
		}
		e := r.backends[backend][uri]
		if e != nil && e.busy != nil {
			r.waitLocked(e.busy)
			continue
		}
		if mode != Forwarded || (e != nil && e.fwd > 0) {
			// Nothing to tell the backend: record right away.
			r.addLocked(session, backend, uri, mode, e)
			r.mu.Unlock()
			return true, nil
		}
		return r.forwardAndAdd(session, backend, uri, e, forward)
	}
}

// forwardAndAdd runs forward for a key nobody has forwarded and records the
// subscription if it succeeds. It is entered with r.mu held and returns with
// it released.
func (r *Registry) forwardAndAdd(session, backend, uri string, e *entry, forward func() error) (bool, error) {
	if e == nil {
		e = r.entryLocked(backend, uri)
	}
	ch := make(chan struct{})
	e.busy = ch
	ss := r.sessionLocked(session)
	if ss.pending == nil {
		ss.pending = make(map[string]chan struct{})
	}
	ss.pending[uri] = ch
	r.mu.Unlock()

	// If forward panics, this releases the key and the reservation so that
	// waiters are not blocked forever; the panic then goes on up.
	var err error
	done := false
	defer func() {
		if !done {
			r.mu.Lock()
			r.releaseForward(session, backend, uri, e, ch)
			r.mu.Unlock()
		}
	}()
	if forward != nil {
		err = forward()
	}
	done = true

	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.releaseForward(session, backend, uri, e, ch)
		return false, err
	}
	// Clear busy before adding so addLocked sees a normal entry; waiters are
	// woken by close only after the record exists, so they find it.
	e.busy = nil
	delete(ss.pending, uri)
	if len(ss.pending) == 0 {
		ss.pending = nil
	}
	r.addLocked(session, backend, uri, Forwarded, e)
	close(ch)
	return true, nil
}

// releaseForward undoes the bookkeeping of a forward that did not succeed.
// Called with r.mu held.
func (r *Registry) releaseForward(session, backend, uri string, e *entry, ch chan struct{}) {
	e.busy = nil
	close(ch)
	r.dropEntryIfUnused(backend, uri, e)
	if ss := r.sessions[session]; ss != nil {
		delete(ss.pending, uri)
		if len(ss.pending) == 0 {
			ss.pending = nil
		}
		r.dropSessionIfUnused(session, ss)
	}
}

// Unsubscribe removes (session, uri). A URI the session does not hold
// returns (false, nil): agents may unsubscribe twice and that is not an
// error worth reporting.
//
// When the removed subscription was the last Forwarded holder of its key,
// unforward(backend) is called without the registry lock. The key stays
// marked busy meanwhile, so a Subscribe arriving during the unforward waits
// and then forwards again rather than being silently undone. The record is
// gone even if unforward fails (the agent asked to stop, and keeping it would
// send it updates it no longer wants); the error is returned for logging.
// unforward may be nil.
func (r *Registry) Unsubscribe(session, uri string, unforward func(backend string) error) (removed bool, err error) {
	r.mu.Lock()
	var s *Sub
	for {
		ss := r.sessions[session]
		if ss == nil {
			r.mu.Unlock()
			return false, nil
		}
		if ch, ok := ss.pending[uri]; ok {
			// A Subscribe for this URI is still forwarding. Wait for it so a
			// quick subscribe+unsubscribe does not leave the subscription in
			// place.
			r.waitLocked(ch)
			continue
		}
		if s = ss.subs[uri]; s == nil {
			r.mu.Unlock()
			return false, nil
		}
		break
	}
	e, last := r.removeLocked(s)
	if !last {
		r.mu.Unlock()
		return true, nil
	}
	ch := make(chan struct{})
	e.busy = ch
	r.mu.Unlock()

	defer r.releaseUnforward(s.Backend, s.URI, e, ch)
	if unforward != nil {
		err = unforward(s.Backend)
	}
	return true, err
}

// releaseUnforward ends the busy period of a key after its unforward, and
// drops the entry if nobody subscribed meanwhile. Takes r.mu itself.
func (r *Registry) releaseUnforward(backend, uri string, e *entry, ch chan struct{}) {
	r.mu.Lock()
	e.busy = nil
	close(ch)
	r.dropEntryIfUnused(backend, uri, e)
	r.mu.Unlock()
}

// EndSession forgets everything session held, for a disconnected agent.
// unforward(backend, uri) is called for every key whose last Forwarded holder
// this was, one at a time and without the registry lock; their errors are
// joined so one failing backend does not hide the others. The removed subs
// are returned sorted by URI, e.g. for logging. Subscribes of the session that
// are still forwarding are waited for first, so none survives the call.
func (r *Registry) EndSession(session string, unforward func(backend, uri string) error) ([]Sub, error) {
	r.mu.Lock()
	var ss *sessionState
	for {
		ss = r.sessions[session]
		if ss == nil {
			r.mu.Unlock()
			return nil, nil
		}
		if len(ss.pending) == 0 {
			break
		}
		for _, ch := range ss.pending {
			r.waitLocked(ch)
			break
		}
	}

	type job struct {
		backend, uri string
		e            *entry
		ch           chan struct{}
	}
	var jobs []job
	removed := make([]Sub, 0, len(ss.subs))
	for _, s := range ss.subs {
		removed = append(removed, *s)
		if e, last := r.removeLocked(s); last {
			ch := make(chan struct{})
			e.busy = ch
			jobs = append(jobs, job{s.Backend, s.URI, e, ch})
		}
	}
	r.mu.Unlock()

	slices.SortFunc(removed, func(a, b Sub) int { return strings.Compare(a.URI, b.URI) })
	slices.SortFunc(jobs, func(a, b job) int {
		if c := strings.Compare(a.backend, b.backend); c != 0 {
			return c
		}
		return strings.Compare(a.uri, b.uri)
	})

	// Release each key as soon as its own unforward is done, so subscribers
	// to it need not wait for the rest. The deferred loop also releases keys
	// left over if an unforward panics.
	next := 0
	defer func() {
		for ; next < len(jobs); next++ {
			j := jobs[next]
			r.releaseUnforward(j.backend, j.uri, j.e, j.ch)
		}
	}()
	var errs []error
	for ; next < len(jobs); next++ {
		j := jobs[next]
		if unforward != nil {
			if err := unforward(j.backend, j.uri); err != nil {
				errs = append(errs, err)
			}
		}
		r.releaseUnforward(j.backend, j.uri, j.e, j.ch)
	}
	return removed, errors.Join(errs...)
}

// Subscribers returns the sessions that must get a backend's
// notifications/resources/updated for uri: those holding (backend, uri)
// itself and those holding a parent of it, because a change inside a
// subscribed directory-like resource is a change to it as well. A parent is
// a proper prefix of uri ending at a '/' boundary: uri == parent+"/"+rest or,
// when parent ends with '/', uri == parent+rest, rest non-empty.
//
// This runs for every notification, so it looks up only the prefixes that
// end at a '/' and have the length of some held key: its cost is linear in
// len(uri), whatever the URI holds. The result is sorted and deduplicated so
// the fan-out order is deterministic.
func (r *Registry) Subscribers(backend, uri string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	uris := r.backends[backend]
	if len(uris) == 0 {
		return nil
	}
	lens := r.lens[backend]
	var out []string
	collect := func(e *entry) {
		for s := range e.holders.all() {
			out = append(out, s.Session)
		}
	}
	if e := uris[uri]; e != nil {
		collect(e)
	}
	// Only slashes followed by something can end a parent (rest must be
	// non-empty), hence len(uri)-1.
	for i := 0; i < len(uri)-1; i++ {
		if uri[i] != '/' {
			continue
		}
		if lens[i] > 0 {
			if e := uris[uri[:i]]; e != nil { // parent + "/" + rest
				collect(e)
			}
		}
		if lens[i+1] > 0 {
			if e := uris[uri[:i+1]]; e != nil { // parent ending in "/" + rest
				collect(e)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Session lists what one session holds, sorted by URI, e.g. to answer a
// status request or to decide what to clean up.
func (r *Registry) Session(session string) []Sub {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ss := r.sessions[session]
	if ss == nil {
		return nil
	}
	out := make([]Sub, 0, len(ss.subs))
	for _, s := range ss.subs {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Sub) int { return strings.Compare(a.URI, b.URI) })
	return out
}

// Backend lists everything held on one backend, sorted by URI then session,
// so that after a backend restart the mux can re-subscribe (and the order is
// reproducible in logs and tests).
func (r *Registry) Backend(backend string) []Sub {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []Sub
	for _, e := range r.backends[backend] {
		for s := range e.holders.all() {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, compareURISession)
	return out
}

// ForwardedURIs lists the distinct URIs the backend should currently be
// subscribed to, which is exactly what a restarted backend must be sent
// again; LocalOnly keys are left out because the backend never knew them.
func (r *Registry) ForwardedURIs(backend string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for uri, e := range r.backends[backend] {
		if e.fwd > 0 {
			out = append(out, uri)
		}
	}
	slices.Sort(out)
	return out
}

// All lists every subscription sorted by session then URI, for status dumps.
func (r *Registry) All() []Sub {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Sub, 0, r.n)
	for _, ss := range r.sessions {
		for _, s := range ss.subs {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b Sub) int {
		if c := strings.Compare(a.Session, b.Session); c != 0 {
			return c
		}
		return strings.Compare(a.URI, b.URI)
	})
	return out
}

// Len is the number of recorded subscriptions, kept as a counter so metrics
// can read it without walking the maps.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.n
}

// Count tells how many sessions hold exactly (backend, uri), e.g. to show
// how shared a backend subscription is.
func (r *Registry) Count(backend, uri string) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e := r.backends[backend][uri]; e != nil {
		return e.holders.len()
	}
	return 0
}

func compareURISession(a, b Sub) int {
	if c := strings.Compare(a.URI, b.URI); c != 0 {
		return c
	}
	return strings.Compare(a.Session, b.Session)
}

// waitLocked releases r.mu until ch is closed and takes it again. Callers
// must re-check everything afterwards because the world may have changed.
func (r *Registry) waitLocked(ch chan struct{}) {
	r.mu.Unlock()
	<-ch
	r.mu.Lock()
}

// entryLocked returns the entry for (backend, uri), creating it.
func (r *Registry) entryLocked(backend, uri string) *entry {
	uris := r.backends[backend]
	if uris == nil {
		uris = make(map[string]*entry)
		r.backends[backend] = uris
	}
	e := uris[uri]
	if e == nil {
		e = &entry{}
		uris[uri] = e
		lens := r.lens[backend]
		if lens == nil {
			lens = make(map[int]int)
			r.lens[backend] = lens
		}
		lens[len(uri)]++
	}
	return e
}

// sessionLocked returns the state of session, creating it.
func (r *Registry) sessionLocked(name string) *sessionState {
	ss := r.sessions[name]
	if ss == nil {
		ss = &sessionState{subs: make(map[string]*Sub)}
		r.sessions[name] = ss
	}
	return ss
}

// addLocked records a subscription the caller has already validated.
func (r *Registry) addLocked(session, backend, uri string, mode Mode, e *entry) {
	if e == nil {
		e = r.entryLocked(backend, uri)
	}
	s := &Sub{Session: session, Backend: backend, URI: uri, Since: time.Now(), Mode: mode}
	e.holders.add(s)
	if mode == Forwarded {
		e.fwd++
	}
	r.sessionLocked(session).subs[uri] = s
	r.n++
}

// removeLocked deletes s everywhere. last reports that s was the final
// Forwarded holder of its key, i.e. the backend must now be unsubscribed; in
// that case the entry is kept (the caller marks it busy) and returned.
func (r *Registry) removeLocked(s *Sub) (e *entry, last bool) {
	if ss := r.sessions[s.Session]; ss != nil {
		delete(ss.subs, s.URI)
		r.dropSessionIfUnused(s.Session, ss)
	}
	r.n--
	e = r.backends[s.Backend][s.URI]
	e.holders.remove(s.Session)
	if s.Mode == Forwarded {
		e.fwd--
		if e.fwd == 0 {
			return e, true
		}
	}
	r.dropEntryIfUnused(s.Backend, s.URI, e)
	return e, false
}

// dropEntryIfUnused deletes an entry nobody holds or waits on, so the maps
// shrink back to empty instead of accumulating dead keys.
func (r *Registry) dropEntryIfUnused(backend, uri string, e *entry) {
	if e.holders.len() > 0 || e.busy != nil {
		return
	}
	uris := r.backends[backend]
	if uris[uri] != e {
		return
	}
	delete(uris, uri)
	if len(uris) == 0 {
		delete(r.backends, backend)
	}
	lens := r.lens[backend]
	if lens[len(uri)]--; lens[len(uri)] == 0 {
		delete(lens, len(uri))
	}
	if len(lens) == 0 {
		delete(r.lens, backend)
	}
}

// dropSessionIfUnused deletes the state of a session with nothing left.
func (r *Registry) dropSessionIfUnused(name string, ss *sessionState) {
	if len(ss.subs) == 0 && len(ss.pending) == 0 && r.sessions[name] == ss {
		delete(r.sessions, name)
	}
}

package backends

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Pool lets the clients of one process share a running backend: the
// shared mcp-mux serves sessions whose views differ (another profile,
// another backend's environment) with a Mux each, and a backend that would
// run alike for them (Identity) runs once. Each client gets a Backend of
// its own, a view: its hooks hear what the backend sends, its Stop detaches
// it, and the process stops with the last view. What one client does to the
// backend that another would undo is counted: resources/subscribe and
// unsubscribe (the backend hears the first and the last), and
// logging/setLevel (the most verbose wins).
//
// What the backend asks its client goes to one view only: roots/list to
// all of them, and the backend keeps the views whose agents give the same
// roots (one instance per set of roots: the others move to one of their
// own, ErrMoved); sampling and elicitation to the one view with an agent
// request in flight (Hooks.Agents), refused when that is ambiguous.
type Pool struct {
	mu      sync.Mutex
	entries map[string]*pooled
	// rooted: identities (with capabilities) whose backend asked for
	// roots, so that a view joins the instance of its own roots.
	rooted map[string]bool
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{entries: map[string]*pooled{}, rooted: map[string]bool{}}
}

// ErrMoved is a view's Err once the pool moved it off its backend: its
// agents give other roots than the backend's other clients. Start it again:
// it gets the instance of its roots. It is no crash.
var ErrMoved = errors.New("moved to the instance of its agents' roots")

// pooled is one running backend and its views. Its fields are guarded by
// the pool's mu, but b and err, set once before ready is closed.
type pooled struct {
	pool  *Pool
	key   string // in pool.entries
	base  string // identity and capabilities, without roots
	ready chan struct{}
	b     *Backend
	err   error

	views []*Backend     // oldest first
	subs  map[string]int // URI → views holding it
	level mcp.LoggingLevel
	gone  bool // no longer in pool.entries: nothing joins it
}

// view is what a Backend that is a view of a pooled one has of its own.
type view struct {
	e     *pooled
	hooks Hooks
	done  chan struct{} // closed when the view is detached, moved, or the backend is down
	moved bool          // guarded by the pool's mu
	subs  map[string]struct{}
	level mcp.LoggingLevel
}

// Identity names what a backend's process depends on: two specs of one
// identity run alike. The environment counts as what the child gets
// (ChildEnv), the command as the file it resolves to.
func Identity(spec Spec) string {
	s := spec
	env := ChildEnv(spec, spec.Environ)
	slices.Sort(env)
	s.Environ = env
	if s.URL == "" {
		if path, err := CommandPath(spec, spec.Environ); err == nil {
			s.Command = path
		}
	}
	sum := sha256.New()
	json.NewEncoder(sum).Encode(s)
	return hex.EncodeToString(sum.Sum(nil))
}

// Start is the package's Start for a backend of identity ident: a view of
// the running one, if a client with the same declared capabilities (and,
// for a backend that asks for roots, the same roots) started it; else a new
// one. An empty ident shares nothing.
func (p *Pool) Start(ctx context.Context, ident string, spec Spec, opts Options) (*Backend, error) {
	if ident == "" {
		return Start(ctx, spec, opts)
	}
	var caps *mcp.ClientCapabilities
	if opts.ClientCapabilities != nil {
		caps = opts.ClientCapabilities(ctx)
	}
	capsJSON, _ := json.Marshal(declared(caps))
	base := ident + "\x00" + string(capsJSON)
	for {
		key := base
		p.mu.Lock()
		rooted := p.rooted[base]
		p.mu.Unlock()
		if rooted && opts.Hooks.Roots != nil {
			key = base + "\x00" + rootsKey(askRoots(ctx, opts.Hooks.Roots))
		}
		p.mu.Lock()
		e := p.entries[key]
		if e == nil {
			e = &pooled{pool: p, key: key, base: base, ready: make(chan struct{}), subs: map[string]int{}}
			p.entries[key] = e
			p.mu.Unlock()
			return e.start(ctx, spec, opts, caps)
		}
		p.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if v := e.join(opts.Hooks); v != nil {
			return v, nil
		}
		// It failed to start, or is ending: start (or join) the next.
	}
}

// start runs the backend of e with hooks that hear for every view, and
// makes the first view.
func (e *pooled) start(ctx context.Context, spec Spec, opts Options, caps *mcp.ClientCapabilities) (*Backend, error) {
	mine := opts.Hooks
	opts.ClientCapabilities = func(context.Context) *mcp.ClientCapabilities { return caps }
	opts.Hooks = e.hooks()
	// The backend outlives the client that started it: only its start is
	// bounded (StartupTimeout), not by that client's life.
	b, err := Start(context.WithoutCancel(ctx), spec, opts)
	p := e.pool
	p.mu.Lock()
	e.b, e.err = b, err
	close(e.ready)
	if err != nil {
		e.leaveLocked()
		p.mu.Unlock()
		return nil, err
	}
	v := e.attachLocked(mine)
	p.mu.Unlock()
	go func() {
		<-b.done
		p.mu.Lock()
		e.leaveLocked()
		views := e.views
		e.views = nil
		p.mu.Unlock()
		for _, v := range views {
			v.view.closeDone()
		}
	}()
	return v, nil
}

// join makes a view of e's backend, or nil if it is not there to join.
func (e *pooled) join(h Hooks) *Backend {
	p := e.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.err != nil || e.gone {
		return nil
	}
	select {
	case <-e.b.done:
		return nil
	default:
	}
	return e.attachLocked(h)
}

func (e *pooled) attachLocked(h Hooks) *Backend {
	v := &Backend{Spec: e.b.Spec, of: e.b, view: &view{e: e, hooks: h, done: make(chan struct{}), subs: map[string]struct{}{}}}
	e.views = append(e.views, v)
	return v
}

// leaveLocked takes e out of the pool: nothing joins it from now on.
func (e *pooled) leaveLocked() {
	if !e.gone && e.pool.entries[e.key] == e {
		delete(e.pool.entries, e.key)
	}
	e.gone = true
}

func (v *view) closeDone() {
	select {
	case <-v.done:
	default:
		close(v.done)
	}
}

// detach ends view b: it hears nothing more, and what only it held is
// undone (unsubscribed). last: it was the backend's last view, which
// stops with it.
func (b *Backend) detach(moved bool) (last bool) {
	v := b.view
	e := v.e
	p := e.pool
	p.mu.Lock()
	i := slices.Index(e.views, b)
	if i < 0 {
		p.mu.Unlock()
		return false
	}
	e.views = slices.Delete(e.views, i, i+1)
	v.moved = moved
	var drop []string
	for uri := range v.subs {
		if e.subs[uri]--; e.subs[uri] <= 0 {
			delete(e.subs, uri)
			drop = append(drop, uri)
		}
	}
	v.subs = nil
	last = len(e.views) == 0
	if last {
		e.leaveLocked()
	}
	p.mu.Unlock()
	v.closeDone()
	if !last && len(drop) > 0 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, uri := range drop {
				e.b.session.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
			}
		}()
	}
	return last
}

// viewsNow is e's views at this moment, for the hooks.
func (e *pooled) viewsNow() []*Backend {
	e.pool.mu.Lock()
	defer e.pool.mu.Unlock()
	return slices.Clone(e.views)
}

// hooks are the real backend's: what it sends goes to every view, what it
// asks to the view it is for.
func (e *pooled) hooks() Hooks {
	each := func(f func(Hooks)) {
		for _, v := range e.viewsNow() {
			f(v.view.hooks)
		}
	}
	return Hooks{
		ToolsChanged:     func() { each(func(h Hooks) { callHook(h.ToolsChanged) }) },
		PromptsChanged:   func() { each(func(h Hooks) { callHook(h.PromptsChanged) }) },
		ResourcesChanged: func() { each(func(h Hooks) { callHook(h.ResourcesChanged) }) },
		ResourceUpdated: func(p *mcp.ResourceUpdatedNotificationParams) {
			each(func(h Hooks) {
				if h.ResourceUpdated != nil {
					h.ResourceUpdated(p)
				}
			})
		},
		Progress: func(p *mcp.ProgressNotificationParams) {
			each(func(h Hooks) {
				if h.Progress != nil {
					h.Progress(p)
				}
			})
		},
		Log: func(p *mcp.LoggingMessageParams) {
			each(func(h Hooks) {
				if h.Log != nil {
					h.Log(p)
				}
			})
		},
		ElicitationComplete: func(p *mcp.ElicitationCompleteParams) {
			each(func(h Hooks) {
				if h.ElicitationComplete != nil {
					h.ElicitationComplete(p)
				}
			})
		},
		Roots: e.roots,
		CreateMessage: func(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
			v, err := e.askedBy("sampling")
			if err != nil {
				return nil, err
			}
			if v.view.hooks.CreateMessage == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "sampling/createMessage is not supported"}
			}
			return v.view.hooks.CreateMessage(ctx, p)
		},
		Elicit: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			v, err := e.askedBy("elicitation")
			if err != nil {
				return nil, err
			}
			if v.view.hooks.Elicit == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "elicitation/create is not supported"}
			}
			return v.view.hooks.Elicit(ctx, p)
		},
	}
}

func callHook(f func()) {
	if f != nil {
		f()
	}
}

// askedBy is the view a sampling or elicitation request of the backend is
// for: the one whose agents have requests in flight to it, or with none in
// flight anywhere, the one with agents connected. A handshake-era request
// says nothing of the call it serves, so when more than one could be meant
// it is refused rather than put to another user.
func (e *pooled) askedBy(what string) (*Backend, error) {
	views := e.viewsNow()
	if len(views) == 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-mux: no agent session is connected to take the " + what + " request"}
	}
	if len(views) == 1 {
		return views[0], nil
	}
	var busy, live []*Backend
	agents := 0
	for _, v := range views {
		if v.view.hooks.Agents == nil {
			continue
		}
		inFlight, connected := v.view.hooks.Agents()
		if inFlight > 0 {
			busy = append(busy, v)
			agents += inFlight
		}
		if connected > 0 {
			live = append(live, v)
		}
	}
	fix := fmt.Sprintf("share = \"never\" for %q gives each session its own instance", e.b.Spec.Name)
	switch {
	case len(busy) == 1:
		return busy[0], nil
	case len(busy) > 1:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: %d agent sessions have requests in flight to backend %q, so mcp-mux cannot tell which of them to ask for this %s request; %s", agents, e.b.Spec.Name, what, fix)}
	case len(live) == 1:
		return live[0], nil
	case len(live) > 1:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: no request of an agent is in flight to backend %q and agents of %d sessions are connected, so mcp-mux cannot tell which of them to ask for this %s request; %s", e.b.Spec.Name, len(live), what, fix)}
	}
	return views[0], nil
}

// rootsAskWait bounds a view's answer when the pool asks for its roots.
const rootsAskWait = 10 * time.Second

// roots answers the backend's roots/list with the roots of its oldest view
// that gives some,
// and moves every view whose agents give other roots to an instance of
// their own: a server such as server-filesystem allows what its client's
// roots say to every client it serves.
func (e *pooled) roots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	views := e.viewsNow()
	if len(views) == 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-mux: no agent session is connected to give roots"}
	}
	type answer struct {
		res *mcp.ListRootsResult
		err error
	}
	answers := make([]answer, len(views))
	var wg sync.WaitGroup
	for i, v := range views {
		wg.Go(func() {
			if v.view.hooks.Roots == nil {
				answers[i].err = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "roots/list is not supported"}
				return
			}
			actx, cancel := context.WithTimeout(ctx, rootsAskWait)
			defer cancel()
			answers[i].res, answers[i].err = v.view.hooks.Roots(actx, p)
		})
	}
	wg.Wait()
	// The oldest view that could answer keeps the instance (a view whose
	// agents could not say would otherwise move everyone else).
	first := max(slices.IndexFunc(answers, func(a answer) bool { return a.err == nil }), 0)
	keep := rootsKey(answers[first].res, answers[first].err)
	pool := e.pool
	pool.mu.Lock()
	pool.rooted[e.base] = true
	if !e.gone && pool.entries[e.key] == e {
		// From now on the instance is found by its roots.
		delete(pool.entries, e.key)
		e.key = e.base + "\x00" + keep
		if _, taken := pool.entries[e.key]; taken {
			e.gone = true
		} else {
			pool.entries[e.key] = e
		}
	}
	pool.mu.Unlock()
	for i, v := range views {
		if rootsKey(answers[i].res, answers[i].err) != keep {
			e.b.log.Info("an agent gives other roots than the others sharing this backend: it moves to an instance of its own")
			v.detach(true)
		}
	}
	return answers[first].res, answers[first].err
}

// askRoots is a view-to-be's roots, to find the instance it joins.
func askRoots(ctx context.Context, ask func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error)) (*mcp.ListRootsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, rootsAskWait)
	defer cancel()
	return ask(ctx, &mcp.ListRootsParams{})
}

// rootsKey names a set of roots (an error gives none).
func rootsKey(res *mcp.ListRootsResult, err error) string {
	if err != nil || res == nil {
		return "none"
	}
	uris := make([]string, 0, len(res.Roots))
	for _, r := range res.Roots {
		if r != nil {
			uris = append(uris, r.URI)
		}
	}
	slices.Sort(uris)
	return "roots:" + strings.Join(uris, "\x00")
}

// Subscribe sends resources/subscribe, unless another view of the backend
// already holds uri (then the backend already sends its updates).
func (b *Backend) Subscribe(ctx context.Context, p *mcp.SubscribeParams) error {
	v := b.view
	if v == nil {
		return b.session.Subscribe(ctx, p)
	}
	pool := v.e.pool
	pool.mu.Lock()
	_, mine := v.subs[p.URI]
	first := !mine && v.subs != nil && v.e.subs[p.URI] == 0
	if !mine && v.subs != nil {
		v.subs[p.URI] = struct{}{}
		v.e.subs[p.URI]++
	}
	pool.mu.Unlock()
	if !first {
		return nil
	}
	err := b.of.session.Subscribe(ctx, p)
	if err != nil {
		pool.mu.Lock()
		if _, ok := v.subs[p.URI]; ok {
			delete(v.subs, p.URI)
			if v.e.subs[p.URI]--; v.e.subs[p.URI] <= 0 {
				delete(v.e.subs, p.URI)
			}
		}
		pool.mu.Unlock()
	}
	return err
}

// Unsubscribe sends resources/unsubscribe once no view of the backend holds
// uri any more.
func (b *Backend) Unsubscribe(ctx context.Context, p *mcp.UnsubscribeParams) error {
	v := b.view
	if v == nil {
		return b.session.Unsubscribe(ctx, p)
	}
	pool := v.e.pool
	pool.mu.Lock()
	_, mine := v.subs[p.URI]
	last := false
	if mine {
		delete(v.subs, p.URI)
		if v.e.subs[p.URI]--; v.e.subs[p.URI] <= 0 {
			delete(v.e.subs, p.URI)
			last = true
		}
	}
	pool.mu.Unlock()
	if !last {
		return nil
	}
	return b.of.session.Unsubscribe(ctx, p)
}

// levelRank orders logging levels from the most verbose.
var levelRank = map[mcp.LoggingLevel]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// SetLoggingLevel sends logging/setLevel; of a backend's views, the most
// verbose level any of them set is the one it is told.
func (b *Backend) SetLoggingLevel(ctx context.Context, level mcp.LoggingLevel) error {
	v := b.view
	if v == nil {
		return b.session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level})
	}
	pool := v.e.pool
	pool.mu.Lock()
	v.level = level
	want := level
	for _, o := range v.e.views {
		if l := o.view.level; l != "" {
			if r, ok := levelRank[l]; ok && r < levelRank[want] {
				want = l
			}
		}
	}
	same := want == v.e.level
	v.e.level = want
	pool.mu.Unlock()
	if same {
		return nil
	}
	return b.of.session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: want})
}

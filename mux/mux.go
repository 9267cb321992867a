// Package mux is the upstream side of mcp-mux: one MCP server that merges the
// catalogs of many backends, routes each request to the backend that owns it,
// and fans notifications out to the client sessions that asked for them.
//
// Reading order: server.go (every request's route: the two doors, the
// middleware chain and the method switches), route.go and
// subscriptions.go (find the owner), forward.go (the one pipeline every
// forwarded request takes), passthrough.go (the stdio door's bytes),
// era.go (what the current protocol era requires of results), mux.go
// (lifecycle, sessions), member.go and supervise.go (one backend's state,
// catalog and restarts), catalog.go and lists.go (the merged view),
// notify.go, logging.go, clientreq.go and listen.go (what goes to the
// agent on mux's or a backend's initiative), http.go (the HTTP door's
// sessions), reload.go and watch.go (a changed config applied while
// serving). The agent's transports are mux/door; the config file is read
// by mux/config.
package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/catalogmem"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/mux/instance"
	"github.com/mcp-mux/mcp-mux/mux/outq"
	"github.com/mcp-mux/mcp-mux/mux/tracing"
	"github.com/mcp-mux/mcp-mux/subs"
)

// protocolVersions are the revisions the upstream server speaks: the
// current era (2026-07-28: server/discover, per-request _meta,
// subscriptions/listen; see listen.go) and the handshake era.
var protocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Mux is the merged server. Create it with New, start its backends with
// Start, attach client sessions with Connect or Serve, and Close it.
type Mux struct {
	cfg     *config.File
	log     *log.Logger
	version string
	// warned holds the filter warnings logged (logFilterWarnings): each
	// once per start.
	warned sync.Map

	server *mcp.Server
	// serverInfo is the server's name as JSON, for results the go-sdk
	// does not encode (eraResult).
	serverInfo json.RawMessage
	// serverInfoMember is serverInfo as the member of a _meta that names
	// the server (era.go).
	serverInfoMember []byte
	// clientInfo is how mux names itself to backends.
	clientInfo *mcp.Implementation
	// send is the go-sdk's sending chain below our middleware: the only way
	// to send one session an arbitrary notification (the SDK has no public
	// call for it).
	send mcp.MethodHandler

	// roster is the enabled backends of the config in effect; a reload
	// publishes a new one (reload.go), so read it once per job: members().
	roster atomic.Pointer[roster]
	// conf is the config in effect: what reloads compare against, and
	// where the [mux] settings that change live are read (settings()).
	// m.cfg keeps those in effect since the start.
	conf     atomic.Pointer[loadedConfig]
	reloadMu sync.Mutex // one reload at a time
	watch    *watcher   // the config file's watcher, if WatchConfig started one

	first firstList // the first list's bounded wait for backends still starting

	subs  *subs.Registry
	cat   catalogHolder
	lists *listNotifier

	// backoffBase is the first restart delay (tests shorten it).
	backoffBase time.Duration

	ctx    context.Context // ends at Close: owns every goroutine below
	cancel context.CancelFunc
	wg     sync.WaitGroup

	agent agentState // the agent's capabilities, as backends are told them
	// parked is the requests of handshake-era backends that wait for a
	// current-era agent's input (rounds.go).
	parked parking
	// roots is the roots of the agent of the current era, as mux learned
	// them (roots.go).
	roots agentRoots
	// search is the tool search index of the catalog it was built from,
	// and searchBuilding whether one is being built (toolsearch.go).
	search         atomic.Pointer[toolIndex]
	searchBuilding atomic.Bool
	// instr remembers the backends' instructions across runs (instrcache.go).
	instr *instructionMemory
	// catalogs remembers what each backend offered across runs (lazy.go);
	// memWrites counts its writes in flight, which Exit waits for.
	catalogs *catalogmem.Store
	// born is when New made it: about when its agent, if one started
	// it, began counting its patience (firstListBy).
	born      time.Time
	memWrites sync.WaitGroup
	// exitLearning: Exit waits for backends on their first start to be
	// learned, and lets their writes of the memory through (lazy.go).
	// Guarded by mu.
	exitLearning bool
	// agentMetas are the _meta of stateless requests, decoded (http.go).
	agentMetas door.AgentMetas
	// environ and cwd are the session's the mux serves (WithEnviron);
	// nil and "": mcp-mux's own.
	environ []string
	cwd     string
	// pool, when set (WithPool), shares each backend with the other
	// Muxes of the process whose backend of that name runs alike.
	pool *backends.Pool
	// launch is the profile every session sees (WithProfile), and
	// profileViews the views of the config in effect (profile.go).
	launch       string
	profileViews atomic.Pointer[views]
	// name is the name the agents registered mcp-mux under (WithName),
	// and fitters the tool names of each agent with a name limit
	// (fitnames.go).
	name    string
	fitters map[string]*fitter
	// launchToolList is the tool list every session gets (WithToolList)
	// unless it asks for its own; "": [mux] tool_list.
	launchToolList string
	// obs is the metrics and the audit log (observe.go).
	obs observer
	// tracer makes a span of every forwarded request; nil when tracing
	// is off (traces.go).
	tracer *tracing.Tracer
	// stats counts the requests forwarded to each backend (stats.go).
	stats callStats

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	ids      map[string]*session // by session id
	httpIDs  map[string]*session // HTTP sessions with an Mcp-Session-Id, by it
	// stateless are the sessions of the stateless requests on the HTTP
	// fast path being served (http.go): they have no go-sdk
	// session to key sessions by.
	stateless map[*session]struct{}
	nextID    int
	closed    bool
	// watchEnds is set when sessions come from the HTTP handler: each
	// new one gets a goroutine that cleans it up when it ends.
	watchEnds bool
}

// session is one agent session as mux tracks it.
type session struct {
	id string
	ss *mcp.ServerSession
	// params are what a session without ss (a stateless request on the
	// HTTP fast path: http.go) said of itself in its _meta.
	params *mcp.InitializeParams
	// lastActive is when the agent last sent a request (unix nanoseconds):
	// a backend's roots/list with no request in flight goes to the most
	// recently active session (agentfor.go).
	lastActive atomic.Int64

	mu       sync.Mutex
	logLevel mcp.LoggingLevel       // what the agent set with logging/setLevel; "" until it does
	streams  map[*listenStream]bool // the current era's subscriptions/listen streams (listen.go)
	notes    *outq.Queue            // mux's own notifications to a session that is not stdio (outq.NewNotes)
	ended    bool                   // sessionEnded ran: no queue any more

	// conn is the session's stdio connection, if it is one: mux's own
	// notifications go straight to it (door.Conn.Notify).
	conn atomic.Pointer[door.Conn]

	ahead *listAhead // the resources page fetched for the agent's next cursor (listahead.go); guarded by mu

	working workingSet // the tools it found and called (toolsearch.go)
	// profile is the profile the agent asked for (profile.go); nil: none.
	profile atomic.Pointer[string]
	// fit is the fitter of its agent's tool names (fitnames.go); nil: not
	// decided yet.
	fit atomic.Pointer[fitter]
	// toolList is the tool list an HTTP agent asked for on its requests
	// (door.ToolListHeader or ?tool_list=); "" follows [mux] tool_list.
	toolList atomic.Pointer[string]

	http door.HTTPSession // an HTTP session's requests, as its door tracks them
	// announced: its start was logged (initialize), and so is its end.
	announced atomic.Bool
	// pid is the process it came from, if not this one (StdioOptions.PID);
	// used the backends it sent requests to (a sync.Map of names), for
	// status.
	pid  atomic.Int32
	used sync.Map
	// listBy is when its first list must be answered at the latest, for
	// an agent that does not wait (unix nanoseconds; 0: first_list_wait
	// alone bounds it). See firstList.
	listBy atomic.Int64
}

// initParams is what the agent of s said of itself: its initialize, or a
// stateless request's _meta.
func (s *session) initParams() *mcp.InitializeParams {
	if s.ss == nil {
		return s.params
	}
	return s.ss.InitializeParams()
}

// isEnded reports whether s ended.
func (s *session) isEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// deliver sends s a notification of mux's own: straight to a stdio
// connection, else through the go-sdk from the session's own queue. It
// never blocks.
func (m *Mux) deliver(s *session, method string, params mcp.Params) {
	if c := s.conn.Load(); c != nil {
		m.notified(method)
		if err := c.Notify(method, params); err != nil {
			m.log.Debug("notification not delivered", "method", method, "session", s.id, "err", err)
		}
		return
	}
	if s.ss == nil {
		return // a stateless request's: nothing to send it on but its own stream
	}
	m.notified(method)
	m.enqueue(s, method, params, func(ctx context.Context) error {
		_, err := m.send(ctx, method, &mcp.ServerRequest[mcp.Params]{Session: s.ss, Params: params})
		return err
	})
}

// deliverFor is deliver for a notification about the agent's request of
// ctx (its progress): over HTTP it goes on that request's response stream,
// where a client that opened no other stream expects it.
func (m *Mux) deliverFor(ctx context.Context, s *session, method string, params mcp.Params) {
	if hs := door.StreamOf(ctx); hs != nil { // a request on the HTTP fast path (http.go)
		m.notified(method)
		hs.Notify(method, params)
		return
	}
	if s.conn.Load() != nil || s.ss == nil {
		m.deliver(s, method, params)
		return
	}
	m.notified(method)
	m.enqueue(s, method, params, func(sctx context.Context) error {
		_, err := m.send(valuesOf{sctx, ctx}, method, &mcp.ServerRequest[mcp.Params]{Session: s.ss, Params: params})
		return err
	})
}

// enqueue queues a notification for s, a session that is not stdio, which
// send sends. Nothing is queued for a session that ended.
func (m *Mux) enqueue(s *session, method string, params mcp.Params, send func(context.Context) error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	q := s.notes
	if q == nil {
		q = outq.NewNotes(m.log, s.id)
		s.notes = q
	}
	s.mu.Unlock()
	start, err := q.PushNote(method, params, send)
	if err != nil {
		m.log.Debug("notification not delivered", "method", method, "session", s.id, "err", err)
	}
	if start {
		// Outside s.mu: goOwned takes m.mu, which is taken before s.mu
		// elsewhere.
		m.goOwned(func() { q.SendLoop(m.ctx) })
	}
}

// New builds the merged server for cfg. Nothing runs until Start.
func New(cfg *config.File, logger *log.Logger, version string, opts ...Option) *Mux {
	var o Mux
	for _, opt := range opts {
		opt(&o)
	}
	cfg = onlyProfile(cfg, o.launch)
	cp := *cfg
	cp.Mux.FillDefaults()
	cfg = &cp
	ctx, cancel := context.WithCancel(context.Background())
	catalogs, err := openCatalogs()
	if err != nil {
		logger.Warn(err.Error())
	}
	if o.name == "" {
		o.name = DefaultName
	}
	m := &Mux{
		born:     time.Now(),
		launch:   o.launch,
		environ:  o.environ,
		cwd:      o.cwd,
		pool:     o.pool,
		name:     o.name,
		fitters:  newFitters(o.name),
		instr:    newInstructionMemory(),
		catalogs: catalogs,
		cfg:      cfg,
		log:      logger,
		version:  version,
		ctx:      ctx,
		cancel:   cancel,
		sessions: map[*mcp.ServerSession]*session{},
		ids:      map[string]*session{},
		subs:     subs.New(cfg.Mux.MaxSubscriptions),
		parked:   parking{seal: instance.ForConfig(cfg)},

		backoffBase: defaultBackoff,
	}
	m.launchToolList = o.launchToolList
	m.conf.Store(&loadedConfig{cfg: cfg, generation: 1, loaded: time.Now()})
	m.startObserving(cfg)
	r := &roster{byName: map[string]*member{}}
	for _, spec := range cfg.Backends {
		if spec.Disabled {
			logger.Info("backend disabled in config", "backend", spec.Name)
			continue
		}
		r.add(newMember(m, spec))
	}
	logBroken(logger, cfg)
	m.roster.Store(r)
	m.cat.rebuild(m)
	m.lists = newListNotifier(m)

	impl := &mcp.Implementation{Name: cfg.Mux.Name, Title: "mcp-mux: many MCP servers as one", Version: version}
	info, _ := json.Marshal(impl)
	m.setServerInfo(info)
	m.clientInfo = &mcp.Implementation{Name: "mcp-mux", Version: version}
	m.server = mcp.NewServer(impl, &mcp.ServerOptions{
		Logger: sdkLogger(logger),
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Completions: &mcp.CompletionCapabilities{},
			Logging:     &mcp.LoggingCapabilities{},
		},
		SubscribeHandler:          m.subscribe,
		RootsListChangedHandler:   m.rootsListChanged,
		InitializedHandler:        m.initialized,
		UnsubscribeHandler:        m.unsubscribe,
		SupportedProtocolVersions: protocolVersions,
	})
	m.routes()
	return m
}

// Server is the underlying go-sdk server.
func (m *Mux) Server() *mcp.Server { return m.server }

// Start starts every enabled backend concurrently and returns at once; the
// first list waits for them, up to first_list_wait (waitStarted).
func (m *Mux) Start() {
	m.restRemembered(m.members())
	m.logFilterWarnings()
	local := false
	for _, mem := range m.members() {
		local = local || mem.spec.URL == ""
		m.startMember(mem)
	}
	if !local {
		backends.DiscardStandby()
	}
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.lists.loop() }()
}

// startMember runs mem's lifecycle (and its poller) until mem.ctx ends.
func (m *Mux) startMember(mem *member) {
	m.goOwned(mem.run)
	if mem.spec.PollInterval.Duration > 0 {
		m.goOwned(mem.pollLoop)
	}
}

// roster is the enabled backends of one config generation, in config order
// (= precedence). It is never changed once published.
type roster struct {
	members []*member
	byName  map[string]*member
}

func (r *roster) add(mem *member) {
	r.members = append(r.members, mem)
	r.byName[mem.spec.Name] = mem
}

// members is the enabled backends now, in config order (= precedence).
func (m *Mux) members() []*member { return m.roster.Load().members }

// memberNamed is the enabled backend called name now, if any.
func (m *Mux) memberNamed(name string) (*member, bool) {
	mem, ok := m.roster.Load().byName[name]
	return mem, ok
}

// loadedConfig is a config in effect and which one it is.
type loadedConfig struct {
	cfg        *config.File
	generation int       // 1 at start, +1 per applied reload
	loaded     time.Time // when it was read
}

// settings is the [mux] table in effect: read the live settings (see
// liveSettings in reload.go) here, the others from m.cfg.
func (m *Mux) settings() *config.Settings { return &m.conf.Load().cfg.Mux }

// Connect attaches one client session over t. When the session ends, its
// state (subscriptions) is cleaned up.
func (m *Mux) Connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, error) {
	ss, err := m.server.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	m.attach(ss, t)
	m.goOwned(func() {
		ss.Wait()
		m.sessionEnded(ss)
	})
	return ss, nil
}

// Serve runs one client session over t (stdio) until the client goes away
// or ctx ends, then cleans the session up. It does not stop the backends:
// Close does.
func (m *Mux) Serve(ctx context.Context, t mcp.Transport) error {
	ss, err := m.server.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	m.attach(ss, t)
	waitErr := make(chan error, 1)
	go func() { waitErr <- ss.Wait() }()
	select {
	case err = <-waitErr:
	case <-ctx.Done():
		// ss.Close would first wait for the requests in flight, which may
		// wait on backends or on an agent that does not read. Ending the
		// connection instead makes the go-sdk cancel them at once.
		if st, ok := t.(*door.StdioTransport); ok {
			st.CloseConn()
		} else {
			ss.Close()
		}
		err = <-waitErr
	}
	m.sessionEnded(ss)
	return err
}

// attach records a new session and, for a stdio one, its connection.
func (m *Mux) attach(ss *mcp.ServerSession, t mcp.Transport) {
	s := m.session(ss)
	if st, ok := t.(*door.StdioTransport); ok {
		c := st.Conn()
		s.conn.Store(c)
		s.pid.Store(int32(st.PID()))
		p := &passThrough{m: m, s: s, c: c}
		c.SetPassThrough(p.take, p.idle)
	}
}

// session returns mux's record of ss, making it on first sight.
func (m *Mux) session(ss *mcp.ServerSession) *session {
	return m.sessionIn(nil, ss)
}

// sessionIn is session for a request whose context is ctx: a session
// made for a stateless request is ended by the HTTP door once the request
// is over (door.AtRequestEnd), not watched.
func (m *Mux) sessionIn(ctx context.Context, ss *mcp.ServerSession) *session {
	m.mu.Lock()
	s, ok := m.sessions[ss]
	if !ok {
		m.nextID++
		s = &session{id: fmt.Sprintf("s%d", m.nextID), ss: ss}
		s.http.Touch()
		m.sessions[ss] = s
		m.ids[s.id] = s
		if sid := ss.ID(); sid != "" {
			if m.httpIDs == nil {
				m.httpIDs = map[string]*session{}
			}
			m.httpIDs[sid] = s
		}
		m.log.Debug("client session started", "session", s.id)
	}
	// The go-sdk's HTTP handler makes sessions that Connect and Serve
	// never see. A session with an Mcp-Session-Id ends where mux sees it
	// (a DELETE, idleSessions, ServeHTTP's end: http.go),
	// saving a goroutine per idle session; a request of the current era
	// (no id) ends with the request, watched from here.
	watch := !ok && m.watchEnds && ss.ID() == ""
	m.mu.Unlock()
	if watch && ctx != nil && door.AtRequestEnd(ctx, func() { m.sessionEnded(ss) }) {
		watch = false
	}
	if watch {
		m.goOwned(func() {
			ss.Wait()
			m.sessionEnded(ss)
		})
	}
	return s
}

// sessionID names a session for the subscription registry and logs.
func (m *Mux) sessionID(ss *mcp.ServerSession) string { return m.session(ss).id }

// sessionRecord is the session named id, or nil once it ended.
func (m *Mux) sessionRecord(id string) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ids[id]
}

// liveSessions lists the sessions that are initialized (notifications before
// that would break the protocol).
func (m *Mux) liveSessions() []*session {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*session
	for ss, s := range m.sessions {
		if ss.InitializeParams() != nil {
			out = append(out, s)
		}
	}
	for s := range m.stateless {
		out = append(out, s)
	}
	return out
}

func (m *Mux) sessionEnded(ss *mcp.ServerSession) {
	m.mu.Lock()
	s, ok := m.sessions[ss]
	delete(m.sessions, ss)
	if ok {
		delete(m.ids, s.id)
		if m.httpIDs[ss.ID()] == s {
			delete(m.httpIDs, ss.ID())
		}
	}
	m.mu.Unlock()
	if !ok {
		return
	}
	s.http.End()
	s.mu.Lock()
	s.ended = true
	q := s.notes
	s.mu.Unlock()
	if q != nil {
		q.Close()
	}
	s.dropAhead()
	m.log.Debug("client session ended", "session", s.id)
	if s.announced.Load() {
		// A request of the current era over HTTP is a session of its
		// own: one line each would flood the log.
		m.logSession(s, "ended")
	}
	m.endSessionSubscriptions(s.id)
	m.rootsSessionsChanged(s, false)
}

// goOwned runs f in a goroutine that Close waits for; after Close it does
// not run f at all, and reports false.
func (m *Mux) goOwned(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// own counts work of the caller's goroutine as Close's to wait for, as
// goOwned does a goroutine's, reporting false after Close; the caller
// calls m.wg.Done when it is over.
func (m *Mux) own() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	return true
}

func (m *Mux) startOptions(mem *member) backends.Options {
	return backends.Options{
		Logger:         m.log,
		StartupTimeout: m.settings().StartupTimeout.Duration,
		MaxMessageSize: m.cfg.Mux.MaxMessageSize,
		ClientInfo:     m.clientInfo,
		Hooks:          mem.hooks(),
	}
}

// setServerInfo sets the server's name as JSON, which results of the
// current era carry (era.go).
func (m *Mux) setServerInfo(info json.RawMessage) {
	m.serverInfo = info
	m.serverInfoMember = []byte(`"` + mcp.MetaKeyServerInfo + `":` + string(info))
}

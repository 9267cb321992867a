package mux

// Serving the merged server over Streamable HTTP, to any number of agents at
// once (`mcp-mux serve --http ADDR`). Every HTTP session is a mux session
// like the stdio one: its own subscriptions, limit, log level and progress
// tokens, cleaned up when it ends (DELETE, idle timeout, or mux closing).
//
// Both protocol eras: a handshake-era client (initialize, then the
// Mcp-Session-Id header) gets a stateful session from the go-sdk's handler;
// a request of the current era (MCP-Protocol-Version 2026-07-28 or later,
// no session id) goes to the go-sdk's stateless handler, the only one that
// accepts that era. A stateless request is a session of its own that ends
// with the request, so the current era's subscriptions live exactly as long
// as the subscriptions/listen request that carries them: mux tracks that
// request as a session, and its end releases them at the backends.

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// HTTPPath is where the MCP endpoint is served.
const HTTPPath = "/mcp"

// HTTPOptions configure serving over HTTP.
type HTTPOptions struct {
	// Token, when set, is required as "Authorization: Bearer TOKEN" on
	// every request. Never logged.
	Token string
	// SessionIdle closes a session that sent no request for this long.
	SessionIdle time.Duration
	// MaxBody bounds a request body (the config's max_message_size).
	MaxBody int64
	// WriteTimeout bounds one write of a response (an event of an event
	// stream, mostly); 0 means DefaultHTTPWriteTimeout.
	WriteTimeout time.Duration
	// KeepAlive is how long a connection waiting for the agent's next
	// request stays open; 0 means DefaultHTTPKeepAlive.
	KeepAlive time.Duration
}

// DefaultHTTPWriteTimeout is how long one write to an agent may block: an
// agent that reads nothing of its event stream for this long loses that
// stream's connection (a client reconnects it), and what waited on the
// write (the session's sender, the go-sdk's handler) ends with it.
const DefaultHTTPWriteTimeout = time.Minute

// DefaultHTTPKeepAlive is how long a connection waits for an agent's next
// request before mux closes it. An idle session keeps two connections, its
// event stream and the one its last request came on; the second's buffers
// and goroutine were a third of its memory (8 KiB of bufio and a stack of
// 8 KiB or more, of ~100 KiB RSS at 1,000 idle sessions). 5 s is what
// Node's http server (every TypeScript SDK server) and Apache close idle
// connections after; Node's fetch drops its own after 4 s and httpx after
// 5 s, and Go's client retries a request on a connection the server closed
// before it wrote anything, so agents do not see it.
const DefaultHTTPKeepAlive = 5 * time.Second

// HTTPHandler serves the merged server at HTTPPath. Its calls end when
// mux closes because ServeHTTP's server gives every request mux's context
// (BaseContext): the fast path's call context is the request's own
// (requestContext). Another server must do the same.
func (m *Mux) HTTPHandler(o HTTPOptions) http.Handler {
	getServer := func(*http.Request) *mcp.Server { return m.server }
	sdkLog := slog.New(m.log.WithPrefix("go-sdk http"))
	// Idle sessions are mux's to end (idleSessions), not the go-sdk's: the
	// requests that take the fast path (httpfast.go) never reach its timer.
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: o.MaxBody,
		Logger:              sdkLog,
	})
	if o.SessionIdle > 0 {
		m.goOwned(func() { m.idleSessions(o.SessionIdle) })
	}
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: o.MaxBody,
		Logger:              sdkLog,
	})
	writeTimeout := o.WriteTimeout
	if writeTimeout <= 0 {
		writeTimeout = DefaultHTTPWriteTimeout
	}
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, m.metricsHandler(o.Token)) // observe.go
	serve := func(w http.ResponseWriter, r *http.Request) {
		w, r, done := boundWrites(w, r, writeTimeout)
		defer done()
		if !originAllowed(r) {
			// DNS rebinding: a web page in the user's browser must not
			// reach a local MCP server (the transport spec's MUST).
			http.Error(w, "Forbidden: Origin not allowed", http.StatusForbidden)
			return
		}
		if o.Token != "" && !bearerOK(r, o.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-mux"`)
			http.Error(w, "Unauthorized: this mcp-mux requires Authorization: Bearer <http_token>", http.StatusUnauthorized)
			return
		}
		if !m.profileAsked(w, r) { // /mcp/NAME and Mcp-Mux-Profile (profile.go)
			return
		}
		if r.URL.RawQuery != "" { // parsing an empty one costs every request a map
			if v := r.URL.Query().Get("tool_list"); v != "" {
				// A client that can set only its URL picks its tool list there.
				r.Header.Set(ToolListHeader, v)
			}
		}
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" && r.Header.Get("MCP-Protocol-Version") >= modernEra {
			// The request is a session of its own, over when the go-sdk's
			// handler returns: mux ends the sessions it made then, rather
			// than with a goroutine per session waiting for its end (a
			// listen stream's lifetime).
			if m.statelessPOST(w, r, o.MaxBody) {
				return
			}
			made := &madeSessions{}
			stateless.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), madeSessionsKey{}, made)))
			for _, ss := range made.take() {
				m.sessionEnded(ss)
			}
			return
		}
		r.Header.Del(sdkCallHeader) // mux's own (httpcancel.go)
		if r.Method == http.MethodPost && sid != "" && hostAllowed(r) {
			if s := m.httpSession(sid); s != nil {
				s.startPOST()
				defer s.endPOST()
				took, msg := m.fastPOST(w, r, s, o.MaxBody)
				if took {
					return
				}
				if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
					var answered func()
					w, answered = s.trackSDKCall(w, r, req.ID)
					defer answered()
				} else if ok && req.Method == "notifications/cancelled" {
					s.cancelSDKCall(req)
				}
			}
		}
		stateful.ServeHTTP(w, r)
		if r.Method == http.MethodDelete && sid != "" {
			if s := m.httpSession(sid); s != nil {
				m.sessionEnded(s.ss) // the go-sdk closed it
			}
		}
	}
	mux.HandleFunc(HTTPPath, serve)
	mux.HandleFunc(HTTPPath+"/", serve) // a profile's: /mcp/NAME
	return mux
}

// madeSessionsKey carries a stateless request's *madeSessions in its
// context, which the go-sdk hands the session it makes for the request.
type madeSessionsKey struct{}

// madeSessions are the sessions mux learned of while serving one
// stateless request.
type madeSessions struct {
	mu sync.Mutex
	ss []*mcp.ServerSession
}

func (ms *madeSessions) add(ss *mcp.ServerSession) {
	ms.mu.Lock()
	ms.ss = append(ms.ss, ss)
	ms.mu.Unlock()
}

func (ms *madeSessions) take() []*mcp.ServerSession {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := ms.ss
	ms.ss = nil
	return out
}

// boundWrites makes every write of w's response fail once it has blocked
// for timeout, ending r's context then (the go-sdk's handler waits on it),
// so that net/http closes the connection of an agent that stopped reading.
// The net/http server has no such bound of its own but WriteTimeout, which
// would end every long-lived event stream. done must be called when the
// handler returns.
func boundWrites(w http.ResponseWriter, r *http.Request, timeout time.Duration) (http.ResponseWriter, *http.Request, func()) {
	rc := http.NewResponseController(w)
	// The deadline the connection's previous response left must not end
	// this one.
	rc.SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	bw := &boundedWriter{ResponseWriter: w, rc: rc, timeout: timeout, cancel: cancel}
	return bw, r.WithContext(ctx), func() {
		// What net/http writes after the handler is bounded too.
		rc.SetWriteDeadline(time.Now().Add(timeout))
		cancel()
	}
}

type boundedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	cancel  context.CancelFunc
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := w.ResponseWriter.Write(p)
	if err != nil {
		w.cancel()
	}
	return n, err
}

// FlushError is what http.ResponseController.Flush calls (the go-sdk
// flushes every event that way).
func (w *boundedWriter) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	err := w.rc.Flush()
	if err != nil {
		w.cancel()
	}
	return err
}

func (w *boundedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// originAllowed accepts a request without Origin (not from a browser), or
// one whose Origin is a loopback host or the host the request was sent to.
func originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if config.IsLoopbackHost(host) {
		return true
	}
	reqHost := r.Host
	if h, _, err := net.SplitHostPort(reqHost); err == nil {
		reqHost = h
	}
	return strings.EqualFold(host, reqHost) && !config.IsLoopbackHost(reqHost)
}

// The scheme is case-insensitive (RFC 9110 §11.1): "bearer" is "Bearer".
func bearerOK(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// ServeHTTP serves the merged server on ln until ctx ends, then closes every
// HTTP session (cleaning each up as a stdio session is) and returns.
func (m *Mux) ServeHTTP(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	m.mu.Lock()
	m.watchEnds = true
	m.mu.Unlock()
	keepAlive := o.KeepAlive
	if keepAlive <= 0 {
		keepAlive = DefaultHTTPKeepAlive
	}
	srv := &http.Server{
		Handler:           m.HTTPHandler(o),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       keepAlive,
		BaseContext:       func(net.Listener) context.Context { return m.ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	m.log.Info("serving over HTTP", "url", "http://"+ln.Addr().String()+HTTPPath, "token", o.Token != "")
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		srv.Shutdown(sctx)
		cancel()
		err = <-errc
	}
	// Closing the connections ends the writes still blocked on agents that
	// do not read, and so the goroutines waiting on them (Close waits).
	srv.Close()
	for _, s := range m.allSessions() {
		s.ss.Close()
		if s.ss.ID() != "" {
			m.sessionEnded(s.ss) // not watched: see session
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// allSessions lists every session mux tracks, initialized or not.
func (m *Mux) allSessions() []*session {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s)
	}
	return out
}

// SessionStatus is one agent session, as mcp-mux://backends shows it.
type SessionStatus struct {
	ID       string   `json:"id"`
	Client   string   `json:"client,omitempty"` // clientInfo name and version
	Protocol string   `json:"protocol,omitempty"`
	PID      int      `json:"pid,omitempty"`      // the session's process, if not this one
	Profile  string   `json:"profile,omitempty"`  // its view
	Backends []string `json:"backends,omitempty"` // those it sent requests to
}

// Sessions lists the agent sessions, initialized or not, by id.
func (m *Mux) Sessions() []SessionStatus {
	var out []SessionStatus
	for _, s := range m.allSessions() {
		st := SessionStatus{ID: s.id, PID: int(s.pid.Load()), Profile: m.launch}
		if p := s.profile.Load(); p != nil {
			st.Profile = *p
		}
		s.used.Range(func(k, _ any) bool { st.Backends = append(st.Backends, k.(string)); return true })
		sort.Strings(st.Backends)
		if p := s.initParams(); p != nil {
			st.Protocol = p.ProtocolVersion
			if p.ClientInfo != nil {
				st.Client = strings.TrimSpace(p.ClientInfo.Name + " " + p.ClientInfo.Version)
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].ID, out[j].ID
		return len(a) < len(b) || len(a) == len(b) && a < b
	})
	return out
}

// logSession tells the log of an HTTP session that started or ended, with
// its client and how many sessions there are now. (A stdio mcp-mux has one
// session, whose start and end the log says anyway.)
func (m *Mux) logSession(s *session, what string) {
	m.mu.Lock()
	http, n := m.watchEnds, len(m.sessions)
	m.mu.Unlock()
	if !http {
		return
	}
	client := "?"
	if p := s.initParams(); p != nil && p.ClientInfo != nil {
		client = strings.TrimSpace(p.ClientInfo.Name + " " + p.ClientInfo.Version)
	}
	m.log.Info("session "+what, "session", s.id, "client", client, "sessions", n)
}

package door

// Serving over Streamable HTTP, to any number of agents at once
// (`mcp-mux serve --http ADDR`). Every HTTP session is a session of the
// core like the stdio one, which it cleans up when it ends (DELETE, idle
// timeout, or mux closing).
//
// Both protocol eras: a handshake-era client (initialize, then the
// Mcp-Session-Id header) gets a stateful session from the go-sdk's handler;
// a request of the current era (MCP-Protocol-Version 2026-07-28 or later,
// no session id) goes to the go-sdk's stateless handler, the only one that
// accepts that era. A stateless request is a session of its own that ends
// with the request, so the current era's subscriptions live exactly as long
// as the subscriptions/listen request that carries them: the core tracks
// that request as a session, and its end (AtRequestEnd) releases them at
// the backends.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// HTTPPath is where the MCP endpoint is served; HTTPPath/NAME serves the
// profile NAME.
const HTTPPath = "/mcp"

// CurrentEra is the first protocol revision of the current era, which has
// no initialize and no session.
const CurrentEra = "2026-07-28"

// ProfileHeader is how an HTTP agent asks for a profile; the path
// /mcp/NAME does the same for a client that can set only its URL.
const ProfileHeader = "Mcp-Mux-Profile"

// ToolListHeader is how an HTTP agent picks its own tool list ("all",
// "search" or "auto", as [mux] tool_list); the URL's ?tool_list= does the
// same for a client that can set only its URL.
const ToolListHeader = "Mcp-Mux-Tool-List"

// HTTPOptions configure serving over HTTP.
type HTTPOptions struct {
	// Token, when set, is required as "Authorization: Bearer TOKEN" on
	// every request (or one of Tokens). Never logged.
	Token string
	// Tokens are the team's members' ([[token]]), each the key to its
	// profiles only (tokens.go). Never logged.
	Tokens []config.Token
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
	// WorkBegan and WorkEnded, when set, bracket every request that is an
	// agent's work, not a stream that waits for news (a GET, a
	// subscriptions/listen): serve --http's threads follow how many are
	// in flight (mux/cores).
	WorkBegan, WorkEnded func()
	// Drain, if set, is what ServeHTTP begins when its context ends
	// (drain.go); the handler and the probes serve by it.
	Drain *Drain
	// DrainTimeout bounds how long the requests in flight may finish once
	// the drain began ([mux] drain_timeout).
	DrainTimeout time.Duration
	// Stop, closed, ends a drain at once (a second signal).
	Stop <-chan struct{}
	// HandOff hands a current-era retry whose call another instance holds
	// to that instance (handoff.go).
	HandOff HandOff
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

// HTTPCore is what the HTTP door asks of the core, whose record of one
// session is an S.
type HTTPCore[S any] struct {
	// Server answers what the fast paths leave to the go-sdk's handlers.
	Server *mcp.Server
	// Logger gets the go-sdk handlers' logs.
	Logger *slog.Logger
	// Profile is nil if the profile an agent asks for (by path or header)
	// is one, else the error that says which there are (a 404).
	Profile func(name string) error
	// Ready reports whether the fast paths are open (the first list is
	// over); until then a stateless request takes the go-sdk's path.
	Ready func() bool
	// Session is the initialized session of the Mcp-Session-Id sid and its
	// door state, or a nil state.
	Session func(sid string) (S, *HTTPSession)
	// Fast reports whether the fast path may serve s's POSTs that ask for
	// protocol version ("" if the POST does not say).
	Fast func(s S, version string) bool
	// Call serves req, a tools/call or resources/read of s, if the fast
	// path takes it (with ServeCall), and reports whether it did; if not,
	// it wrote nothing.
	Call func(w http.ResponseWriter, r *http.Request, s S, req *jsonrpc.Request) bool
	// Stateless is Call for a request of the current era, which has no
	// session: its MCP-Protocol-Version and Mcp-Name headers say what the
	// request must.
	Stateless func(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) bool
	// Deleted ends s, which the agent's DELETE ended at the go-sdk.
	Deleted func(s S)
}

// HTTP serves the MCP endpoint, for HTTPPath and HTTPPath/ (a profile's).
// Its calls end when the core closes only if every request's context
// derives from the core's (ServeHTTP's base): the fast path's call context
// is the request's own (requestContext).
func HTTP[S any](o HTTPOptions, core HTTPCore[S]) http.Handler {
	getServer := func(*http.Request) *mcp.Server { return core.Server }
	// Idle sessions are the core's to end (HTTPSession.Idle), not the
	// go-sdk's: the requests that take the fast path never reach its timer.
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: o.MaxBody,
		Logger:              core.Logger,
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: o.MaxBody,
		Logger:              core.Logger,
	})
	writeTimeout := o.WriteTimeout
	if writeTimeout <= 0 {
		writeTimeout = DefaultHTTPWriteTimeout
	}
	k := &keys{all: o.Token, members: o.Tokens}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.WorkBegan != nil && isWork(r) {
			o.WorkBegan()
			defer o.WorkEnded()
		}
		w, r, done := boundWrites(w, r, writeTimeout)
		defer done()
		draining := o.Drain.enter()
		defer o.Drain.leave()
		who, ok := admitted(w, r, k)
		if !ok {
			return
		}
		r.Header.Set(TokenHeader, tokenName(who))
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			if _, st := core.Session(sid); st != nil && !st.heldBy(tokenName(who)) {
				// Another token's session: as one that does not exist
				// (tokens.go), in the go-sdk's words.
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		if !profileAsked(w, r, core.Profile, who) {
			return
		}
		if draining && !mayFinish(r, o.MaxBody) {
			refuse(w)
			return
		}
		if r.URL.RawQuery != "" { // parsing an empty one costs every request a map
			if v := r.URL.Query().Get("tool_list"); v != "" {
				// A client that can set only its URL picks its tool list there.
				r.Header.Set(ToolListHeader, v)
			}
		}
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" && r.Header.Get("MCP-Protocol-Version") >= CurrentEra {
			// The request is a session of its own, over when the go-sdk's
			// handler returns: the core's sessions of it end then, rather
			// than with a goroutine per session waiting for its end (a
			// listen stream's lifetime).
			if o.HandOff.handedOff(w, r, o.MaxBody) {
				return
			}
			if core.Ready() && statelessPOST(w, r, o.MaxBody, core.Stateless) {
				return
			}
			if r.Header.Get("Mcp-Method") == "subscriptions/listen" && o.Drain != nil {
				var ended func()
				if w, ended = listenStream(w, r, o); w == nil {
					return // answered
				}
				defer ended()
			}
			ends := &requestEnds{}
			stateless.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestEndsKey{}, ends)))
			ends.run()
			return
		}
		r.Header.Del(sdkCallHeader) // mux's own (httpcancel.go)
		if r.Method == http.MethodGet {
			var ended func()
			w, ended = o.Drain.stream(w, r, reconnectEvent)
			defer ended()
		}
		if r.Method == http.MethodPost && sid != "" && hostAllowed(r) {
			if s, st := core.Session(sid); st != nil {
				st.startPOST()
				defer st.endPOST()
				took, msg := fastPOST(w, r, o.MaxBody, &core, s, st)
				if took {
					return
				}
				if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
					var answered func()
					w, answered = st.trackSDKCall(w, r, req.ID)
					defer answered()
				} else if ok && req.Method == "notifications/cancelled" {
					st.cancelSDKCall(req)
				}
			}
		}
		stateful.ServeHTTP(w, r)
		if r.Method == http.MethodDelete && sid != "" {
			if s, st := core.Session(sid); st != nil {
				core.Deleted(s) // the go-sdk closed it
			}
		}
	})
}

// isWork reports whether r is an agent's work (WorkBegan): a POST, but
// for the current era's subscriptions/listen, which is a stream's.
func isWork(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get("Mcp-Method") != "subscriptions/listen"
}

// profileAsked takes the profile an HTTP request asks for, by its path
// (/mcp/NAME) or header, into the header, where the core reads it; a
// [[token]] bound to profiles (who) that asks for none gets its first. A
// profile the config lacks (known says why) is a 404 that names those it
// has, and one outside who's a 403 that names none; it reports false
// then, having answered.
func profileAsked(w http.ResponseWriter, r *http.Request, known func(string) error, who *config.Token) bool {
	name, inPath := strings.CutPrefix(r.URL.Path, HTTPPath+"/")
	if header := strings.TrimSpace(r.Header.Get(ProfileHeader)); inPath && header != "" && who != nil && !who.Allows(header) {
		// The path wins, but the header asked too: never served a view
		// other than the one asked for, nor told whether it exists.
		forbidden(w)
		return false
	}
	if inPath {
		r.Header.Set(ProfileHeader, name)
	} else {
		name = strings.TrimSpace(r.Header.Get(ProfileHeader))
	}
	if !inPath && name == "" {
		if who == nil || who.Profiles == nil {
			return true
		}
		name = who.Profiles[0]
		r.Header.Set(ProfileHeader, name)
	}
	if who != nil && !who.Allows(name) {
		forbidden(w)
		return false
	}
	if err := known(name); err != nil {
		if who != nil && who.Profiles != nil {
			// Saved out of the file since: the others are not its to see.
			http.Error(w, "Not Found: this token's profile is not in the config any more", http.StatusNotFound)
			return false
		}
		http.Error(w, "Not Found: "+err.Error()+"; /mcp serves every backend", http.StatusNotFound)
		return false
	}
	return true
}

// requestEndsKey carries a stateless request's *requestEnds in its
// context, which the go-sdk hands the session it makes for the request.
type requestEndsKey struct{}

// requestEnds is what runs once a stateless request is over: the ends of
// the core's sessions made for it.
type requestEnds struct {
	mu   sync.Mutex
	ends []func()
}

// AtRequestEnd arranges for end to run once the HTTP request of ctx is
// over, if it is a stateless one (whose sessions end with it), and
// reports whether it did.
func AtRequestEnd(ctx context.Context, end func()) bool {
	re, _ := ctx.Value(requestEndsKey{}).(*requestEnds)
	if re == nil {
		return false
	}
	re.mu.Lock()
	re.ends = append(re.ends, end)
	re.mu.Unlock()
	return true
}

func (re *requestEnds) run() {
	re.mu.Lock()
	ends := re.ends
	re.ends = nil
	re.mu.Unlock()
	for _, end := range ends {
		end()
	}
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

// Guard serves h behind the HTTP door's checks of who asks: a browser
// page's Origin, and a bearer token when there is one (what mcp-mux
// serves is not for anyone who can reach the port). What h serves is of
// every view: a [[token]] bound to profiles may not see it.
func Guard(token string, tokens []config.Token, h http.Handler) http.Handler {
	k := &keys{all: token, members: tokens}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := admitted(w, r, k)
		if !ok {
			return
		}
		if who != nil && who.Profiles != nil {
			forbidden(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// admitted reports whether r passes the door's checks of who asks, and
// which [[token]] it came with (nil for http_token, or none needed),
// having answered it if not.
func admitted(w http.ResponseWriter, r *http.Request, k *keys) (*config.Token, bool) {
	if !originAllowed(r) {
		// DNS rebinding: a web page in the user's browser must not reach
		// a local MCP server (the transport spec's MUST).
		http.Error(w, "Forbidden: Origin not allowed", http.StatusForbidden)
		return nil, false
	}
	who, ok := k.who(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-mux"`)
		http.Error(w, "Unauthorized: this mcp-mux requires Authorization: Bearer <http_token>", http.StatusUnauthorized)
		return nil, false
	}
	return who, true
}

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

// hostAllowed is the go-sdk handler's DNS rebinding check, made before
// the fast path too: a request that reached a loopback address must name
// a loopback host.
func hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return true
	}
	if tcp, ok := local.(*net.TCPAddr); ok {
		if !tcp.AddrPort().Addr().Unmap().IsLoopback() { // as below, without the string
			return true
		}
	} else if host, _, err := net.SplitHostPort(local.String()); err != nil || !config.IsLoopbackHost(host) {
		return true
	}
	reqHost := r.Host
	if h, _, err := net.SplitHostPort(reqHost); err == nil {
		reqHost = h
	}
	return config.IsLoopbackHost(strings.Trim(reqHost, "[]"))
}

// ServeHTTP serves h on ln until ctx ends, every request's context derived
// from base, then drains if o.Drain is set (drain.go), closes every
// connection (which ends the writes still blocked on agents that do not
// read, and what waits on them) and returns.
func ServeHTTP(ctx context.Context, ln net.Listener, h http.Handler, base context.Context, o HTTPOptions) error {
	keepAlive := o.KeepAlive
	if keepAlive <= 0 {
		keepAlive = DefaultHTTPKeepAlive
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       keepAlive,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		if d := o.Drain; d != nil && d.begin() {
			// The listener stays open meanwhile: a balancer's probe sees
			// ReadyPath fail, and a request that still comes gets its 503.
			began := time.Now()
			srv.SetKeepAlivesEnabled(false) // each answer's connection closes
			d.wait(began, o.DrainTimeout, o.Stop)
			d.endStreams()
			d.streamsEnded(time.Second, o.Stop)
		}
		// A moment for the handlers that are ending, if nothing was left
		// in flight: what was is cut at once.
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if _, left := o.Drain.Result(); left > 0 {
			cancel()
		}
		srv.Shutdown(sctx)
		cancel()
		err = <-errc
	}
	srv.Close()
	if o.Drain != nil {
		o.Drain.enders.Wait() // their writes end with the connections
	}
	handOffClient.CloseIdleConnections()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

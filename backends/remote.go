package backends

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/oauth"
)

// Remote backends: Spec.URL names an MCP endpoint over HTTP. The go-sdk's
// client transports speak the protocol; what is ours is the HTTP client
// under them (remote_http.go: the headers, what a 401 means, connections
// that can all be closed at once) and the lifecycle a child backend has:
// Stop ends the session (for Streamable HTTP the go-sdk sends DELETE), Kill
// drops every connection at once, and a remote that goes away takes the
// backend down ("connection lost"), for mux to reconnect as it restarts a
// child.

// Transports of Spec.Transport, and of Backend.Transport.
const (
	TransportStdio      = "stdio"
	TransportAuto       = "auto" // Streamable HTTP, falling back to HTTP+SSE
	TransportStreamable = "streamable"
	TransportSSE        = "sse"
)

// ErrUnauthorized is wrapped by the error of a remote backend that answered
// 401 or 403: a token to fix, not a crash to retry.
var ErrUnauthorized = errors.New("unauthorized")

// ErrNeedsLogin is wrapped by the error of a remote backend whose server
// signs in with OAuth and has no sign-in it accepts (an
// *oauth.NeedsLoginError): not a crash to retry, a `mcp-mux login NAME` to
// wait for (see WaitSignIn).
var ErrNeedsLogin = oauth.ErrNeedsLogin

// authError is a 401 or 403, told as the user can act on it.
type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }
func (e *authError) Unwrap() error { return ErrUnauthorized }

// sseRetries is how often the go-sdk reopens a dropped Streamable HTTP
// event stream before it gives up on the connection (its default is 5,
// with delays growing from 1 s, so a remote that died would go unnoticed
// for up to half a minute). Past it the backend is down and mux reconnects
// with its own backoff, restoring subscriptions.
const sseRetries = 2

// teardownWait bounds how long the end of a session is waited for once its
// connections are closed: the go-sdk closes a session only when no handler
// runs any more, and a hook waiting for the agent may hold it.
const teardownWait = 500 * time.Millisecond

// remote is what a remote backend has instead of a process.
type remote struct {
	url       string // as configured
	shown     string // as it may be shown: no user info, no query
	want      string // Spec.Transport, "" made TransportAuto
	transport string // the one that connected
	rt        *roundTripper
	maxEvent  int
	killed    chan struct{} // closed by Kill
	killOnce  sync.Once
	// oauth gives the Streamable HTTP transport its tokens; nil when the
	// backend sends its own Authorization header.
	oauth *oauth.Handler
	// conn is the go-sdk's connection of the session, which raw calls are
	// written to (rawcall.go); set by connect.
	conn       mcp.Connection
	clientInfo *mcp.Implementation // mux's, for the current era's per-request _meta
}

// startRemote connects b (whose Spec.URL is set) and initializes the
// session, within opts.StartupTimeout.
func startRemote(ctx context.Context, b *Backend, opts Options) (*Backend, error) {
	spec := b.Spec
	r := &remote{url: spec.URL, shown: ShownURL(spec.URL), want: spec.Transport, killed: make(chan struct{}), clientInfo: opts.ClientInfo,
		maxEvent: opts.MaxMessageSize + 1024} // the event's framing around the message
	if r.want == "" {
		r.want = TransportAuto
	}
	b.remote = r
	// The notification gate (backpressure and Settle) is childConn's; a
	// remote backend uses one whose pipes are never read or written, and
	// the event streams count what they carry into it (see sseCounter).
	b.conn = newChildConn(spec.Name, b.log, nopPipe{}, nopPipe{}, opts.MaxMessageSize)
	rt, err := newRoundTripper(spec, b.conn)
	if err != nil {
		return nil, err
	}
	r.rt = rt
	if err := r.setupOAuth(spec); err != nil {
		rt.shut()
		b.conn.Close()
		return nil, err
	}
	b.log.Info("connecting", "url", r.shown, "transport", r.want, "headers", spec.HeaderKeys())

	var want *mcp.ClientCapabilities
	if opts.ClientCapabilities != nil {
		want = opts.ClientCapabilities(ctx)
	}
	b.caps = declared(want)
	client := b.newClient(opts)
	cctx, cancel := context.WithTimeout(ctx, opts.StartupTimeout)
	defer cancel()
	cs, err := r.connect(cctx, b, client)
	if err != nil {
		rt.shut()
		b.conn.Close()
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrNeedsLogin) {
			return nil, err
		}
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s did not answer initialize within %s", r.shown, opts.StartupTimeout)
		}
		return nil, connectError(r.shown, err)
	}
	b.session = cs
	b.init = cs.InitializeResult()
	// From now on a 401 or 403 (a token revoked or expired) takes the
	// backend down as unauthorized: mux does not retry those.
	rt.onAuth(func(err error) { b.Kill(err) })
	if r.oauth != nil {
		// A sign-in the server no longer takes (and cannot be
		// refreshed) takes the backend down to wait for a login; a 401
		// that is not about OAuth is the roundTripper's.
		r.oauth.OnLost(func(err error) {
			if errors.Is(err, oauth.ErrNotOAuth) {
				if auth := rt.authErr(); auth != nil {
					err = auth
				}
			}
			b.Kill(err)
		})
	}
	b.log.Info("connected", "url", r.shown, "transport", r.transport, "protocol", b.init.ProtocolVersion)
	go b.monitorRemote()
	return b, nil
}

// connect initializes a session over the transport r wants; for
// TransportAuto as the spec's backwards compatibility section says: POST
// initialize (Streamable HTTP); if that is refused with 400, 404 or 405, GET
// the URL for the older HTTP+SSE transport's event stream.
func (r *remote) connect(ctx context.Context, b *Backend, client *mcp.Client) (*mcp.ClientSession, error) {
	opts := sessionOptions(b.Spec)
	try := func(transport string) (*mcp.ClientSession, error) {
		r.transport = transport
		r.rt.sseSession.Store(transport == TransportSSE)
		var t mcp.Transport
		if transport == TransportSSE {
			t = &sseTransport{SSEClientTransport: mcp.SSEClientTransport{Endpoint: r.url, HTTPClient: r.rt.client, MaxEventSize: r.maxEvent}, r: r}
		} else {
			st := &mcp.StreamableClientTransport{Endpoint: r.url, HTTPClient: r.rt.client, MaxEventSize: r.maxEvent, MaxRetries: sseRetries}
			if r.oauth != nil {
				st.OAuthHandler = r.oauth
			}
			t = st
		}
		cs, err := client.Connect(ctx, keptTransport{t, &r.conn}, opts)
		if err != nil {
			return nil, r.explain(err)
		}
		return cs, nil
	}
	if r.want != TransportAuto {
		return try(r.want)
	}
	cs, err := try(TransportStreamable)
	if err == nil || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrNeedsLogin) {
		return cs, err
	}
	switch status := r.rt.lastPOST(); status {
	case 400, 404, 405:
		b.log.Info("Streamable HTTP refused; trying the older HTTP+SSE transport", "status", status)
	default:
		return nil, err
	}
	cs, sseErr := try(TransportSSE)
	if sseErr != nil && !errors.Is(sseErr, ErrUnauthorized) {
		return nil, fmt.Errorf("neither transport answered: Streamable HTTP: %v; HTTP+SSE: %w", err, sseErr)
	}
	return cs, sseErr
}

// connectError says in one sentence why connecting to shown failed: the
// network's reason when there is one (the go-sdk's chain of "calling
// initialize: sending initialize: rejected by transport: Post ...: dial
// tcp ...: connect: connection refused" becomes "cannot connect to URL:
// connection refused"), else the go-sdk's, once.
func connectError(shown string, err error) error {
	var dns *net.DNSError
	var op *net.OpError
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &dns):
		return &redacted{msg: fmt.Sprintf("cannot connect to %s: its host %s is not found", shown, dns.Name), err: err}
	case errors.As(err, &certErr), errors.As(err, &unknownAuthority), errors.As(err, &hostname):
		return &redacted{msg: fmt.Sprintf("cannot connect to %s: its TLS certificate is not trusted (%v)", shown, errors.Unwrap(err)), err: err}
	case errors.As(err, &op) && op.Op == "dial":
		cause := op.Err
		if se, ok := cause.(*os.SyscallError); ok {
			cause = se.Err
		}
		return &redacted{msg: fmt.Sprintf("cannot connect to %s: %s", shown, clause(cause)), err: err}
	}
	msg := err.Error()
	for _, wrapper := range []string{`calling "initialize": `, `sending "initialize": `, "rejected by transport: "} {
		msg = strings.Replace(msg, wrapper, "", 1)
	}
	return &redacted{msg: fmt.Sprintf("connecting to %s: %s", shown, msg), err: err}
}

// keptTransport is a transport that keeps the connection it makes in
// conn. The connection itself goes to the go-sdk: it asks it for methods
// of its own that a wrapper would hide.
type keptTransport struct {
	mcp.Transport
	conn *mcp.Connection
}

func (t keptTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err == nil {
		*t.conn = c
	}
	return c, err
}

// sseTransport is the go-sdk's HTTP+SSE client transport with a stream
// that outlives the connect: that transport's GET, which carries the
// session, is made with the context Connect is given, which only bounds
// the connect here. The stream ends with the backend (see shut).
type sseTransport struct {
	mcp.SSEClientTransport
	r *remote
}

func (t *sseTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.r.rt.onShut(cancel)
	stop := context.AfterFunc(ctx, cancel) // until connected, ctx bounds it
	conn, err := t.SSEClientTransport.Connect(sctx)
	if !stop() && err == nil {
		conn.Close()
		return nil, ctx.Err()
	}
	return conn, err
}

// explain turns a go-sdk error into what the user should know: the 401 or
// 403 behind it, if there was one, and never the configured URL's secrets
// (an url.Error quotes the URL whole).
func (r *remote) explain(err error) error {
	if err == nil {
		return nil
	}
	var nl *oauth.NeedsLoginError
	if errors.As(err, &nl) {
		return nl // said whole, without the go-sdk's chain around it
	}
	if auth := r.rt.authErr(); auth != nil {
		return auth
	}
	if r.shown != r.url && strings.Contains(err.Error(), r.url) {
		return &redacted{msg: strings.ReplaceAll(err.Error(), r.url, r.shown), err: err}
	}
	return err
}

// redacted is err with its message rewritten.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// monitorRemote waits until the session ends, Stop or Kill is called, and
// takes the backend down: the session closed, every connection closed.
func (b *Backend) monitorRemote() {
	r := b.remote
	lost := make(chan error, 1)
	go func() { lost <- b.session.Wait() }()
	var reason error
	select {
	case err := <-lost:
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("the server closed the connection")
		}
		reason = fmt.Errorf("connection lost: %w", r.explain(err))
	case <-b.stopping:
	case <-r.killed:
	}
	// The session's end is orderly (for Streamable HTTP the go-sdk sends
	// DELETE, so the server can drop it) on Stop, within its grace; on Kill
	// or once the remote is gone the connections are closed at once, which
	// fails every call in flight.
	closed := make(chan struct{})
	go func() {
		b.session.Close()
		close(closed)
	}()
	select {
	case <-b.stopping:
		select {
		case <-closed:
		case <-time.After(b.grace):
			b.log.Warn("session did not end within the grace; closing its connections", "grace", b.grace)
		}
	default:
	}
	r.rt.shut()
	select {
	case <-closed:
	case <-time.After(teardownWait):
		// What is left ends by itself once the hooks return; the
		// connections it would use are gone.
	}
	b.conn.Close()
	b.mu.Lock()
	if b.killReason != nil {
		reason = b.killReason
	}
	b.mu.Unlock()
	select {
	case <-b.stopping:
		reason = ErrStopped
		b.log.Info("disconnected", "url", r.shown)
	default:
		b.log.Error("backend down", "reason", reason)
	}
	b.downErr = reason
	close(b.done)
}

// kill ends a remote backend's connections at once (see monitorRemote).
func (r *remote) kill() { r.killOnce.Do(func() { close(r.killed) }) }

// Transport is how mcp-mux speaks to the backend: TransportStdio for a
// child process, else the HTTP transport that connected.
func (b *Backend) Transport() string {
	b = b.real()
	if b.remote == nil {
		return TransportStdio
	}
	return b.remote.transport
}

// shownURL is raw as it may be shown in logs and errors: without user info
// or query, which may hold credentials.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	q := u.RawQuery != ""
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	s := u.String()
	if q {
		s += "?…"
	}
	return s
}

// HeaderKeys lists the names (never the values) of the configured headers,
// for logs.
func (s *Spec) HeaderKeys() []string {
	keys := make([]string, 0, len(s.Headers))
	for k := range s.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nopPipe stands for a remote backend's stdin and stdout (see startRemote).
type nopPipe struct{}

func (nopPipe) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopPipe) Write(p []byte) (int, error) { return len(p), nil }
func (nopPipe) Close() error                { return nil }

// clause is err's text as the end of a sentence: Windows' messages are
// sentences of their own ("No connection could be made because the target
// machine actively refused it.").
func clause(err error) string {
	s := strings.TrimSuffix(strings.TrimSpace(err.Error()), ".")
	if len(s) > 1 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'a' && s[1] <= 'z' {
		s = string(s[0]+'a'-'A') + s[1:]
	}
	return s
}

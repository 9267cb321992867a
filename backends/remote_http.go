package backends

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/backends/oauth"
	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// roundTripper is the HTTP client a remote backend's go-sdk transport
// uses. It adds the configured headers (to the configured origin only: a
// redirect elsewhere must not take a token along), tells a 401 or 403 for
// what it is, puts mux's reason in a notifications/cancelled (as childConn
// does), counts the notifications the event streams carry into the
// backend's gate, and can close every connection at once.
type roundTripper struct {
	client  *http.Client // the one the go-sdk gets; its transport is rt
	base    *http.Transport
	origin  string      // scheme://host[:port] of the URL
	headers http.Header // values are secrets: never logged
	bearer  bool        // an Authorization header is configured
	// oauth: an OAuth handler owns the 401s (it refreshes, or says a
	// login is needed); only 403s take the backend down here.
	oauth bool
	shown string // the URL as it may be shown
	name  string // the backend's
	gate  *childConn

	// sseSession: the HTTP+SSE transport is in use, whose GET is the
	// session itself; Streamable HTTP's GET is an optional extra stream,
	// which the go-sdk does without if it is refused.
	sseSession atomic.Bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	post   int         // the status of the last POST answered
	auth   *authError  // the first 401 or 403
	onDeny func(error) // called for a 401 or 403 once connected
	shuts  []func()    // called by shut
}

func newRoundTripper(spec Spec, gate *childConn) (*roundTripper, error) {
	u, err := url.Parse(spec.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %s is not an http(s) URL", ShownURL(spec.URL))
	}
	rt := &roundTripper{
		origin:  originOf(u),
		headers: http.Header{},
		shown:   ShownURL(spec.URL),
		name:    spec.Name,
		gate:    gate,
		conns:   map[net.Conn]struct{}{},
	}
	for k, v := range spec.Headers {
		rt.headers.Set(k, v)
	}
	rt.bearer = rt.headers.Get("Authorization") != ""
	base := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rt.track(c)
	}
	rt.base = base
	// No client timeout: an event stream lasts as long as the session.
	rt.client = &http.Client{Transport: rt}
	return rt, nil
}

func originOf(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// errShut is what a request gets once the backend is going down.
var errShut = errors.New("connection closed")

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	closed := rt.closed
	rt.mu.Unlock()
	if closed {
		if req.Body != nil {
			req.Body.Close() // as a RoundTripper must, even on error
		}
		return nil, errShut
	}
	// A RoundTripper must not change the request it is given.
	req = req.Clone(req.Context())
	if originOf(req.URL) != rt.origin {
		// A redirect elsewhere: the http.Client copies the request's
		// headers, and Go keeps Authorization across a change of port
		// or to a subdomain. A token goes to its own server only.
		req.Header.Del("Authorization")
	} else {
		for k, v := range rt.headers {
			// The go-sdk's own headers (session, protocol version,
			// content type) are the protocol's: they win.
			if _, set := req.Header[k]; !set {
				req.Header[k] = v
			}
		}
	}
	setTraceHeaders(req) // tracehdr.go
	if err := withCancelReasonBody(req); err != nil {
		req.Body.Close()
		return nil, err
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if rt.oauth && resp.StatusCode == http.StatusInternalServerError && req.Header.Get("Authorization") != "" {
		resp = tokenNotVerified(resp)
	}
	rt.observe(req, resp)
	if rt.gate != nil {
		// A raw call's response (rawcall.go) comes on the body of its
		// POST, or on the older transport's one event stream: those are
		// read whole; of the rest, only what a notification needs.
		raw := req.Context().Value(rawCallKey{}) != nil
		keep := countMax
		if raw || req.Method == http.MethodGet && rt.sseSession.Load() {
			keep = rt.gate.max
		}
		switch ct := resp.Header.Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/event-stream"):
			resp.Body = &sseCounter{ReadCloser: resp.Body, gate: rt.gate, keep: keep}
		case raw && strings.HasPrefix(ct, "application/json"):
			resp.Body = &rawTap{ReadCloser: resp.Body, gate: rt.gate}
		}
	}
	return resp, nil
}

// observe records what a response says about the session: the status of
// a POST (for the transport fallback), and a 401 or 403.
func (rt *roundTripper) observe(req *http.Request, resp *http.Response) {
	denied := resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
	if req.Method != http.MethodPost && !(req.Method == http.MethodGet && rt.sseSession.Load()) {
		return
	}
	rt.mu.Lock()
	if req.Method == http.MethodPost {
		rt.post = resp.StatusCode
	}
	var deny func(error)
	var err *authError
	if denied {
		if rt.auth == nil {
			rt.auth = rt.denied(resp)
		}
		err, deny = rt.auth, rt.onDeny
		if resp.StatusCode == http.StatusUnauthorized && rt.oauth {
			deny = nil
		}
	}
	rt.mu.Unlock()
	if deny != nil {
		deny(err)
	}
}

// denied words a 401 or 403 as the user can act on it: fix the token, or
// sign in (the server's WWW-Authenticate asks for an OAuth sign-in by
// pointing to its resource metadata, RFC 9728).
func (rt *roundTripper) denied(resp *http.Response) *authError {
	msg := fmt.Sprintf("%d %s from %s", resp.StatusCode, http.StatusText(resp.StatusCode), rt.shown)
	oauth := false
	for _, v := range resp.Header.Values("WWW-Authenticate") {
		if strings.Contains(strings.ToLower(v), "resource_metadata") {
			oauth = true
		}
	}
	switch {
	case oauth && rt.bearer:
		msg += ": the token in headers was refused; this server signs in with OAuth: remove the Authorization header and run `" + oauthCommand(rt.name) + "`"
	case oauth:
		msg += ": this server signs in with OAuth: run `" + oauthCommand(rt.name) + "`"
	default:
		msg += ": check the headers (token)"
	}
	return &authError{msg: msg}
}

func (rt *roundTripper) lastPOST() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.post
}

// authErr is the 401 or 403 received, if any.
func (rt *roundTripper) authErr() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.auth == nil {
		return nil
	}
	return rt.auth
}

// onAuth sets what a 401 or 403 does from now on.
func (rt *roundTripper) onAuth(f func(error)) {
	rt.mu.Lock()
	rt.onDeny = f
	rt.mu.Unlock()
}

// onShut adds f to what shut calls (at once, if it was called already).
func (rt *roundTripper) onShut(f func()) {
	rt.mu.Lock()
	closed := rt.closed
	if !closed {
		rt.shuts = append(rt.shuts, f)
	}
	rt.mu.Unlock()
	if closed {
		f()
	}
}

// track adds a new connection to those shut closes.
func (rt *roundTripper) track(c net.Conn) (net.Conn, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		c.Close()
		return nil, errShut
	}
	rt.conns[c] = struct{}{}
	return &trackedConn{Conn: c, rt: rt}, nil
}

// shut refuses every request from now on and closes every connection:
// the requests and event streams on them fail at once.
func (rt *roundTripper) shut() {
	rt.mu.Lock()
	rt.closed = true
	conns, shuts := rt.conns, rt.shuts
	rt.conns, rt.shuts = map[net.Conn]struct{}{}, nil
	rt.mu.Unlock()
	for _, f := range shuts {
		f()
	}
	for c := range conns {
		c.Close()
	}
	rt.base.CloseIdleConnections()
}

type trackedConn struct {
	net.Conn
	rt   *roundTripper
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.rt.mu.Lock()
		delete(c.rt.conns, c.Conn)
		c.rt.mu.Unlock()
	})
	return c.Conn.Close()
}

// withCancelReasonBody puts the reason of req's context (see
// WithCancelReason) in the notifications/cancelled req carries, if it is
// one: the go-sdk sends it with a context that keeps the request's values.
func withCancelReasonBody(req *http.Request) error {
	if req.Method != http.MethodPost || req.GetBody == nil || req.Context().Value(cancelReasonKey{}) == nil ||
		req.ContentLength <= 0 || req.ContentLength > maxCancelSize {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return err
	}
	data, err := io.ReadAll(body)
	body.Close()
	if err != nil || !bytes.Contains(data, []byte(`"notifications/cancelled"`)) {
		return err
	}
	msg, err := wire.DecodeMessage(data)
	if err != nil {
		return nil // not ours to judge: sent as it is
	}
	with := withCancelReason(req.Context(), msg)
	if with == msg {
		return nil
	}
	data, err = jsonrpc.EncodeMessage(with)
	if err != nil {
		return nil
	}
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.ContentLength = int64(len(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return nil
}

// maxCancelSize bounds the bodies looked into for a notifications/cancelled
// (a few hundred bytes): a request's body is not copied for it.
const maxCancelSize = 4096

// sseCounter reads an event stream for the go-sdk and, before handing it
// over, counts each notification it carries into the gate (as childConn's
// Read does), which holds the stream back while too many are unhandled and
// lets Settle wait for them.
type sseCounter struct {
	io.ReadCloser
	gate  *childConn
	keep  int    // the most data of an event looked at: countMax, or a whole message where raw calls' responses come
	line  []byte // the current line so far
	name  []byte // the current event's name
	data  []byte // its data so far
	large bool   // its data is over keep: not looked at
	skip  bool   // the rest of the current line is not kept (over keep)
}

// countMax bounds the data of an event looked at: a notification is small,
// and a larger one only costs Settle its wait for it.
const countMax = 64 << 10

func (c *sseCounter) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if !c.skip {
			c.line = append(c.line, chunk...)
			if len(c.line) > c.keep {
				c.line, c.skip, c.large = c.line[:0], true, true
			}
		}
		if i < 0 {
			break
		}
		rest = rest[i+1:]
		if !c.skip {
			c.field(bytes.TrimSuffix(c.line, []byte{'\r'}))
		}
		c.line, c.skip = c.line[:0], false
	}
	return n, err
}

// field takes one line of the stream, as the go-sdk's scanner does.
func (c *sseCounter) field(line []byte) {
	if len(line) == 0 {
		if len(c.data) > 0 && !c.large && (len(c.name) == 0 || string(c.name) == "message") {
			switch {
			case bytes.Contains(c.data, rawIDMark):
				if msg, err := wire.DecodeMessage(c.data); err == nil {
					c.gate.raw.take(msg)
				}
			case len(c.data) <= countMax && bytes.Contains(c.data, []byte(`"notifications/`)):
				if msg, err := wire.DecodeMessage(c.data); err == nil {
					if r, ok := msg.(*jsonrpc.Request); ok && !r.IsCall() && clientNotifications[r.Method] {
						c.gate.ahead()
					}
				}
			}
		}
		if cap(c.data) > countMax {
			c.data = nil // a large message's buffer is not kept for the stream's life
		}
		c.name, c.data, c.large = c.name[:0], c.data[:0], false
		return
	}
	key, value, _ := bytes.Cut(line, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	switch string(key) {
	case "event":
		c.name = append(c.name[:0], value...)
	case "data":
		if len(c.data) > 0 {
			c.data = append(c.data, '\n')
		}
		if len(c.data)+len(value) > c.keep {
			c.large = true
			return
		}
		c.data = append(c.data, value...)
	}
}

// rawCallKey marks the context of a raw call's POST (remote.callRaw), whose
// response body rawTap or sseCounter reads for it.
type rawCallKey struct{}

// rawIDMark is in every raw call's response: its id.
var rawIDMark = []byte(`"` + rawIDPrefix)

// rawTap reads a raw call's JSON response body for the go-sdk and hands
// the response to the raw call at its end (the go-sdk drops it: an id it
// never sent).
type rawTap struct {
	io.ReadCloser
	gate *childConn
	body []byte
	over bool // longer than a message may be: the go-sdk fails it too
}

func (t *rawTap) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if !t.over {
		if len(t.body)+n > t.gate.max {
			t.over, t.body = true, nil
		} else {
			t.body = append(t.body, p[:n]...)
		}
	}
	if err == io.EOF && !t.over && len(t.body) > 0 {
		if msg, derr := wire.DecodeMessage(t.body); derr == nil {
			t.gate.raw.take(msg)
		}
		t.body, t.over = nil, true
	}
	return n, err
}

func oauthCommand(name string) string { return oauth.Command(name) }

// tokenNotVerified turns a 500 whose body is an OAuth error (RFC 6750's
// {"error": ...}, not a JSON-RPC one) into the 401 it stands for: the
// resource server's token check failed on the token sent. The TypeScript
// SDK's bearer middleware answers so when its verifier throws, as its own
// OAuth example's does for a token it no longer knows (it restarted); as
// a 401 it gets what one gets: a refresh, or "needs login". Any other 500
// is passed on as it came.
func tokenNotVerified(resp *http.Response) *http.Response {
	const limit = 4096
	head, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if err != nil || len(head) > limit || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp
	}
	var body struct {
		Error   string          `json:"error"`
		JSONRPC json.RawMessage `json:"jsonrpc"`
	}
	if json.Unmarshal(head, &body) != nil || body.JSONRPC != nil || body.Error == "" {
		return resp
	}
	resp.StatusCode, resp.Status = http.StatusUnauthorized, "401 Unauthorized"
	resp.Header = resp.Header.Clone()
	resp.Header.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	return resp
}

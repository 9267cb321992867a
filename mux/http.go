package mux

// The HTTP door's sessions (`mcp-mux serve --http ADDR`): mux/door serves
// the transport; what it asks of mux (door.HTTPCore) is here. Every HTTP
// session is a mux session like the stdio one: its own subscriptions,
// limit, log level and progress tokens, cleaned up when it ends (DELETE,
// idle timeout, or mux closing). A tools/call or resources/read that the
// pass-through can forward as bytes takes the fast path (serveFast), in
// a session of the handshake era or, with a session of mux's own that
// lives as long as the request, of the current era (statelessCall).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/door"
)

// HTTPHandler serves the merged server at door.HTTPPath, and the metrics
// at MetricsPath. Its calls end when mux closes because ServeHTTP's server
// gives every request mux's context (BaseContext): the fast path's call
// context is the request's own. Another server must do the same.
func (m *Mux) HTTPHandler(o door.HTTPOptions) http.Handler {
	// Idle sessions are mux's to end (idleSessions), not the go-sdk's: the
	// requests that take the fast path never reach its timer.
	if o.SessionIdle > 0 {
		m.goOwned(func() { m.idleSessions(o.SessionIdle) })
	}
	if o.HandOff.Seal == nil {
		// A retry's call held by another instance is handed to it, for as
		// long as that instance bounds the call (door/handoff.go).
		o.HandOff = door.HandOff{Seal: m.parked.seal, Wait: m.cfg.Mux.MaxRequestTime.Duration, Log: slog.New(m.log.WithPrefix("handoff"))}
	}
	h := door.HTTP(o, door.HTTPCore[*session]{
		Server:    m.server,
		Logger:    slog.New(m.log.WithPrefix("go-sdk http")),
		Profile:   m.unknownProfile, // /mcp/NAME and Mcp-Mux-Profile (profile.go)
		Ready:     m.first.over.Load,
		Session:   m.httpSession,
		Fast:      fastSession,
		Call:      m.httpCall,
		Stateless: m.statelessCall,
		Deleted:   func(s *session) { m.sessionEnded(s.ss) },
	})
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, m.metricsHandler(o.Token, o.Tokens)) // observe.go
	probes := door.Probes(m.Ready, o.Drain)
	mux.Handle(door.LivePath, probes)
	mux.Handle(door.ReadyPath, probes)
	mux.Handle(door.HTTPPath, h)
	mux.Handle(door.HTTPPath+"/", h) // a profile's: /mcp/NAME
	return mux
}

// ServeHTTP serves the merged server on ln until ctx ends, drains (the
// door's: o.DrainTimeout, o.Stop), then closes every HTTP session (cleaning
// each up as a stdio session is) and returns.
func (m *Mux) ServeHTTP(ctx context.Context, ln net.Listener, o door.HTTPOptions) error {
	m.mu.Lock()
	m.watchEnds = true
	m.mu.Unlock()
	m.log.Info("serving over HTTP", "url", "http://"+ln.Addr().String()+door.HTTPPath, "token", o.Token != "" || len(o.Tokens) > 0, "member_tokens", len(o.Tokens))
	if o.Drain == nil {
		o.Drain = door.NewDrain()
	}
	stop := context.AfterFunc(ctx, func() {
		m.log.Info("draining: not ready, new sessions and requests get 503, the requests in flight may finish", "drain_timeout", o.DrainTimeout)
	})
	defer stop()
	m.advertise(ln)
	err := door.ServeHTTP(ctx, ln, m.HTTPHandler(o), m.ctx, o)
	if ctx.Err() != nil {
		took, left := o.Drain.Result()
		if left > 0 {
			m.log.Warn("drained: requests still in flight were cut", "took", took.Round(time.Millisecond), "left", left)
		} else {
			m.log.Info("drained", "took", took.Round(time.Millisecond))
		}
	}
	for _, s := range m.allSessions() {
		s.ss.Close()
		if s.ss.ID() != "" {
			m.sessionEnded(s.ss) // not watched: see session
		}
	}
	return err
}

// Ready is nil once mux should be sent traffic: every backend's catalog is
// known (it runs and listed, or is remembered, or failed), else why not,
// in one line that names no backend (the probes answer it to anyone who
// can reach the port).
func (m *Mux) Ready() error {
	r := m.roster.Load()
	if r == nil {
		return errors.New("the config is not loaded yet")
	}
	starting := 0
	for _, mem := range r.members {
		select {
		case <-mem.started: // its first start ended: listed, failed, or at rest
			continue
		default:
		}
		mem.mu.Lock()
		known := mem.known // remembered, its first start not over
		mem.mu.Unlock()
		if !known {
			starting++
		}
	}
	if starting > 0 {
		return fmt.Errorf("%d of %d backends still starting (their tools are not known yet)", starting, len(r.members))
	}
	return nil
}

// httpSession is the initialized HTTP session of the Mcp-Session-Id sid,
// or nil.
func (m *Mux) httpSession(sid string) (*session, *door.HTTPSession) {
	m.mu.Lock()
	s := m.httpIDs[sid]
	m.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	return s, &s.http
}

// fastSession reports whether the fast path may serve the POSTs of s that
// ask for protocol version: a session of the handshake era, initialized.
func fastSession(s *session, version string) bool {
	p := s.ss.InitializeParams()
	return p != nil && !s.isModern() && (version == "" || version == p.ProtocolVersion)
}

// httpCall serves req, a tools/call or resources/read POSTed in s, on the
// fast path if the pass-through takes it.
func (m *Mux) httpCall(w http.ResponseWriter, r *http.Request, s *session, req *jsonrpc.Request) bool {
	// A call before any list waits, as on the go-sdk's path, for the
	// backends still starting (bounded by first_list_wait): an agent that
	// knows its tools' names calls before it lists.
	if m.waitStarted(r.Context()); !m.first.over.Load() {
		return false
	}
	pr, took := (&passThrough{m: m, s: s}).fastCall(req)
	if took {
		m.serveFast(w, r, s, req, pr)
	}
	return took
}

// statelessSeq numbers the sessions of stateless requests, for the logs.
var statelessSeq atomic.Int64

// statelessCall serves req, a tools/call or resources/read of the current
// era without a session, on the fast path if the pass-through takes it,
// with a session of its own made from the request's _meta.
func (m *Mux) statelessCall(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) bool {
	known := m.agentMetas.Of(req.Params, r.Header.Get("MCP-Protocol-Version"))
	if known == nil {
		return false
	}
	s := &session{id: "h" + strconv.FormatInt(statelessSeq.Add(1), 10), params: known.Params}
	s.askProfile(r.Header.Get(door.ProfileHeader)) // checked by the door
	s.http.BindToken(r.Header.Get(door.TokenHeader))
	pr, took := (&passThrough{m: m, s: s, known: known}).fastCall(req)
	if !took || pr.target != r.Header.Get("Mcp-Name") {
		return false
	}
	m.mu.Lock()
	if m.stateless == nil {
		m.stateless = map[*session]struct{}{}
	}
	m.stateless[s] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.stateless, s)
		m.mu.Unlock()
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
	}()
	m.serveFast(w, r, s, req, pr)
	return true
}

// serveFast runs req, which the pass-through took, and has the door write
// its response (and what came about it first) to w.
func (m *Mux) serveFast(w http.ResponseWriter, r *http.Request, s *session, req *jsonrpc.Request, pr passable) {
	s.lastActive.Store(time.Now().UnixNano())
	st := &s.http
	if s.ss == nil {
		st = nil // a stateless request's session: its own
	}
	door.ServeCall(w, r, st, req.ID, func(ctx context.Context, extra *mcp.RequestExtra) (json.RawMessage, error) {
		return m.fastForward(context.WithValue(ctx, sessionKey{}, s), s, extra, req, pr)
	})
}

// fastForward runs req at its backend, in the request's goroutine, as work
// Close waits for.
func (m *Mux) fastForward(ctx context.Context, s *session, extra *mcp.RequestExtra, req *jsonrpc.Request, pr passable) (json.RawMessage, error) {
	if !m.own() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-mux is closing"}
	}
	defer m.wg.Done()
	in := inbound{ss: s.ss, extra: extra, meta: pr.meta, method: req.Method, target: pr.target}
	if p := s.params; s.ss == nil && p != nil && p.ClientInfo != nil {
		in.client = p.ClientInfo.Name // a stateless request
	}
	res, err := forwardBytes(ctx, m, pr.mem, in, pr.rawMeta, pr.fields)
	if err != nil {
		return nil, err
	}
	if req.Method == "tools/call" {
		m.calledTool(s, pr.target)
	}
	return m.finishResult(s, pr.mem, req.Method, res), nil
}

// idleSessions ends the HTTP sessions with no POST in progress for idle
// (http_session_idle), as the go-sdk's handler would with its own timer,
// checking a tenth of idle apart, until mux closes.
func (m *Mux) idleSessions(idle time.Duration) {
	tick := time.NewTicker(min(max(idle/10, 10*time.Millisecond), 10*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case now := <-tick.C:
			m.mu.Lock()
			var stale []*session
			for _, s := range m.httpIDs {
				if s.http.Idle(now, idle) {
					stale = append(stale, s)
				}
			}
			m.mu.Unlock()
			for _, s := range stale {
				m.log.Debug("HTTP session idle: ending it", "session", s.id, "idle", idle)
				s.ss.Close()
				m.sessionEnded(s.ss)
			}
		}
	}
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
	Token    string   `json:"token,omitempty"`    // the [[token]] it came with (its name)
	Backends []string `json:"backends,omitempty"` // those it sent requests to
}

// Sessions lists the agent sessions, initialized or not, by id.
func (m *Mux) Sessions() []SessionStatus {
	var out []SessionStatus
	for _, s := range m.allSessions() {
		st := SessionStatus{ID: s.id, PID: int(s.pid.Load()), Profile: m.launch, Token: s.http.TokenName()}
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

// advertise names, in the requestStates this instance seals, the address
// its peers reach it at ([mux] http_advertise, or the listener's own), so
// that an agent's retry reaching another instance of the config is handed
// here. Without a token the others cannot open them, whatever the address.
func (m *Mux) advertise(ln net.Listener) {
	url := m.cfg.Mux.HTTPAdvertise
	if tcp, ok := ln.Addr().(*net.TCPAddr); url == "" && ok && !tcp.IP.IsUnspecified() {
		url = "http://" + tcp.String()
	}
	seal := m.parked.seal
	switch {
	case url == "":
		m.log.Info("a current-era agent's retry of a call held here must reach this instance: other instances are not told where it is (set [mux] http_advertise, or listen on one address)")
	case !seal.Shared():
		m.log.Info("a current-era agent's retry of a call held here must reach this instance: without a token the other instances cannot trust where a requestState sends them")
	}
	seal.Advertise(url)
}

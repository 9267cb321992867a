package mux

import (
	"context"
	"sync"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
)

// Logging: a backend's notifications/message reach every session of the
// handshake era that set a level at or below theirs with logging/setLevel,
// under a logger that names the backend ("notes", or "notes/<the backend's
// logger>"); they go to mcp-mux's own log too, at the matching level.
// logging/setLevel is forwarded to every backend that advertises logging,
// at the most verbose level any session asked for (each session's own
// level filters what it gets), before the agent is answered, and to a
// backend that (re)starts later.
//
// In the current era the level is asked per request (_meta
// io.modelcontextprotocol/logLevel), and a server may send messages only
// about a request that asked, on that request's stream. A backend's
// message reaches such an agent while the agent has a request that asked
// in flight to that backend, with that request. A backend of the current
// era is told the level with the request (backendMeta); one of the
// handshake era gets logging/setLevel first if it was told a less verbose
// level (ensureLogLevel).

// levelRank orders MCP's log levels (RFC 5424 severities, least first).
var levelRank = map[mcp.LoggingLevel]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

// ownLevel is the level of mcp-mux's own log a backend's message goes to.
func ownLevel(l mcp.LoggingLevel) log.Level {
	switch r := levelRank[l]; {
	case r <= levelRank["debug"]:
		return log.DebugLevel
	case r <= levelRank["notice"]:
		return log.InfoLevel
	case r <= levelRank["warning"]:
		return log.WarnLevel
	}
	return log.ErrorLevel
}

// setLevel records a session's logging/setLevel and passes the most
// verbose level any session wants on to the backends. The go-sdk records
// it for the session as well (next), which its Log filters by.
func (m *Mux) setLevel(ctx context.Context, r *mcp.ServerRequest[*mcp.SetLoggingLevelParams]) {
	if r.Params == nil {
		return
	}
	if _, ok := levelRank[r.Params.Level]; !ok {
		return // the go-sdk answers it
	}
	s := m.session(r.Session)
	s.mu.Lock()
	s.logLevel = r.Params.Level
	s.mu.Unlock()
	level, ok := m.backendLogLevel()
	if !ok {
		return
	}
	// Answered once the backends have it: a message the agent's next
	// request makes must not be dropped by a backend told too late.
	var wg sync.WaitGroup
	for _, mem := range m.members() {
		if b, err := mem.backend(); err == nil {
			wg.Go(func() { mem.setLogLevel(ctx, b, level) })
		}
	}
	wg.Wait()
}

// backendLogLevel is the most verbose level a session set, if any did.
func (m *Mux) backendLogLevel() (mcp.LoggingLevel, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var level mcp.LoggingLevel
	for _, s := range m.sessions {
		s.mu.Lock()
		l := s.logLevel
		s.mu.Unlock()
		if l != "" && (level == "" || levelRank[l] < levelRank[level]) {
			level = l
		}
	}
	return level, level != ""
}

// setLogLevel tells the backend the level, if it does logging.
func (mem *member) setLogLevel(ctx context.Context, b *backends.Backend, level mcp.LoggingLevel) {
	if b.Capabilities().Logging == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mem.m.requestTimeout(mem))
	defer cancel()
	if err := b.SetLoggingLevel(ctx, level); err != nil {
		mem.log.Warn("logging/setLevel failed", "level", level, "err", err)
		return
	}
	mem.mu.Lock()
	if mem.b == b {
		mem.logLevel = level
	}
	mem.mu.Unlock()
}

// ensureLogLevel makes sure b, a backend of the handshake era, sends
// messages of level and above: for a request of the current era that asks
// for them.
func (mem *member) ensureLogLevel(ctx context.Context, b *backends.Backend, level mcp.LoggingLevel) {
	if level == "" || b.Modern() || b.Capabilities().Logging == nil {
		return
	}
	mem.mu.Lock()
	told := mem.logLevel
	mem.mu.Unlock()
	if told != "" && levelRank[told] <= levelRank[level] {
		return
	}
	mem.setLogLevel(ctx, b, level)
}

// restoreLogLevel tells a backend that just started the level the
// sessions asked for.
func (mem *member) restoreLogLevel(ctx context.Context, b *backends.Backend) {
	if level, ok := mem.m.backendLogLevel(); ok {
		mem.setLogLevel(ctx, b, level)
	}
}

// forwardLog delivers a backend's log message. It runs in the backend's
// notification dispatch: the sending never blocks (a stdio connection
// queues what it writes; other sessions have their own queue).
func (mem *member) forwardLog(p *mcp.LoggingMessageParams) {
	m := mem.m
	mem.log.Log(ownLevel(p.Level), "backend log message", "level", p.Level, "logger", p.Logger, "data", p.Data)
	up := *p
	up.Logger = mem.spec.Name
	if p.Logger != "" {
		up.Logger += "/" + p.Logger
	}
	for _, s := range m.liveSessions() {
		if s.isModern() {
			// Only with a request that asked, on its stream.
			if ctx, ok := mem.loggingRequest(s, up.Level); ok {
				m.deliverFor(ctx, s, "notifications/message", &up)
			}
			continue
		}
		// Log sends only at or above the level the session set.
		send := func(ctx context.Context) error { return s.ss.Log(ctx, &up) }
		if s.conn.Load() != nil {
			if err := send(m.ctx); err != nil {
				mem.log.Debug("log message not delivered", "session", s.id, "err", err)
			}
			continue
		}
		if s.wantsLog(up.Level) {
			m.enqueue(s, "notifications/message", &up, send)
		}
	}
}

// wantsLog reports whether s set a level that lets a message of level
// through (as the go-sdk's Log decides), so that nothing else is queued.
func (s *session) wantsLog(level mcp.LoggingLevel) bool {
	s.mu.Lock()
	set := s.logLevel
	s.mu.Unlock()
	return set != "" && levelRank[level] >= levelRank[set]
}

// requestLogLevel is the level of log messages the agent of s wants while
// a request of its is served: the one the request's _meta (meta) asks for
// in the current era, where levels are per request, else the one the
// session set with logging/setLevel ("" for none).
func (s *session) requestLogLevel(meta mcp.Meta) mcp.LoggingLevel {
	if s == nil {
		return ""
	}
	if s.isModern() {
		level, _ := meta[mcp.MetaKeyLogLevel].(string)
		if _, ok := levelRank[mcp.LoggingLevel(level)]; !ok {
			return ""
		}
		return mcp.LoggingLevel(level)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logLevel
}

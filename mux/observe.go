package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/backends/wire"
	"github.com/mcp-mux/mcp-mux/mux/audit"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/mux/telemetry"
)

// What mux records of the requests it forwards, for whoever runs it: the
// metrics at /metrics (mux/telemetry) and the audit log (mux/audit). Every
// forwarded request, whichever door it came by, ends in run (forward.go),
// or in forward when its backend could not be had: both call observed,
// the one place a request is recorded.
//
// MetricsPath is where the metrics are served: on the HTTP listener
// (behind its token) and on [mux] metrics_listen.
const MetricsPath = "/metrics"

// observer is the mux's metrics and audit log, and the metrics listener
// of a stdio mcp-mux.
type observer struct {
	metrics *telemetry.Metrics
	audit   atomic.Pointer[audit.Log] // nil: no audit_log
	// auditDown is why the audit log the config asks for is not written
	// (nil: it is, or none is asked for). What it would have a line for
	// is refused meanwhile (refuseUnaudited).
	auditDown atomic.Pointer[string]

	mu      sync.Mutex
	stopped bool
	servers []func() // each stops a metrics listener and waits for it
}

// startObserving makes m's metrics and opens the audit log of cfg.
func (m *Mux) startObserving(cfg *config.File) {
	m.obs.metrics = telemetry.New(m.metricsState)
	m.openAudit(&cfg.Mux, auditMistake(cfg))
}

// stopObserving stops the metrics listeners and closes the audit log,
// writing what it still holds: mux is ending.
func (m *Mux) stopObserving() {
	o := &m.obs
	o.mu.Lock()
	o.stopped = true
	servers := o.servers
	o.servers = nil
	o.mu.Unlock()
	for _, stop := range servers {
		stop()
	}
	if l := o.audit.Swap(nil); l != nil {
		l.Close()
	}
	m.obs.metrics.CountAuditDropped(nil)
}

// auditMistake is the mistake that left f's audit_log unset
// (config.LoadForServing forgives it), as FILE:LINE: key: what; "" if
// none.
func auditMistake(f *config.File) string {
	if !slices.Contains(f.Invalid, "audit_log") {
		return ""
	}
	var out []string
	for _, w := range f.Warnings {
		if w.Key == "mux.audit_log" {
			out = append(out, w.String())
		}
	}
	if len(out) == 0 {
		return "mux.audit_log has a mistake"
	}
	return strings.Join(out, "; ")
}

// openAudit makes cfg's audit_log the one written (none if it is ""),
// closing the one before, if any. An audit log asked for that cannot be
// written, because of mistake (its key's, in the file) or because it
// cannot be opened, fails closed: no log, and auditDown says why.
func (m *Mux) openAudit(cfg *config.Settings, mistake string) {
	var l *audit.Log
	down := mistake
	if down == "" && cfg.AuditLog != "" {
		var err error
		if l, err = audit.Open(cfg.AuditLog, cfg.AuditArguments, m.log); err != nil {
			down, l = err.Error(), nil
		}
	}
	if down != "" {
		m.log.Error("audit log not written: tool calls, prompts and reads are refused until it is (fix audit_log and save the file): " + down)
	}
	m.obs.mu.Lock()
	if m.obs.stopped {
		m.obs.mu.Unlock()
		if l != nil {
			l.Close()
		}
		return
	}
	old := m.obs.audit.Swap(l)
	if down == "" {
		m.obs.auditDown.Store(nil)
	} else {
		m.obs.auditDown.Store(&down)
	}
	if l != nil {
		m.obs.metrics.CountAuditDropped(l.Dropped)
	} else {
		m.obs.metrics.CountAuditDropped(nil)
	}
	m.obs.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// reloadAudit applies next's audit_log and audit_arguments. A log open
// stays when they are unchanged, or when next's audit_log has a mistake
// (the log goes on where it was); one asked for and not written is tried
// again at every reload, so that saving the file after making its
// directory is enough.
func (m *Mux) reloadAudit(next *config.File) {
	mistake := auditMistake(next)
	if l := m.obs.audit.Load(); l != nil && (mistake != "" || l.Path() == next.Mux.AuditLog && l.WithArgs() == next.Mux.AuditArguments) {
		return
	}
	m.openAudit(&next.Mux, mistake)
}

// refuseUnaudited is the error of a request the audit log would have a
// line for while the log the config asks for is not written; nil if it
// may go on.
func (m *Mux) refuseUnaudited(method string) error {
	if !audited(method) {
		return nil
	}
	down := m.obs.auditDown.Load()
	if down == nil {
		return nil
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
		"mcp-mux refuses %s: the audit log the config asks for cannot be written, and nothing it would record runs unrecorded (fix audit_log and save the file; mcp-mux applies it at once): %s", method, *down)}
}

// reloadObserving applies a reload to what mux records: a backend that
// is gone loses its series (the audit log is reloadAudit's).
func (m *Mux) reloadObserving(p reloadPlan) {
	for _, name := range p.remove {
		m.obs.metrics.Forget(name)
	}
}

// The methods a forwarded request may be: a fixed set, so that each
// member keeps its series in an array.
const (
	methodToolsCall = iota
	methodResourcesRead
	methodPromptsGet
	methodComplete
	methodSubscribe
	methodOther
	nMethods
)

func methodIndex(method string) int {
	switch method {
	case "tools/call":
		return methodToolsCall
	case "resources/read":
		return methodResourcesRead
	case "prompts/get":
		return methodPromptsGet
	case "completion/complete":
		return methodComplete
	case "resources/subscribe":
		return methodSubscribe
	}
	return methodOther
}

// memberSeries is a member's request metrics by method, resolved on first
// use.
type memberSeries [nMethods]atomic.Pointer[telemetry.Series]

// seriesOf is mem's series of method, or nil for a member a reload
// stopped (its series are deleted: resolving them would make them anew).
func (m *Mux) seriesOf(mem *member, method string) *telemetry.Series {
	i := methodIndex(method)
	if s := mem.series[i].Load(); s != nil {
		return s
	}
	if mem.ctx.Err() != nil {
		return nil
	}
	name := method
	if i == methodOther {
		name = "other"
	}
	s := m.obs.metrics.Series(mem.spec.Name, name)
	mem.series[i].Store(s)
	return s
}

// observed records one request forwarded to mem that ended with res (the
// backend's result as it sent it, if it was bytes) or err, in ctx (whose
// cause tells mux's timeout from the agent's cancellation).
func (m *Mux) observed(ctx context.Context, mem *member, in *inbound, res json.RawMessage, err error) {
	d := time.Since(in.start)
	o := outcomeOf(ctx, in.method, res, err)
	if s := m.seriesOf(mem, in.method); s != nil {
		s.Observe(o, d)
	}
	if l := m.obs.audit.Load(); l != nil && audited(in.method) {
		m.auditLine(ctx, l, mem, in, d, o.String())
	}
}

// outcomeOf is how a request ended: its error, or for a tool call a result
// that is a tool's error.
func outcomeOf(ctx context.Context, method string, res json.RawMessage, err error) telemetry.Outcome {
	switch {
	case err == nil && method == "tools/call" && isToolError(res):
		return telemetry.ToolError
	case err == nil:
		return telemetry.OK
	case context.Cause(ctx) == errTimedOut:
		return telemetry.Timeout
	case ctx.Err() != nil:
		return telemetry.Cancelled
	}
	return telemetry.Error
}

// isToolError reports whether res, a tools/call result as the backend
// sent it, has isError true. Most results have no isError at all: only
// those that name it are parsed.
func isToolError(res json.RawMessage) bool {
	if !bytes.Contains(res, []byte(`"isError"`)) {
		return false
	}
	v, ok := wire.ObjectMember(res, "isError")
	return ok && string(bytes.TrimSpace(v)) == "true"
}

// audited: the requests the audit log has a line for.
func audited(method string) bool {
	return method == "tools/call" || method == "prompts/get" || method == "resources/read"
}

// outcomeRefused is the audit outcome of a call mux did not run: a
// wrapper refused it (wrappers.go). The metrics do not count it: no
// backend had it.
const outcomeRefused = "refused"

// auditRefused queues the audit line of a call a wrapper refused.
func (m *Mux) auditRefused(ctx context.Context, mem *member, in *inbound) {
	if l := m.obs.audit.Load(); l != nil {
		m.auditLine(ctx, l, mem, in, time.Since(in.start), outcomeRefused)
	}
}

// auditLine queues the audit line of one request.
func (m *Mux) auditLine(ctx context.Context, l *audit.Log, mem *member, in *inbound, d time.Duration, outcome string) {
	e := audit.Entry{Time: in.start, Backend: mem.spec.Name, Method: in.method, Target: in.target, Via: in.via, Duration: d, Outcome: outcome}
	if s := sessionFrom(ctx); s != nil {
		e.Session = s.id
		e.Token = s.http.TokenName()
		if p := s.initParams(); p != nil && p.ClientInfo != nil {
			e.Agent = p.ClientInfo.Name
		}
	}
	if in.client != "" {
		e.Agent = in.client
	}
	if members, ok := wire.ObjectMembers(in.args); ok && len(members) > 0 {
		e.ArgNames = make([]string, 0, len(members))
		for k := range members {
			e.ArgNames = append(e.ArgNames, k)
		}
		slices.Sort(e.ArgNames)
		if l.WithArgs() {
			e.Args = bytes.Clone(in.args) // the request's bytes: not kept past it
		}
	}
	l.Record(e)
}

// notified counts a notification sent to an agent.
func (m *Mux) notified(method string) { m.obs.metrics.Notified(method) }

// metricsState is what /metrics reads of the mux when it is scraped: each
// backend's state and restarts, and the sessions by transport.
func (m *Mux) metricsState() telemetry.State {
	st := telemetry.State{BackendStates: backendStates}
	for _, mem := range m.members() {
		mem.mu.Lock()
		b := telemetry.BackendState{Name: mem.spec.Name, Up: mem.state == stateReady, State: mem.state, Restarts: mem.restarts}
		mem.mu.Unlock()
		st.Backends = append(st.Backends, b)
	}
	st.Sessions = map[string]int{}
	if tokens := m.conf.Load().cfg.Tokens; len(tokens) > 0 {
		st.TokenSessions = map[string]int{}
		for _, t := range tokens {
			st.TokenSessions[t.Name] = 0
		}
	}
	count := func(s *session) {
		if s.conn.Load() != nil {
			st.Sessions["stdio"]++
		} else if name := s.http.TokenName(); name != "" {
			if st.TokenSessions == nil {
				st.TokenSessions = map[string]int{}
			}
			st.TokenSessions[name]++ // a token a reload removed, until its sessions end
		} else {
			st.Sessions["http"]++
		}
	}
	m.mu.Lock()
	for _, s := range m.sessions {
		count(s)
	}
	for s := range m.stateless {
		count(s)
	}
	m.mu.Unlock()
	return st
}

// metricsHandler serves /metrics behind the checks of the HTTP door: a
// browser page's Origin, and the bearer token when there is one (the
// backends' names and traffic are not for anyone who can reach the port).
func (m *Mux) metricsHandler(token string, tokens []config.Token) http.Handler {
	return door.Guard(token, tokens, m.obs.metrics.Handler())
}

// WriteMetrics writes what /metrics shows, in the Prometheus text format.
func (m *Mux) WriteMetrics(w io.Writer) { m.obs.metrics.WriteText(w) }

// ServeMetrics serves /metrics on ln (a stdio mcp-mux's [mux]
// metrics_listen), requiring token (or one of tokens, those of every
// view) if there is one, until mux ends.
func (m *Mux) ServeMetrics(ln net.Listener, token string, tokens []config.Token) {
	hm := http.NewServeMux()
	hm.Handle(MetricsPath, m.metricsHandler(token, tokens))
	probes := door.Probes(m.Ready, nil) // no drain: a stdio mcp-mux's exit is its agent's
	hm.Handle(door.LivePath, probes)
	hm.Handle(door.ReadyPath, probes)
	srv := &http.Server{Handler: hm, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	m.obs.mu.Lock()
	if m.obs.stopped {
		m.obs.mu.Unlock()
		ln.Close()
		return
	}
	m.obs.servers = append(m.obs.servers, func() {
		srv.Close()
		<-done
	})
	m.obs.mu.Unlock()
	go func() {
		defer close(done)
		srv.Serve(ln) // until stopObserving closes srv
	}()
	m.log.Info("serving metrics", "url", "http://"+ln.Addr().String()+MetricsPath, "token", token != "" || len(tokens) > 0)
}

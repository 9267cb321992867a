// Package telemetry is mcp-mux's metrics, in the Prometheus text format at
// /metrics: requests forwarded to backends by backend, method and
// outcome, with their durations; each backend's state and restarts; agent
// sessions by transport; notifications sent to agents by kind.
//
// Labels are only what the config and the protocol bound: backend names,
// MCP methods, a fixed set of outcomes, transports and notification kinds.
// Tool names, URIs and session ids never are: an agent could make them
// without bound.
//
// The request path pays a counter and a histogram observation: each
// backend and method's series are resolved once (Series) and kept by the
// caller. What the mux knows anyway (backends' states, sessions) is read
// when /metrics is scraped (State), not counted as it changes.
package telemetry

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcome is how a forwarded request ended.
type Outcome uint8

const (
	OK        Outcome = iota
	Error             // a JSON-RPC error, the backend's or mux's
	ToolError         // a tools/call result with isError true
	Cancelled         // the agent cancelled it, or went away
	Timeout           // request_timeout (or max_request_time) passed
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"ok", "error", "tool_error", "cancelled", "timeout"}

func (o Outcome) String() string { return outcomeNames[o] }

// Notification kinds: what an agent is sent, by method; any other method
// counts as "other", so that the label stays a fixed set.
var noteKinds = []string{
	"notifications/tools/list_changed", "notifications/prompts/list_changed",
	"notifications/resources/list_changed", "notifications/resources/updated",
	"notifications/progress", "notifications/message",
	"notifications/elicitation/complete", "notifications/cancelled",
}

// noteLabel is the kind label of a notification method: its name without
// "notifications/".
func noteLabel(method string) string { return method[len("notifications/"):] }

// BackendState is one backend as a scrape sees it.
type BackendState struct {
	Name     string
	Up       bool // ready: it answers requests
	Restarts int  // since it was started with its current settings
}

// State is what the mux knows at scrape time.
type State struct {
	Backends []BackendState
	Sessions map[string]int // by transport: "stdio", "http"
}

// Metrics is one mux's metrics, in a registry of its own (two muxes in one
// process, as tests make, count apart).
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	notes    []prometheus.Counter // by noteKinds, then other
	// AuditDropped counts audit lines dropped because the writer was
	// behind (audit.Log); exported as mcp_mux_audit_dropped_total.
	auditDropped atomic.Pointer[func() uint64]
}

// New makes the metrics; state is called at each scrape.
func New(state func() State) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_mux_requests_total",
		Help: "Agent requests forwarded to a backend, by backend, MCP method and outcome (ok, error, tool_error, cancelled, timeout).",
	}, []string{"backend", "method", "outcome"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcp_mux_request_duration_seconds",
		Help: "How long agent requests forwarded to a backend took, from mcp-mux receiving them to the backend's answer (or the error).",
		// From a fast local tool (a fraction of a millisecond) to the
		// default request_timeout and past it (progress extends it).
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"backend", "method"})
	notes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_mux_notifications_total",
		Help: "Notifications sent to agents, by kind (the method without \"notifications/\"; other for any other).",
	}, []string{"kind"})
	for _, k := range noteKinds {
		m.notes = append(m.notes, notes.WithLabelValues(noteLabel(k)))
	}
	m.notes = append(m.notes, notes.WithLabelValues("other"))
	m.reg.MustRegister(m.requests, m.duration, notes, &stateCollector{m: m, state: state})
	return m
}

// Handler serves the metrics in the Prometheus text format (or another
// the scraper asks for).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Series is one backend's and method's request metrics, resolved: what a
// request costs is an increment and an observation.
type Series struct {
	count    [nOutcomes]prometheus.Counter
	duration prometheus.Observer
}

// Series resolves backend's series of method. Each call resolves them
// anew: keep it.
func (m *Metrics) Series(backend, method string) *Series {
	s := &Series{duration: m.duration.WithLabelValues(backend, method)}
	for o := range nOutcomes {
		s.count[o] = m.requests.WithLabelValues(backend, method, o.String())
	}
	return s
}

// Observe counts one request that ended with o after d.
func (s *Series) Observe(o Outcome, d time.Duration) {
	s.count[o].Inc()
	s.duration.Observe(d.Seconds())
}

// Notified counts a notification of method sent to an agent.
func (m *Metrics) Notified(method string) {
	for i, k := range noteKinds {
		if k == method {
			m.notes[i].Inc()
			return
		}
	}
	m.notes[len(noteKinds)].Inc()
}

// Forget deletes the series of a backend that is gone (a reload removed
// it): the names in the config bound the labels only if they leave with
// it. Series resolved before stay usable, and count unseen.
func (m *Metrics) Forget(backend string) {
	m.requests.DeletePartialMatch(prometheus.Labels{"backend": backend})
	m.duration.DeletePartialMatch(prometheus.Labels{"backend": backend})
}

// CountAuditDropped makes /metrics show dropped(), the audit lines
// dropped so far, or nothing for nil.
func (m *Metrics) CountAuditDropped(dropped func() uint64) {
	if dropped == nil {
		m.auditDropped.Store(nil)
		return
	}
	m.auditDropped.Store(&dropped)
}

// stateCollector reads what the mux knows at scrape time.
type stateCollector struct {
	m     *Metrics
	state func() State
}

var (
	upDesc = prometheus.NewDesc("mcp_mux_backend_up",
		"Whether the backend is running and ready (1) or not (0: starting, restarting, stopped, failed, at rest).", []string{"backend"}, nil)
	restartsDesc = prometheus.NewDesc("mcp_mux_backend_restarts_total",
		"Restarts of the backend after it went down, since it was started with its current settings.", []string{"backend"}, nil)
	sessionsDesc = prometheus.NewDesc("mcp_mux_sessions",
		"Agent sessions, by transport (stdio, http).", []string{"transport"}, nil)
	auditDroppedDesc = prometheus.NewDesc("mcp_mux_audit_dropped_total",
		"Audit log lines dropped because writing them fell behind.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upDesc
	ch <- restartsDesc
	ch <- sessionsDesc
	ch <- auditDroppedDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state()
	for _, b := range st.Backends {
		up := 0.0
		if b.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, b.Name)
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(b.Restarts), b.Name)
	}
	for _, t := range []string{"stdio", "http"} {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(st.Sessions[t]), t)
	}
	if f := c.m.auditDropped.Load(); f != nil {
		ch <- prometheus.MustNewConstMetric(auditDroppedDesc, prometheus.CounterValue, float64((*f)()))
	}
}

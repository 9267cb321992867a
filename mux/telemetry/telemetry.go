// Package telemetry is mcp-mux's metrics, in the Prometheus text format at
// /metrics: requests forwarded to backends by backend, method and
// outcome, with their durations; each backend's state (up, and which)
// and restarts; agent
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
//
// The text format is written here rather than by the Prometheus client
// library: eight metric families of counters, gauges and one histogram
// are a few atomics and a printer, and the library brought the protobuf
// runtime along, whose init and code were 1.3-1.7 MB of every mcp-mux's
// resident memory (binary 28.9 -> 25.3 MB).
package telemetry

import (
	"bufio"
	"cmp"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
var noteKinds = [...]string{
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
	Up       bool   // ready: it answers requests
	State    string // one of State.BackendStates
	Restarts int    // since it was started with its current settings
}

// State is what the mux knows at scrape time.
type State struct {
	Backends []BackendState
	// BackendStates are the states a backend can be in, each a series of
	// mcp_mux_backend_state per backend: one that is not there reads as
	// absent, not as 0, to a rule.
	BackendStates []string
	Sessions      map[string]int // by transport: "stdio", "http" (not those of TokenSessions)
	// TokenSessions are the HTTP sessions of each [[token]] (by its
	// name, every one the config has), a series each: the names are the
	// file's, so their number is bounded.
	TokenSessions map[string]int
}

// buckets are the upper bounds of the request duration histogram, in
// seconds: from a fast local tool (a fraction of a millisecond) to the
// default request_timeout and past it (progress extends it).
var buckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics is one mux's metrics (two muxes in one process, as tests make,
// count apart).
type Metrics struct {
	state func() State
	notes [len(noteKinds) + 1]atomic.Uint64 // by noteKinds, then other

	mu     sync.Mutex
	series map[seriesKey]*Series

	// auditDropped counts audit lines dropped because the writer was
	// behind (audit.Log); exported as mcp_mux_audit_dropped_total.
	auditDropped atomic.Pointer[func() uint64]
}

type seriesKey struct{ backend, method string }

// New makes the metrics; state is called at each scrape.
func New(state func() State) *Metrics {
	return &Metrics{state: state, series: map[seriesKey]*Series{}}
}

// Series is one backend's and method's request metrics, resolved: what a
// request costs is an increment and an observation.
type Series struct {
	key      seriesKey
	count    [nOutcomes]atomic.Uint64
	buckets  [len(buckets) + 1]atomic.Uint64 // per bucket (not cumulative), then +Inf
	sumNanos atomic.Int64
}

// Series resolves backend's series of method: the same one each time,
// until Forget. Resolving takes a lock: keep it.
func (m *Metrics) Series(backend, method string) *Series {
	k := seriesKey{backend, method}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.series[k]
	if s == nil {
		s = &Series{key: k}
		m.series[k] = s
	}
	return s
}

// Observe counts one request that ended with o after d.
func (s *Series) Observe(o Outcome, d time.Duration) {
	s.count[o].Add(1)
	sec := d.Seconds()
	i := 0
	for i < len(buckets) && sec > buckets[i] {
		i++
	}
	s.buckets[i].Add(1)
	s.sumNanos.Add(int64(d))
}

// Notified counts a notification of method sent to an agent.
func (m *Metrics) Notified(method string) {
	for i, k := range noteKinds {
		if k == method {
			m.notes[i].Add(1)
			return
		}
	}
	m.notes[len(noteKinds)].Add(1)
}

// Forget deletes the series of a backend that is gone (a reload removed
// it): the names in the config bound the labels only if they leave with
// it. Series resolved before stay usable, and count unseen.
func (m *Metrics) Forget(backend string) {
	m.mu.Lock()
	maps.DeleteFunc(m.series, func(k seriesKey, _ *Series) bool { return k.backend == backend })
	m.mu.Unlock()
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

// ContentType is that of the Prometheus text format, version 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		if r.Method == http.MethodHead {
			return
		}
		bw := bufio.NewWriter(w)
		m.write(bw)
		bw.Flush()
	})
}

// WriteText writes the metrics in the Prometheus text format.
func (m *Metrics) WriteText(w io.Writer) {
	bw := bufio.NewWriter(w)
	m.write(bw)
	bw.Flush()
}

// write writes every family that has a series, in the order of their
// names; backends and methods in the order of their names (they come from
// maps), fixed label sets (outcomes, kinds, transports) in their own.
func (m *Metrics) write(w *bufio.Writer) {
	m.mu.Lock()
	series := slices.Collect(maps.Values(m.series))
	m.mu.Unlock()
	slices.SortFunc(series, func(a, b *Series) int {
		return cmp.Or(strings.Compare(a.key.backend, b.key.backend), strings.Compare(a.key.method, b.key.method))
	})
	st := m.state()
	slices.SortFunc(st.Backends, func(a, b BackendState) int { return strings.Compare(a.Name, b.Name) })

	if f := m.auditDropped.Load(); f != nil {
		family(w, "mcp_mux_audit_dropped_total", "counter", "Audit log lines dropped because writing them fell behind.")
		sample(w, "mcp_mux_audit_dropped_total", nil, float64((*f)()))
	}
	if len(st.Backends) > 0 {
		family(w, "mcp_mux_backend_restarts_total", "counter", "Restarts of the backend after it went down, since it was started with its current settings.")
		for _, b := range st.Backends {
			sample(w, "mcp_mux_backend_restarts_total", []string{"backend", b.Name}, float64(b.Restarts))
		}
		family(w, "mcp_mux_backend_state", "gauge", "The backend's state: 1 for the one it is in, 0 for each other (remembered and idle are at rest, not down).")
		for _, b := range st.Backends {
			for _, s := range st.BackendStates {
				in := 0.0
				if s == b.State {
					in = 1
				}
				sample(w, "mcp_mux_backend_state", []string{"backend", b.Name, "state", s}, in)
			}
		}
		family(w, "mcp_mux_backend_up", "gauge", "Whether the backend is running and ready (1) or not (0: starting, restarting, stopped, failed, at rest).")
		for _, b := range st.Backends {
			up := 0.0
			if b.Up {
				up = 1
			}
			sample(w, "mcp_mux_backend_up", []string{"backend", b.Name}, up)
		}
	}
	family(w, "mcp_mux_notifications_total", "counter", "Notifications sent to agents, by kind (the method without \"notifications/\"; other for any other).")
	for i, k := range noteKinds {
		sample(w, "mcp_mux_notifications_total", []string{"kind", noteLabel(k)}, float64(m.notes[i].Load()))
	}
	sample(w, "mcp_mux_notifications_total", []string{"kind", "other"}, float64(m.notes[len(noteKinds)].Load()))
	if len(series) > 0 {
		const name = "mcp_mux_request_duration_seconds"
		family(w, name, "histogram", "How long agent requests forwarded to a backend took, from mcp-mux receiving them to the backend's answer (or the error).")
		for _, s := range series {
			labels := []string{"backend", s.key.backend, "method", s.key.method, "le", ""}
			var total uint64
			for i := range s.buckets {
				total += s.buckets[i].Load()
				labels[5] = "+Inf"
				if i < len(buckets) {
					labels[5] = formatFloat(buckets[i])
				}
				sample(w, name+"_bucket", labels, float64(total))
			}
			sample(w, name+"_sum", labels[:4], time.Duration(s.sumNanos.Load()).Seconds())
			sample(w, name+"_count", labels[:4], float64(total))
		}
		family(w, "mcp_mux_requests_total", "counter", "Agent requests forwarded to a backend, by backend, MCP method and outcome (ok, error, tool_error, cancelled, timeout).")
		for _, s := range series {
			for o := range nOutcomes {
				sample(w, "mcp_mux_requests_total", []string{"backend", s.key.backend, "method", s.key.method, "outcome", o.String()}, float64(s.count[o].Load()))
			}
		}
	}
	family(w, "mcp_mux_sessions", "gauge", "Agent sessions, by transport (stdio, http) and, for those that came with a [[token]], its name.")
	for _, t := range []string{"http", "stdio"} {
		sample(w, "mcp_mux_sessions", []string{"transport", t}, float64(st.Sessions[t]))
	}
	for _, name := range slices.Sorted(maps.Keys(st.TokenSessions)) {
		sample(w, "mcp_mux_sessions", []string{"transport", "http", "token", name}, float64(st.TokenSessions[name]))
	}
}

// family writes the HELP and TYPE lines of a metric family.
func family(w *bufio.Writer, name, typ, help string) {
	w.WriteString("# HELP " + name + " ")
	w.WriteString(strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help))
	w.WriteString("\n# TYPE " + name + " " + typ + "\n")
}

// labelEscaper escapes a label value as the text format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// sample writes one sample line; labels are name, value pairs.
func sample(w *bufio.Writer, name string, labels []string, v float64) {
	w.WriteString(name)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			w.WriteByte('{')
		} else {
			w.WriteByte(',')
		}
		w.WriteString(labels[i] + `="`)
		labelEscaper.WriteString(w, labels[i+1])
		w.WriteByte('"')
	}
	if len(labels) > 0 {
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

// formatFloat is v as the text format writes numbers.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

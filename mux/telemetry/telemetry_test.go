package telemetry

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape serves m's metrics once and parses them as Prometheus does.
func scrape(t *testing.T, m *Metrics) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != ContentType {
		t.Fatalf("GET /metrics: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	text := rec.Body.String()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the text does not parse: %v\n%s", err, text)
	}
	return families, text
}

// find is the series of family with exactly labels, or nil.
func find(families map[string]*dto.MetricFamily, family string, labels ...string) *dto.Metric {
	f := families[family]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i, l := range m.GetLabel() {
			if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// TestTheTextIsWhatPrometheusReads: counters per outcome (zero ones too),
// a histogram with cumulative buckets, its sum and count, gauges from the
// state, notifications by kind, and label values that need escaping, as
// Prometheus's own parser reads them.
func TestTheTextIsWhatPrometheusReads(t *testing.T) {
	m := New(func() State {
		return State{
			Backends:      []BackendState{{Name: "b", Up: true, State: "ready", Restarts: 2}, {Name: `a"\` + "\n", Up: false, State: "needs login"}},
			BackendStates: []string{"ready", "needs login", "failed"},
			Sessions:      map[string]int{"stdio": 1},
		}
	})
	s := m.Series("b", "tools/call")
	if m.Series("b", "tools/call") != s {
		t.Error("resolving a series twice gave two")
	}
	s.Observe(OK, 300*time.Microsecond) // le 0.0005
	s.Observe(OK, 2*time.Millisecond)   // le 0.0025
	s.Observe(ToolError, time.Second)   // le 1 (bounds are inclusive)
	s.Observe(Timeout, time.Hour)       // +Inf only
	m.Notified("notifications/resources/updated")
	m.Notified("notifications/resources/updated")
	m.Notified("notifications/whatever")
	var dropped uint64 = 7
	m.CountAuditDropped(func() uint64 { return dropped })

	families, text := scrape(t, m)
	for outcome, want := range map[string]float64{"ok": 2, "error": 0, "tool_error": 1, "cancelled": 0, "timeout": 1} {
		c := find(families, "mcp_mux_requests_total", "backend", "b", "method", "tools/call", "outcome", outcome)
		if c == nil || c.GetCounter().GetValue() != want {
			t.Errorf("requests %s: %v, want %v\n%s", outcome, c, want, text)
		}
	}
	h := find(families, "mcp_mux_request_duration_seconds", "backend", "b", "method", "tools/call").GetHistogram()
	if h.GetSampleCount() != 4 || h.GetSampleSum() < 3601.002 || h.GetSampleSum() > 3601.0024 {
		t.Errorf("histogram count %d sum %v, want 4 and 3601.0023", h.GetSampleCount(), h.GetSampleSum())
	}
	cumulative := map[float64]uint64{0.0005: 1, 0.001: 1, 0.0025: 2, 0.5: 2, 1: 3, 300: 3}
	for _, b := range h.GetBucket() {
		if want, ok := cumulative[b.GetUpperBound()]; ok && b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if bs := h.GetBucket(); len(bs) != len(buckets)+1 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) || bs[len(bs)-1].GetCumulativeCount() != 4 {
		t.Errorf("%d buckets, want %d and +Inf holding all 4:\n%s", len(bs), len(buckets), text)
	}
	for _, want := range []struct {
		family string
		labels []string
		value  float64
	}{
		{"mcp_mux_backend_up", []string{"backend", "b"}, 1},
		{"mcp_mux_backend_up", []string{"backend", `a"\` + "\n"}, 0},
		{"mcp_mux_backend_restarts_total", []string{"backend", "b"}, 2},
		{"mcp_mux_backend_state", []string{"backend", "b", "state", "ready"}, 1},
		{"mcp_mux_backend_state", []string{"backend", "b", "state", "failed"}, 0},
		{"mcp_mux_backend_state", []string{"backend", `a"\` + "\n", "state", "needs login"}, 1},
		{"mcp_mux_backend_state", []string{"backend", `a"\` + "\n", "state", "ready"}, 0},
		{"mcp_mux_sessions", []string{"transport", "stdio"}, 1},
		{"mcp_mux_sessions", []string{"transport", "http"}, 0},
		{"mcp_mux_notifications_total", []string{"kind", "resources/updated"}, 2},
		{"mcp_mux_notifications_total", []string{"kind", "other"}, 1},
		{"mcp_mux_notifications_total", []string{"kind", "progress"}, 0},
		{"mcp_mux_audit_dropped_total", nil, 7},
	} {
		got := find(families, want.family, want.labels...)
		v := got.GetCounter().GetValue() + got.GetGauge().GetValue() + got.GetUntyped().GetValue()
		if got == nil || v != want.value {
			t.Errorf("%s%v = %v, want %v\n%s", want.family, want.labels, got, want.value, text)
		}
	}
	if families["mcp_mux_requests_total"].GetType() != dto.MetricType_COUNTER ||
		families["mcp_mux_request_duration_seconds"].GetType() != dto.MetricType_HISTOGRAM ||
		families["mcp_mux_sessions"].GetType() != dto.MetricType_GAUGE {
		t.Errorf("types:\n%s", text)
	}
}

// TestForgetDropsABackendsSeries: a backend gone by reload leaves no
// series; one resolved before goes on counting, unseen; resolving it
// again starts from zero.
func TestForgetDropsABackendsSeries(t *testing.T) {
	m := New(func() State { return State{} })
	old := m.Series("gone", "tools/call")
	old.Observe(OK, time.Millisecond)
	m.Series("kept", "tools/call").Observe(OK, time.Millisecond)
	m.Forget("gone")
	old.Observe(OK, time.Millisecond)
	families, text := scrape(t, m)
	if find(families, "mcp_mux_requests_total", "backend", "gone", "method", "tools/call", "outcome", "ok") != nil ||
		strings.Contains(text, `backend="gone"`) {
		t.Errorf("a forgotten backend's series are still there:\n%s", text)
	}
	if c := find(families, "mcp_mux_requests_total", "backend", "kept", "method", "tools/call", "outcome", "ok"); c.GetCounter().GetValue() != 1 {
		t.Errorf("kept: %v", c)
	}
	m.Series("gone", "tools/call")
	families, _ = scrape(t, m)
	if c := find(families, "mcp_mux_requests_total", "backend", "gone", "method", "tools/call", "outcome", "ok"); c == nil || c.GetCounter().GetValue() != 0 {
		t.Errorf("a backend back after Forget: %v, want a series from 0", c)
	}
}

// TestOnlyGETAndHEAD: a scrape is a GET; HEAD gets the headers.
func TestOnlyGETAndHEAD(t *testing.T) {
	m := New(func() State { return State{} })
	for method, want := range map[string]int{http.MethodPost: http.StatusMethodNotAllowed, http.MethodHead: http.StatusOK} {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(method, "/metrics", nil))
		if rec.Code != want || (method == http.MethodHead && rec.Body.Len() != 0) {
			t.Errorf("%s: %d %q, want %d", method, rec.Code, rec.Body.String(), want)
		}
	}
}

// BenchmarkObserve is what a request pays.
func BenchmarkObserve(b *testing.B) {
	s := New(func() State { return State{} }).Series("b", "tools/call")
	b.ReportAllocs()
	for b.Loop() {
		s.Observe(OK, 3*time.Millisecond)
	}
}

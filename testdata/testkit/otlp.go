package testkit

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an OTLP/HTTP trace collector for tests: it takes the
// protobuf ExportTraceServiceRequests POSTed to /v1/traces (gzipped or
// not), decoding them with the generated OTLP types, and keeps their
// spans. Set OTEL_EXPORTER_OTLP_ENDPOINT to URL.
type OTLPReceiver struct {
	URL string

	mu       sync.Mutex
	spans    []Span
	services []string // each export's service.name
	exports  []Export
	attempts int
	fail     []Failure // the answers to the next requests, first first
}

// Export is one request the receiver took: its headers and what the
// generated types decode of its body.
type Export struct {
	Header  http.Header
	Request *coltracepb.ExportTraceServiceRequest
}

// Failure is an error answer the receiver gives instead of taking a
// request: Status, with a Retry-After header if RetryAfter is not "".
type Failure struct {
	Status     int
	RetryAfter string
}

// Span is what a test looks at of an exported span: ids in hex, as
// traceparent writes them.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          string
	Attrs                         map[string]string // string, int and bool values, as text
	Error                         bool              // status code Error
	StatusMessage                 string
}

// StartOTLPReceiver starts a receiver; it stops when the test ends.
func StartOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	r := &OTLPReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	r.attempts++
	if len(r.fail) > 0 {
		f := r.fail[0]
		r.fail = r.fail[1:]
		r.mu.Unlock()
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		http.Error(w, http.StatusText(f.Status), f.Status)
		return
	}
	r.mu.Unlock()
	var in io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		in = zr
	}
	body, err := io.ReadAll(in)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.exports = append(r.exports, Export{Header: req.Header.Clone(), Request: &export})
	for _, rs := range export.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				r.services = append(r.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, spanOf(s))
			}
		}
	}
	r.mu.Unlock()
	data, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(data)
}

func spanOf(s *tracepb.Span) Span {
	out := Span{
		TraceID:       hex.EncodeToString(s.TraceId),
		SpanID:        hex.EncodeToString(s.SpanId),
		ParentSpanID:  hex.EncodeToString(s.ParentSpanId),
		Name:          s.Name,
		Kind:          s.Kind.String(),
		Attrs:         map[string]string{},
		Error:         s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
		StatusMessage: s.GetStatus().GetMessage(),
	}
	for _, kv := range s.Attributes {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out.Attrs[kv.Key] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out.Attrs[kv.Key] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out.Attrs[kv.Key] = strconv.FormatBool(x.BoolValue)
		default:
			out.Attrs[kv.Key] = v.String()
		}
	}
	return out
}

// Spans is what was received so far.
func (r *OTLPReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Services is the service.name of each resource received so far.
func (r *OTLPReceiver) Services() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.services...)
}

// Exports is the requests taken so far.
func (r *OTLPReceiver) Exports() []Export {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Export(nil), r.exports...)
}

// Attempts is how many requests reached the receiver, taken or failed.
func (r *OTLPReceiver) Attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

// FailNext makes the receiver answer its next requests with fs, one
// each, before it takes requests again.
func (r *OTLPReceiver) FailNext(fs ...Failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = append(r.fail, fs...)
}

// SpanWithID is the received span with id spanID, if any.
func (r *OTLPReceiver) SpanWithID(spanID string) (Span, bool) {
	for _, s := range r.Spans() {
		if s.SpanID == spanID {
			return s, true
		}
	}
	return Span{}, false
}

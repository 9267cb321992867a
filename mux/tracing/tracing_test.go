package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestEnabledOnlyWithAnEndpointAndNotTurnedOff(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := Enabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

func testTracer() (*Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	return &Tracer{tp: tp, tracer: tp.Tracer("test")}, exp
}

// The backend's _meta is the agent's, but for the trace context: a
// traceparent naming mux's span in the agent's trace, the tracestate
// passed on; the agent's own map is left as it was.
func TestStartContinuesTheAgentsTrace(t *testing.T) {
	tr, exp := testTracer()
	agent := map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "a=1", "k": "v"}
	span, meta := tr.Start(context.Background(), Request{Method: "tools/call", Backend: "fx", Target: "fx__echo"}, agent)
	span.End(nil, nil)
	if agent["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("the agent's _meta was changed: %v", agent)
	}
	s := exp.GetSpans()[0]
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + s.SpanContext.SpanID().String() + "-01"
	if meta["traceparent"] != want || span.Traceparent != want || meta["tracestate"] != "a=1" || span.Tracestate != "a=1" || meta["k"] != "v" {
		t.Errorf("backend's _meta %v (span's %q %q), want traceparent %s, tracestate a=1, k", meta, span.Traceparent, span.Tracestate, want)
	}
	if s.Parent.SpanID().String() != "00f067aa0ba902b7" || s.Name != "tools/call fx__echo" {
		t.Errorf("span %q, parent %s: want tools/call fx__echo, child of the agent's span", s.Name, s.Parent.SpanID())
	}
}

// An agent's traceparent that is not valid starts a new trace, and its
// tracestate, which belongs to that trace, is not passed on.
func TestStartWithAnInvalidTraceparentStartsANewTrace(t *testing.T) {
	tr, exp := testTracer()
	_, meta := tr.Start(context.Background(), Request{Method: "resources/read", Target: "x://y"}, map[string]any{"traceparent": "garbage", "tracestate": "a=1"})
	s := exp.GetSpans()
	if len(s) != 0 {
		t.Fatalf("a span ended before End: %v", s)
	}
	tp, _ := meta["traceparent"].(string)
	if !strings.HasPrefix(tp, "00-") || len(tp) != 55 {
		t.Errorf("traceparent %q, want a new one", tp)
	}
	if _, ok := meta["tracestate"]; ok {
		t.Errorf("the agent's tracestate went on with a new trace: %v", meta)
	}
}

func TestEndMarksErrorsAndToolErrors(t *testing.T) {
	tr, exp := testTracer()
	for _, c := range []struct {
		err    error
		result any
		status codes.Code
		errTyp string
	}{
		{nil, []byte(`{"content":[]}`), codes.Unset, ""},
		{nil, jsonRaw(`{"content":[],"isError":false}`), codes.Unset, ""},
		{nil, jsonRaw(`{"content":[],"isError":true}`), codes.Error, "tool_error"},
		{&jsonrpc.Error{Code: -32602, Message: "bad"}, nil, codes.Error, "-32602"},
		{errors.New("plain"), nil, codes.Error, "-32603"},
	} {
		exp.Reset()
		span, _ := tr.Start(context.Background(), Request{Method: "tools/call"}, nil)
		span.End(c.err, c.result)
		s := exp.GetSpans()[0]
		got := ""
		for _, a := range s.Attributes {
			if a.Key == "error.type" {
				got = a.Value.AsString()
			}
		}
		if s.Status.Code != c.status || got != c.errTyp {
			t.Errorf("End(%v, %s): status %v error.type %q, want %v %q", c.err, c.result, s.Status.Code, got, c.status, c.errTyp)
		}
	}
}

func TestExportErrorsShowNoPassword(t *testing.T) {
	got := userinfo.ReplaceAllString(`failed to send to https://me:s3cret@collector:4318/v1/traces: 401`, "$1***@")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "https://***@collector") {
		t.Errorf("redacted: %q", got)
	}
}

func jsonRaw(s string) json.RawMessage { return json.RawMessage(s) }

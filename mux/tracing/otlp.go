package tracing

import (
	"math"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP trace protocol's messages, encoded by hand with protowire: the
// generated types (go.opentelemetry.io/proto/otlp) would link protobuf's
// registry and, through the collector package's service code, gRPC and
// x/net into every mcp-mux, tracing or not (some 4 MB of memory at
// start-up). The field numbers are opentelemetry-proto v1's, as in
// go.opentelemetry.io/proto/otlp v1.11.1's generated code; the tests
// decode what this writes with those generated types.
const (
	// ExportTraceServiceRequest (collector/trace/v1)
	reqResourceSpans protowire.Number = 1

	// ExportTraceServiceResponse, and its ExportTracePartialSuccess
	respPartialSuccess   protowire.Number = 1
	partialRejectedSpans protowire.Number = 1
	partialErrorMessage  protowire.Number = 2

	// ResourceSpans (trace/v1)
	rsResource   protowire.Number = 1
	rsScopeSpans protowire.Number = 2
	rsSchemaURL  protowire.Number = 3

	// Resource (resource/v1)
	resourceAttributes protowire.Number = 1

	// ScopeSpans
	ssScope     protowire.Number = 1
	ssSpans     protowire.Number = 2
	ssSchemaURL protowire.Number = 3

	// InstrumentationScope (common/v1)
	scopeName       protowire.Number = 1
	scopeVersion    protowire.Number = 2
	scopeAttributes protowire.Number = 3

	// Span
	spanTraceID           protowire.Number = 1
	spanSpanID            protowire.Number = 2
	spanTraceState        protowire.Number = 3
	spanParentSpanID      protowire.Number = 4
	spanName              protowire.Number = 5
	spanKind              protowire.Number = 6
	spanStartTime         protowire.Number = 7 // fixed64
	spanEndTime           protowire.Number = 8 // fixed64
	spanAttributes        protowire.Number = 9
	spanDroppedAttributes protowire.Number = 10
	spanEvents            protowire.Number = 11
	spanDroppedEvents     protowire.Number = 12
	spanLinks             protowire.Number = 13
	spanDroppedLinks      protowire.Number = 14
	spanStatus            protowire.Number = 15
	spanFlags             protowire.Number = 16 // fixed32

	// Span.Event
	eventTime              protowire.Number = 1 // fixed64
	eventName              protowire.Number = 2
	eventAttributes        protowire.Number = 3
	eventDroppedAttributes protowire.Number = 4

	// Span.Link
	linkTraceID           protowire.Number = 1
	linkSpanID            protowire.Number = 2
	linkTraceState        protowire.Number = 3
	linkAttributes        protowire.Number = 4
	linkDroppedAttributes protowire.Number = 5
	linkFlags             protowire.Number = 6 // fixed32

	// Status
	statusMessage protowire.Number = 2
	statusCode    protowire.Number = 3

	// KeyValue, KeyValueList, ArrayValue
	kvKey        protowire.Number = 1
	kvValue      protowire.Number = 2
	kvlistValues protowire.Number = 1
	arrayValues  protowire.Number = 1

	// AnyValue, a oneof
	anyString protowire.Number = 1
	anyBool   protowire.Number = 2
	anyInt    protowire.Number = 3
	anyDouble protowire.Number = 4 // fixed64
	anyArray  protowire.Number = 5
	anyKvlist protowire.Number = 6
	anyBytes  protowire.Number = 7
)

// Status.StatusCode and the SpanFlags bits.
const (
	statusCodeOK    = 1
	statusCodeError = 2

	flagsContextHasIsRemote = 0x100
	flagsContextIsRemote    = 0x200
)

// encodeTraces is the ExportTraceServiceRequest of spans: a ResourceSpans
// per resource, in it a ScopeSpans per instrumentation scope, in the order
// spans first show them.
func encodeTraces(spans []sdktrace.ReadOnlySpan) []byte {
	type scoped struct {
		scope instrumentation.Scope
		spans []sdktrace.ReadOnlySpan
	}
	type resourced struct {
		key    attribute.Distinct
		res    *resource.Resource
		scopes []*scoped
	}
	var groups []*resourced
	for _, s := range spans {
		if s == nil {
			continue
		}
		res, key := s.Resource(), s.Resource().Equivalent()
		var g *resourced
		for _, x := range groups {
			if x.key == key {
				g = x
				break
			}
		}
		if g == nil {
			g = &resourced{key: key, res: res}
			groups = append(groups, g)
		}
		scope := s.InstrumentationScope()
		var sc *scoped
		for _, x := range g.scopes {
			if x.scope == scope {
				sc = x
				break
			}
		}
		if sc == nil {
			sc = &scoped{scope: scope}
			g.scopes = append(g.scopes, sc)
		}
		sc.spans = append(sc.spans, s)
	}

	var b []byte
	for _, g := range groups {
		var rs, at int
		b, rs = openMessage(b, reqResourceSpans)
		if g.res != nil {
			b, at = openMessage(b, rsResource)
			iter := g.res.Iter()
			for iter.Next() {
				b = appendKeyValue(b, resourceAttributes, iter.Attribute())
			}
			b = closeMessage(b, at)
		}
		for _, sc := range g.scopes {
			var ss int
			b, ss = openMessage(b, rsScopeSpans)
			if sc.scope != (instrumentation.Scope{}) {
				b, at = openMessage(b, ssScope)
				b = appendString(b, scopeName, sc.scope.Name)
				b = appendString(b, scopeVersion, sc.scope.Version)
				iter := sc.scope.Attributes.Iter()
				for iter.Next() {
					b = appendKeyValue(b, scopeAttributes, iter.Attribute())
				}
				b = closeMessage(b, at)
			}
			for _, s := range sc.spans {
				b, at = openMessage(b, ssSpans)
				b = appendSpan(b, s)
				b = closeMessage(b, at)
			}
			b = appendString(b, ssSchemaURL, sc.scope.SchemaURL)
			b = closeMessage(b, ss)
		}
		if g.res != nil {
			b = appendString(b, rsSchemaURL, g.res.SchemaURL())
		}
		b = closeMessage(b, rs)
	}
	return b
}

// appendSpan appends the fields of s's Span message.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, spanTraceID, tid[:])
	b = appendBytes(b, spanSpanID, sid[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, spanParentSpanID, psid[:])
	}
	b = appendString(b, spanName, s.Name())
	b = appendVarint(b, spanKind, uint64(kindOf(s.SpanKind())))
	b = appendFixed64(b, spanStartTime, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, spanEndTime, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, spanAttributes, kv)
	}
	b = appendVarint(b, spanDroppedAttributes, count(s.DroppedAttributes()))
	for _, e := range s.Events() {
		var at int
		b, at = openMessage(b, spanEvents)
		b = appendFixed64(b, eventTime, unixNano(e.Time.UnixNano()))
		b = appendString(b, eventName, e.Name)
		for _, kv := range e.Attributes {
			b = appendKeyValue(b, eventAttributes, kv)
		}
		b = appendVarint(b, eventDroppedAttributes, count(e.DroppedAttributeCount))
		b = closeMessage(b, at)
	}
	b = appendVarint(b, spanDroppedEvents, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		var at int
		b, at = openMessage(b, spanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendBytes(b, linkTraceID, ltid[:])
		b = appendBytes(b, linkSpanID, lsid[:])
		b = appendString(b, linkTraceState, l.SpanContext.TraceState().String())
		for _, kv := range l.Attributes {
			b = appendKeyValue(b, linkAttributes, kv)
		}
		b = appendVarint(b, linkDroppedAttributes, count(l.DroppedAttributeCount))
		b = protowire.AppendTag(b, linkFlags, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, flags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = closeMessage(b, at)
	}
	b = appendVarint(b, spanDroppedLinks, count(s.DroppedLinks()))
	if st := s.Status(); st.Code != codes.Unset || st.Description != "" {
		var at int
		b, at = openMessage(b, spanStatus)
		b = appendString(b, statusMessage, st.Description)
		switch st.Code {
		case codes.Ok:
			b = appendVarint(b, statusCode, statusCodeOK)
		case codes.Error:
			b = appendVarint(b, statusCode, statusCodeError)
		}
		b = closeMessage(b, at)
	}
	b = protowire.AppendTag(b, spanFlags, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, flags(sc.TraceFlags(), parent))
}

// flags is a span's or a link's flags: the W3C trace flags, and whether
// the parent (the linked span) is remote, which is always known here.
func flags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagsContextHasIsRemote
	if parent.IsRemote() {
		f |= flagsContextIsRemote
	}
	return f
}

// kindOf is the OTLP SpanKind of k: the same numbers, 0 for any other.
func kindOf(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal, trace.SpanKindServer, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer:
		return int(k)
	}
	return 0
}

func unixNano(n int64) uint64 { return uint64(max(n, 0)) }

func count(n int) uint64 { return uint64(min(max(n, 0), math.MaxUint32)) }

// appendKeyValue appends kv as the KeyValue field num.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, at := openMessage(b, num)
	b = appendString(b, kvKey, string(kv.Key))
	b, v := openMessage(b, kvValue) // present even when empty: the attribute is there
	b = appendAnyValue(b, kv.Value)
	b = closeMessage(b, v)
	return closeMessage(b, at)
}

// appendAnyValue appends the fields of v's AnyValue: one of the oneof,
// written even when it is the zero value (a oneof's field is present),
// none for an empty value.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.EMPTY:
		return b
	case attribute.BOOL:
		b = protowire.AppendTag(b, anyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, anyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, anyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, anyString, protowire.BytesType)
		return protowire.AppendString(b, validUTF8(v.AsString()))
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, anyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		b, at := openMessage(b, anyKvlist)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, kvlistValues, kv)
		}
		return closeMessage(b, at)
	}
	// A type this attribute package added since: as the SDK's own
	// exporter says it.
	b = protowire.AppendTag(b, anyString, protowire.BytesType)
	return protowire.AppendString(b, "INVALID")
}

// appendArray appends the array_value of an AnyValue: vs, each made a
// Value by value.
func appendArray[T any](b []byte, vs []T, value func(T) attribute.Value) []byte {
	b, at := openMessage(b, anyArray)
	for _, x := range vs {
		var v int
		b, v = openMessage(b, arrayValues)
		b = appendAnyValue(b, value(x))
		b = closeMessage(b, v)
	}
	return closeMessage(b, at)
}

// appendString appends s as the string field num, unless it is empty
// (proto3's default, not written). A string field must be UTF-8, or the
// collector's decoder rejects the whole request: bytes that are not are
// replaced (U+FFFD), as an error's text from elsewhere may have them.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, validUTF8(s))
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendVarint appends v as the varint field num, unless it is 0.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// openMessage starts the embedded message field num: its tag, then a byte
// for its length, which closeMessage (given the returned offset) fills
// in once the message's fields are appended.
func openMessage(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	at := len(b)
	return append(b, 0), at
}

// closeMessage writes the length of the message opened at offset at: in
// the byte left for it when it fits (under 128 bytes), else the fields
// move up to make room for its varint.
func closeMessage(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	size := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, size-1)...)
	copy(b[at+size:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n)) // in place: b has room
	return b
}

// decodePartialSuccess reads an ExportTraceServiceResponse: the spans the
// collector rejected and why, if it says (a partial success).
func decodePartialSuccess(b []byte) (rejected int64, msg string, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, "", false
		}
		b = b[n:]
		if num == respPartialSuccess && typ == protowire.BytesType {
			ps, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, "", false
			}
			b = b[n:]
			for len(ps) > 0 {
				num, typ, n := protowire.ConsumeTag(ps)
				if n < 0 {
					return 0, "", false
				}
				ps = ps[n:]
				switch {
				case num == partialRejectedSpans && typ == protowire.VarintType:
					v, n := protowire.ConsumeVarint(ps)
					if n < 0 {
						return 0, "", false
					}
					rejected, ps = int64(v), ps[n:]
				case num == partialErrorMessage && typ == protowire.BytesType:
					v, n := protowire.ConsumeBytes(ps)
					if n < 0 {
						return 0, "", false
					}
					msg, ps = string(v), ps[n:]
				default:
					n := protowire.ConsumeFieldValue(num, typ, ps)
					if n < 0 {
						return 0, "", false
					}
					ps = ps[n:]
				}
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, "", false
		}
		b = b[n:]
	}
	return rejected, msg, true
}

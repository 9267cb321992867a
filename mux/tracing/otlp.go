package tracing

import (
	"math"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP trace protocol's messages, encoded by hand with protowire: the
// generated types (go.opentelemetry.io/proto/otlp) would link protobuf's
// registry and, through the collector package's service code, gRPC and
// x/net into every mcp-mux, tracing or not (some 4 MB of memory at
// start-up). The field numbers are opentelemetry-proto v1's, as in
// go.opentelemetry.io/proto/otlp v1.11.1's generated code; the tests
// decode what this writes with those generated types. Only the fields
// mux's spans have are here (no events, links, or values but strings).
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
	ssScope protowire.Number = 1
	ssSpans protowire.Number = 2

	// InstrumentationScope (common/v1)
	scopeName    protowire.Number = 1
	scopeVersion protowire.Number = 2

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
	spanStatus            protowire.Number = 15
	spanFlags             protowire.Number = 16 // fixed32

	// Status
	statusMessage protowire.Number = 2
	statusCode    protowire.Number = 3

	// KeyValue
	kvKey   protowire.Number = 1
	kvValue protowire.Number = 2

	// AnyValue, a oneof: mux's values are all strings
	anyString protowire.Number = 1
)

// Status.StatusCode, SpanKind and the SpanFlags bits.
const (
	statusCodeError = 2

	spanKindClient = 3 // mux's spans are all of requests it makes

	flagsContextHasIsRemote = 0x100
	flagsContextIsRemote    = 0x200
)

// encodeTraces is the ExportTraceServiceRequest of spans: one
// ResourceSpans (mcp-mux's resource), in it one ScopeSpans (scope).
func encodeTraces(res resource, sc scope, spans []*spanData) []byte {
	b := make([]byte, 0, 256+300*len(spans))
	var rs, ss, at int
	b, rs = openMessage(b, reqResourceSpans)
	b, at = openMessage(b, rsResource)
	for _, kv := range res.attrs {
		b = appendKeyValue(b, resourceAttributes, kv)
	}
	b = closeMessage(b, at)
	b, ss = openMessage(b, rsScopeSpans)
	b, at = openMessage(b, ssScope)
	b = appendString(b, scopeName, sc.name)
	b = appendString(b, scopeVersion, sc.version)
	b = closeMessage(b, at)
	for _, s := range spans {
		b, at = openMessage(b, ssSpans)
		b = appendSpan(b, s)
		b = closeMessage(b, at)
	}
	b = closeMessage(b, ss)
	b = appendString(b, rsSchemaURL, res.schemaURL)
	return closeMessage(b, rs)
}

// appendSpan appends the fields of s's Span message.
func appendSpan(b []byte, s *spanData) []byte {
	b = appendBytes(b, spanTraceID, s.trace[:])
	b = appendBytes(b, spanSpanID, s.span[:])
	b = appendString(b, spanTraceState, s.traceState)
	// The flags say whether the parent is remote, which is always known
	// here: a span's parent is the agent's, remote, or it has none.
	flags := uint32(s.flags) | flagsContextHasIsRemote
	if s.parent != (spanID{}) {
		b = appendBytes(b, spanParentSpanID, s.parent[:])
		flags |= flagsContextIsRemote
	}
	b = appendString(b, spanName, s.name)
	b = appendVarint(b, spanKind, spanKindClient)
	b = appendFixed64(b, spanStartTime, unixNano(s.start.UnixNano()))
	b = appendFixed64(b, spanEndTime, unixNano(s.end.UnixNano()))
	for _, kv := range s.attrs {
		b = appendKeyValue(b, spanAttributes, kv)
	}
	b = appendVarint(b, spanDroppedAttributes, count(s.droppedAttrs))
	if s.statusError {
		var at int
		b, at = openMessage(b, spanStatus)
		b = appendString(b, statusMessage, s.statusMessage)
		b = appendVarint(b, statusCode, statusCodeError)
		b = closeMessage(b, at)
	}
	b = protowire.AppendTag(b, spanFlags, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, flags)
}

func unixNano(n int64) uint64 { return uint64(max(n, 0)) }

func count(n int) uint64 { return uint64(min(max(n, 0), math.MaxUint32)) }

// appendKeyValue appends kv as the KeyValue field num: a string value,
// present even when empty (a oneof's field is: the attribute is there).
func appendKeyValue(b []byte, num protowire.Number, kv keyValue) []byte {
	b, at := openMessage(b, num)
	b = appendString(b, kvKey, kv.key)
	b, v := openMessage(b, kvValue)
	b = protowire.AppendTag(b, anyString, protowire.BytesType)
	b = protowire.AppendString(b, validUTF8(kv.value))
	b = closeMessage(b, v)
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

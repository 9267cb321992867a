package tracing

import (
	"encoding/binary"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The SDK's environment variables other than the exporter's (exporter.go):
// the sampler, the batch span processor, the span limits and the resource,
// read as the OpenTelemetry Go SDK (v1.47.0) reads them, so that a
// configuration means what it meant when mcp-mux used it. Where the SDK
// would crash or spin on a value (a queue of -1, a schedule delay of 0),
// the default is used instead, with a warning.

// config is a Tracer's configuration.
type config struct {
	sampler sampler

	// The batch span processor's.
	scheduleDelay time.Duration // between exports of a batch not full
	exportTimeout time.Duration // of one export; 0: none of its own
	queueSize     int           // spans waiting; more are dropped
	batchSize     int           // spans in one export, at most

	limits spanLimits
}

// The batch span processor's defaults: the specification's and the SDK's.
const (
	defaultScheduleDelay = 5000 // ms
	defaultExportTimeout = 30000
	defaultQueueSize     = 2048
	defaultBatchSize     = 512
)

// configFromEnv reads OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_* and the span
// limits. warn is told of a value that is not used.
func configFromEnv(getenv func(string) string, warn func(msg string, kv ...any)) config {
	positive := func(key string, def int) int {
		n, ok := intEnv(getenv, key, warn)
		if ok && n <= 0 {
			warn(key+" is not a positive number: using the default", "value", n, "default", def)
			ok = false
		}
		if !ok {
			return def
		}
		return n
	}
	c := config{
		sampler:       samplerFromEnv(getenv, warn),
		scheduleDelay: time.Duration(positive("OTEL_BSP_SCHEDULE_DELAY", defaultScheduleDelay)) * time.Millisecond,
		exportTimeout: defaultExportTimeout * time.Millisecond,
		queueSize:     positive("OTEL_BSP_MAX_QUEUE_SIZE", defaultQueueSize),
		batchSize:     positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaultBatchSize),
		limits:        limitsFromEnv(getenv, warn),
	}
	// As the SDK: 0 or less is no timeout of the processor's (the
	// exporter's own, OTEL_EXPORTER_OTLP_TIMEOUT, still bounds an export).
	if n, ok := intEnv(getenv, "OTEL_BSP_EXPORT_TIMEOUT", warn); ok {
		c.exportTimeout = time.Duration(max(n, 0)) * time.Millisecond
	}
	if c.batchSize > c.queueSize {
		c.batchSize = min(defaultBatchSize, c.queueSize) // the SDK's rule
	}
	return c
}

// intEnv is the integer value of key, if it is set; one that is not an
// integer is warned of and not used. As the SDK's, no blanks are allowed.
func intEnv(getenv func(string) string, key string, warn func(msg string, kv ...any)) (int, bool) {
	v := getenv(key)
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		warn(key+" is not a number: using the default", "value", v)
		return 0, false
	}
	return n, true
}

// sampler decides which spans are sampled: recorded and exported, and
// the sampled flag passed on. One that is not sampled still has its ids,
// and is the parent the backend is told of.
type sampler struct {
	// parentBased: a span with a parent (the agent's span) is sampled if
	// the parent is; only a new trace is left to the ratio.
	parentBased bool
	all, none   bool   // the ratio is 1 (or more) or 0 (or less)
	bound       uint64 // else: sampled if the trace id's lower 63 bits are below it
}

// ratioSampler samples fraction of traces, decided by the trace id as the
// SDK's TraceIDRatioBased decides it, so that services sampling the same
// fraction of a trace agree.
func ratioSampler(fraction float64) sampler {
	switch {
	case fraction >= 1:
		return sampler{all: true}
	case fraction <= 0:
		return sampler{none: true}
	}
	return sampler{bound: uint64(fraction * (1 << 63))}
}

// sampled decides for a span in trace t, whose parent is p if hasParent.
func (s sampler) sampled(t traceID, p parent, hasParent bool) bool {
	switch {
	case s.parentBased && hasParent:
		return p.flags&flagSampled != 0
	case s.all:
		return true
	case s.none:
		return false
	}
	return binary.BigEndian.Uint64(t[8:])>>1 < s.bound
}

// samplerFromEnv is the sampler of OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, parentbased_always_on by default. As the
// SDK's: a ratio that is not a number from 0 to 1 is 1, and a sampler it
// does not know the default.
func samplerFromEnv(getenv func(string) string, warn func(msg string, kv ...any)) sampler {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() sampler {
		if arg == "" {
			return ratioSampler(1)
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			warn("OTEL_TRACES_SAMPLER_ARG is not a ratio from 0 to 1: sampling every trace", "value", arg)
			return ratioSampler(1)
		}
		return ratioSampler(f)
	}
	var s sampler
	switch name {
	case "always_on":
		s = ratioSampler(1)
	case "always_off":
		s = ratioSampler(0)
	case "traceidratio":
		s = ratio()
	case "", "parentbased_always_on":
		s, s.parentBased = ratioSampler(1), true
	case "parentbased_always_off":
		s, s.parentBased = ratioSampler(0), true
	case "parentbased_traceidratio":
		s, s.parentBased = ratio(), true
	default:
		warn("OTEL_TRACES_SAMPLER is not a sampler mcp-mux knows: using parentbased_always_on", "value", name)
		s, s.parentBased = ratioSampler(1), true
	}
	return s
}

// spanLimits bound a span's attributes; a negative limit is none.
type spanLimits struct {
	count  int // attributes kept; the rest are counted as dropped
	length int // characters of a value kept
}

// limitsFromEnv reads the span limits that apply to mcp-mux's spans
// (attributes only: they have no events or links): each
// OTEL_SPAN_ATTRIBUTE_* variable, or else its OTEL_ATTRIBUTE_* form, as
// it is (the SDK's: 0 keeps none, less than 0 is no limit).
func limitsFromEnv(getenv func(string) string, warn func(msg string, kv ...any)) spanLimits {
	first := func(def int, keys ...string) int {
		for _, k := range keys {
			if getenv(k) != "" {
				if n, ok := intEnv(getenv, k, warn); ok {
					return n
				}
				return def // as the SDK: the other form is not tried
			}
		}
		return def
	}
	return spanLimits{
		count:  first(128, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
		length: first(-1, "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
	}
}

// apply drops the attributes of d past the count limit and shortens the
// values past the length limit. The SDK does it as they are set; mux sets
// each key once, so at the end is the same.
func (l spanLimits) apply(d *spanData) {
	if l.count >= 0 && len(d.attrs) > l.count {
		d.droppedAttrs += len(d.attrs) - l.count
		clear(d.attrs[l.count:])
		d.attrs = d.attrs[:l.count]
	}
	if l.length >= 0 {
		for i := range d.attrs {
			d.attrs[i].value = truncate(d.attrs[i].value, l.length)
		}
	}
}

// truncate is s cut to limit characters, as the SDK cuts an attribute's
// value: when it is cut, bytes that are not UTF-8 are dropped, not
// counted.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(s) && n < limit; {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			i++
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
		n++
	}
	return b.String()
}

// keyValue is an attribute: mcp-mux's are all strings.
type keyValue struct{ key, value string }

// resource is what the spans' resource says of mcp-mux.
type resource struct {
	attrs     []keyValue // sorted by key, each once
	schemaURL string
}

// resourceSchemaURL is the schema the SDK's resource named (its
// telemetry.sdk detector's semantic conventions, v1.43.0): the keys used
// here (service.*, telemetry.sdk.*) are the same in v1.41.0, whose span
// attributes mux writes.
const resourceSchemaURL = "https://opentelemetry.io/schemas/1.43.0"

// resourceFromEnv is mcp-mux's resource: service.name "mcp-mux" and
// service.version, the telemetry.sdk attributes, then
// OTEL_RESOURCE_ATTRIBUTES (key=value pairs separated by commas, values
// URL-decoded, each winning over the above) and OTEL_SERVICE_NAME, which
// wins over all for service.name: the order and rules of the SDK's
// resource.New(WithAttributes(...), WithTelemetrySDK(), WithFromEnv()).
//
// The SDK named itself in telemetry.sdk.*: "opentelemetry", "go", its own
// version. The SDK making the spans is now mcp-mux's, so they say
// "mcp-mux", "go" and mcp-mux's version.
//
// As the SDK, a pair without "=" (or with an empty key) is left out and
// the rest used; a value that does not URL-decode is used as it is. warn
// is told of both (the SDK returned them as errors mcp-mux did not log).
func resourceFromEnv(getenv func(string) string, version string, warn func(msg string, kv ...any)) resource {
	attrs := []keyValue{
		{keyServiceName, "mcp-mux"},
		{keyServiceVersion, version},
		{keyTelemetrySDKName, "mcp-mux"},
		{keyTelemetrySDKLanguage, "go"},
		{keyTelemetrySDKVersion, version},
	}
	if env := strings.TrimSpace(getenv("OTEL_RESOURCE_ATTRIBUTES")); env != "" {
		for i, pair := range strings.Split(env, ",") {
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				if strings.TrimSpace(pair) != "" {
					warn("ignoring an entry of OTEL_RESOURCE_ATTRIBUTES that is not key=value", "entry", i+1)
				}
				continue
			}
			val, err := url.PathUnescape(strings.TrimSpace(v))
			if err != nil {
				warn("a value of OTEL_RESOURCE_ATTRIBUTES is not URL-encoded: using it as it is", "key", k)
				val = v
			}
			attrs = append(attrs, keyValue{k, val})
		}
	}
	if name := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); name != "" {
		attrs = append(attrs, keyValue{keyServiceName, name})
	}
	// Each key once, its last value; in the order of keys, as the SDK's
	// attribute set (the order they are exported in).
	slices.SortStableFunc(attrs, func(a, b keyValue) int { return strings.Compare(a.key, b.key) })
	out := attrs[:0]
	for _, kv := range attrs {
		if n := len(out); n > 0 && out[n-1].key == kv.key {
			out[n-1] = kv
			continue
		}
		out = append(out, kv)
	}
	return resource{attrs: out, schemaURL: resourceSchemaURL}
}

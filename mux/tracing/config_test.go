package tracing

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// warnings collects what warn is told.
func warnings() (*[]string, func(string, ...any)) {
	var w []string
	return &w, func(msg string, kv ...any) { w = append(w, fmt.Sprint(msg, kv)) }
}

// As sdk/trace's samplerFromEnv (v1.47.0): names in any case, a ratio
// that is not a number from 0 to 1 is 1 (warned of), a name it does not
// know the default (warned of).
func TestSamplerFromEnv(t *testing.T) {
	pb := func(s sampler) sampler { s.parentBased = true; return s }
	for _, c := range []struct {
		name, arg string
		want      sampler
		warned    bool
	}{
		{"", "", pb(ratioSampler(1)), false},
		{"", "0.5", pb(ratioSampler(1)), false},
		{"always_on", "", ratioSampler(1), false},
		{" ALWAYS_OFF ", "", ratioSampler(0), false},
		{"traceidratio", "", ratioSampler(1), false},
		{"traceidratio", " 0.25 ", ratioSampler(0.25), false},
		{"traceidratio", "0", ratioSampler(0), false},
		{"traceidratio", "1.5", ratioSampler(1), true},
		{"traceidratio", "-0.1", ratioSampler(1), true},
		{"traceidratio", "half", ratioSampler(1), true},
		{"parentbased_always_on", "", pb(ratioSampler(1)), false},
		{"parentbased_always_off", "", pb(ratioSampler(0)), false},
		{"parentbased_traceidratio", "", pb(ratioSampler(1)), false},
		{"parentbased_traceidratio", "0.1", pb(ratioSampler(0.1)), false},
		{"parentbased_traceidratio", "x", pb(ratioSampler(1)), true},
		{"jaeger_remote", "", pb(ratioSampler(1)), true},
	} {
		w, warn := warnings()
		got := samplerFromEnv(envOf(map[string]string{"OTEL_TRACES_SAMPLER": c.name, "OTEL_TRACES_SAMPLER_ARG": c.arg}), warn)
		if got != c.want || (len(*w) > 0) != c.warned {
			t.Errorf("%q %q: %+v (warned %q), want %+v (warned: %v)", c.name, c.arg, got, *w, c.want, c.warned)
		}
	}
	if s := ratioSampler(0.25); s.bound != 1<<61 {
		t.Errorf("ratio 0.25: bound %x, want the SDK's, 2^61", s.bound)
	}
}

// As sdk/trace's batch span processor reads OTEL_BSP_*: milliseconds,
// not trimmed; a batch larger than the queue is the default batch or the
// queue, the smaller. Where the SDK would use a value of 0 or less (and
// spin, or panic), the default is used.
func TestBatchConfigFromEnv(t *testing.T) {
	for _, c := range []struct {
		env                  map[string]string
		delay, timeout       time.Duration
		queue, batch, warned int
	}{
		{map[string]string{}, 5 * time.Second, 30 * time.Second, 2048, 512, 0},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "20", "OTEL_BSP_EXPORT_TIMEOUT": "1000", "OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10"},
			20 * time.Millisecond, time.Second, 100, 10, 0},
		{map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "100"}, 5 * time.Second, 30 * time.Second, 100, 100, 0},
		{map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "4096", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "5000"}, 5 * time.Second, 30 * time.Second, 4096, 512, 0},
		{map[string]string{"OTEL_BSP_EXPORT_TIMEOUT": "0"}, 5 * time.Second, 0, 2048, 512, 0},
		{map[string]string{"OTEL_BSP_EXPORT_TIMEOUT": "-5"}, 5 * time.Second, 0, 2048, 512, 0},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": " 20", "OTEL_BSP_EXPORT_TIMEOUT": "1s", "OTEL_BSP_MAX_QUEUE_SIZE": "x", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1.5"},
			5 * time.Second, 30 * time.Second, 2048, 512, 4},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "0", "OTEL_BSP_MAX_QUEUE_SIZE": "-1", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "0"},
			5 * time.Second, 30 * time.Second, 2048, 512, 3},
	} {
		w, warn := warnings()
		got := configFromEnv(envOf(c.env), warn)
		if got.scheduleDelay != c.delay || got.exportTimeout != c.timeout || got.queueSize != c.queue || got.batchSize != c.batch || len(*w) != c.warned {
			t.Errorf("%v: delay %v timeout %v queue %d batch %d (warned %q); want %v %v %d %d, %d warnings",
				c.env, got.scheduleDelay, got.exportTimeout, got.queueSize, got.batchSize, *w, c.delay, c.timeout, c.queue, c.batch, c.warned)
		}
	}
}

// The span limits of the environment, as the SDK's: the OTEL_SPAN_*
// form first, an invalid one the default (the other form not tried).
func TestSpanLimitsFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want spanLimits
	}{
		{map[string]string{}, spanLimits{count: 128, length: -1}},
		{map[string]string{"OTEL_ATTRIBUTE_COUNT_LIMIT": "3", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "10"}, spanLimits{count: 3, length: 10}},
		{map[string]string{"OTEL_ATTRIBUTE_COUNT_LIMIT": "3", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "5"}, spanLimits{count: 5, length: -1}},
		{map[string]string{"OTEL_ATTRIBUTE_COUNT_LIMIT": "3", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "x"}, spanLimits{count: 128, length: -1}},
		{map[string]string{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "0", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "-1"}, spanLimits{count: -1, length: 0}},
	} {
		if got := limitsFromEnv(envOf(c.env), func(string, ...any) {}); got != c.want {
			t.Errorf("%v: %+v, want %+v", c.env, got, c.want)
		}
	}
}

// Limits apply to a span's attributes as the SDK's: the first ones kept,
// the rest counted as dropped; values cut to a number of characters.
func TestSpanLimitsApply(t *testing.T) {
	tr, m := testTracer(t, func() config {
		c := testConfig(t)
		c.limits = spanLimits{count: 3, length: 4}
		return c
	}())
	span, _ := tr.Start(Request{Method: "tools/call", Backend: "backend", Target: "üüüüü"}, nil)
	span.End(errString("boom"), nil) // status code and error.type: past the limit
	s := ended(tr, m)[0]
	var got []string
	for _, kv := range s.attrs {
		got = append(got, kv.key+"="+kv.value)
	}
	if strings.Join(got, " ") != "mcp.method.name=tool mcp_mux.backend=back gen_ai.tool.name=üüüü" || s.droppedAttrs != 3 || s.name != "tools/call üüüüü" {
		t.Errorf("attributes %v, %d dropped, name %q; want three, cut to 4 characters, 3 dropped, the name whole", got, s.droppedAttrs, s.name)
	}

	for _, c := range []struct {
		in    string
		limit int
		want  string
	}{
		{"abc", 3, "abc"}, {"abcd", 3, "abc"}, {"abc", 0, ""}, {"ü\xffü", 2, "üü"}, {"a\xffb", 5, "a\xffb"}, {"\uFFFDab", 2, "\uFFFDa"},
	} {
		if got := truncate(c.in, c.limit); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// The resource as the SDK's resource.New(WithAttributes(service.name,
// service.version), WithTelemetrySDK(), WithFromEnv()) made it, but for
// telemetry.sdk.*, now mcp-mux's: OTEL_RESOURCE_ATTRIBUTES wins over
// mcp-mux's own, OTEL_SERVICE_NAME over all; values URL-decoded; keys in
// order.
func TestResourceFromEnv(t *testing.T) {
	own := "service.name=mcp-mux service.version=1.2.3 telemetry.sdk.language=go telemetry.sdk.name=mcp-mux telemetry.sdk.version=1.2.3"
	for _, c := range []struct {
		env    map[string]string
		want   string
		warned int
	}{
		{map[string]string{}, own, 0},
		{map[string]string{"OTEL_SERVICE_NAME": " notes "}, strings.Replace(own, "service.name=mcp-mux", "service.name=notes", 1), 0},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=a,deployment.environment=prod%20eu, host = h1 "},
			"deployment.environment=prod eu host=h1 " + strings.Replace(own, "service.name=mcp-mux", "service.name=a", 1), 0},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=a", "OTEL_SERVICE_NAME": "b"}, strings.Replace(own, "service.name=mcp-mux", "service.name=b", 1), 0},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "k=1,k=2,telemetry.sdk.name=x"}, "k=2 " + strings.Replace(own, "telemetry.sdk.name=mcp-mux", "telemetry.sdk.name=x", 1), 0},
		// The SDK keeps the valid pairs of a variable with bad ones.
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "a=1,novalue,=x,,b=2"}, "a=1 b=2 " + own, 2},
		// A value that does not decode is kept as it was written.
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "a= 100% "}, "a= 100% " + own, 1},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "empty="}, "empty= " + own, 0},
	} {
		w, warn := warnings()
		res := resourceFromEnv(envOf(c.env), "1.2.3", warn)
		var got []string
		for _, kv := range res.attrs {
			got = append(got, kv.key+"="+kv.value)
		}
		if strings.Join(got, " ") != c.want || len(*w) != c.warned || res.schemaURL != resourceSchemaURL {
			t.Errorf("%v:\n got %s (warned %q)\nwant %s (%d warnings)", c.env, strings.Join(got, " "), *w, c.want, c.warned)
		}
	}
}

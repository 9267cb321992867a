package main

import (
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/log"

	"github.com/mcp-mux/mcp-mux/mux/tracing"
)

// traceFlushTimeout bounds what mcp-mux's exit waits for the spans still
// queued to reach the collector: a local one takes a few milliseconds,
// and an agent kills a server that is not gone within a fraction of a
// second (see Mux.Exit). A collector that is down costs the exit this
// much at most, and those spans.
const traceFlushTimeout = 50 * time.Millisecond

// startTracing is the tracer the environment asks for (OTEL_EXPORTER_OTLP_*,
// see mux/tracing), or nil: tracing is off, or could not be set up (a
// warning says why; serving goes on without it).
func startTracing(getenv func(string) string, logger *log.Logger) *tracing.Tracer {
	t, err := tracing.FromEnv(getenv, version, logger)
	if err != nil {
		logger.Warn("tracing is off", "err", err)
		return nil
	}
	if t != nil {
		// Not the endpoint: its URL, or the headers, may carry a token.
		logger.Info("tracing on: a span per forwarded request, exported over OTLP/HTTP")
	}
	return t
}

// envLookup is os.Getenv over environ, a session's environment.
func envLookup(environ []string) func(string) string {
	return func(key string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(environ[i], "="); ok && k == key {
				return v
			}
		}
		return ""
	}
}

// otelEnv is what of environ configures tracing, sorted: sessions of the
// shared mcp-mux whose differ trace apart.
func otelEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}

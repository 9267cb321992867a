package backends

import (
	"context"
	"net/http"
)

// A remote backend gets a traced request's W3C trace context twice: in
// the request's _meta, as every backend does (the mux's part), and as
// the traceparent and tracestate headers of the POST carrying it, for
// the HTTP servers, proxies and gateways on the way, which read headers,
// not JSON-RPC. The go-sdk's transport makes that POST with the context
// of the call (Write), which carries them here to the roundTripper.

// traceHeadersKey carries a request's trace context headers in its context.
type traceHeadersKey struct{}

type traceHeaders struct{ parent, state string }

// WithTraceHeaders is ctx with the W3C trace context headers that the
// HTTP requests of a call made with it carry to a remote backend.
func WithTraceHeaders(ctx context.Context, traceparent, tracestate string) context.Context {
	return context.WithValue(ctx, traceHeadersKey{}, traceHeaders{traceparent, tracestate})
}

// setTraceHeaders sets on req the trace context headers its context
// carries, if any: per request, they win over any configured.
func setTraceHeaders(req *http.Request) {
	th, ok := req.Context().Value(traceHeadersKey{}).(traceHeaders)
	if !ok || th.parent == "" {
		return
	}
	req.Header.Set("Traceparent", th.parent)
	if th.state != "" {
		req.Header.Set("Tracestate", th.state)
	} else {
		req.Header.Del("Tracestate")
	}
}

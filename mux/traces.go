package mux

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/tracing"
)

// Traces (mux/tracing): with tracing on, every request forward runs at a
// backend gets a span of mux's, whichever door and path it came by (the
// go-sdk's typed handlers, the stdio pass-through, the HTTP fast path:
// all reach forward), and the backend gets a _meta.traceparent naming
// that span as its parent: the agent's trace (its _meta.traceparent) goes
// on through mux, or a new one begins. A remote backend gets the same
// trace context as HTTP headers (backends.WithTraceHeaders). With tracing
// off, the cost is one nil check per request (traced, and plainMeta's),
// and the agent's _meta, traceparent and all, reaches the backend as it
// was.

// SetTracer makes m trace the requests it forwards with t (nil: none).
// It is called before Start.
func (m *Mux) SetTracer(t *tracing.Tracer) { m.tracer = t }

// traced is run, inside a span when tracing is on: in's _meta is the
// agent's with the trace context replaced (forward's later steps keep
// that key as it is), and ctx carries it for a remote backend's headers.
// The span ends with what the agent gets.
func traced[R any](ctx context.Context, m *Mux, mem *member, b *backends.Backend, in inbound, pc *parkedCall,
	call func(ctx context.Context, b *backends.Backend, meta mcp.Meta, r *round) (R, error)) (R, error) {
	if m.tracer == nil {
		return run(ctx, m, mem, b, in, pc, call)
	}
	req := tracing.Request{Method: in.method, Backend: mem.spec.Name, Target: in.target}
	if r := b.InitializeResult(); r != nil {
		req.Version = r.ProtocolVersion
	}
	span, meta := m.tracer.Start(req, in.meta)
	in.meta = meta
	ctx = backends.WithTraceHeaders(ctx, span.Traceparent, span.Tracestate)
	res, err := run(ctx, m, mem, b, in, pc, call)
	span.End(err, res)
	return res, err
}

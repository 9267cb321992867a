package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
)

// spanData is what a span says once ended, as it is exported.
type spanData struct {
	trace      traceID
	span       spanID
	parent     spanID // zero for the root of a trace; else the agent's, remote
	traceState string
	flags      byte // W3C trace flags
	name       string
	start, end time.Time
	attrs      []keyValue

	droppedAttrs  int // past the count limit (spanLimits)
	statusError   bool
	statusMessage string // with statusError
}

// scope is the instrumentation scope of a tracer's spans.
type scope struct{ name, version string }

// Tracer makes the spans of forwarded requests and exports them: in
// batches, as the SDK's batch span processor does, by a goroutine of its
// own which Shutdown stops. A request never waits for it: a span that
// finds the queue full is dropped.
type Tracer struct {
	cfg    config
	export func(context.Context, []*spanData) error
	failed func(error) // an export's error
	log    *log.Logger
	exp    *exporter // FromEnv's, shut down with the tracer; nil in tests

	queue   chan *spanData
	dropped atomic.Int64 // spans the queue had no room for, since the last export

	stopped  atomic.Bool   // no more spans are queued
	stop     chan struct{} // closed by Shutdown: export what is queued, then return
	done     chan struct{} // closed when the goroutine has returned
	ctx      context.Context
	abort    context.CancelFunc // ends the export in flight, and those after it
	shutdown sync.Once
}

// newTracer starts a tracer exporting with export; failed is told of its
// errors.
func newTracer(cfg config, export func(context.Context, []*spanData) error, failed func(error), logger *log.Logger) *Tracer {
	t := &Tracer{
		cfg:    cfg,
		export: export,
		failed: failed,
		log:    logger,
		queue:  make(chan *spanData, cfg.queueSize),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	t.ctx, t.abort = context.WithCancel(context.Background())
	go t.run()
	return t
}

// enqueue queues d for export, unless the queue is full (or the tracer
// shut down): then d is dropped, a request never waits.
func (t *Tracer) enqueue(d *spanData) {
	if t.stopped.Load() {
		return
	}
	select {
	case t.queue <- d:
	default:
		t.dropped.Add(1)
	}
}

// run exports the queued spans: a batch when it is full or when the
// schedule delay is up since the last, the rest once Shutdown is called.
func (t *Tracer) run() {
	defer close(t.done)
	timer := time.NewTimer(t.cfg.scheduleDelay)
	defer timer.Stop()
	batch := make([]*spanData, 0, t.cfg.batchSize)
	flush := func() {
		timer.Reset(t.cfg.scheduleDelay)
		t.exportBatch(batch)
		clear(batch) // let the spans go
		batch = batch[:0]
	}
	for {
		select {
		case <-t.stop:
			for {
				select {
				case d := <-t.queue:
					if batch = append(batch, d); len(batch) >= t.cfg.batchSize {
						flush()
					}
				default:
					flush()
					return
				}
			}
		case <-timer.C:
			flush()
		case d := <-t.queue:
			if batch = append(batch, d); len(batch) >= t.cfg.batchSize {
				flush()
			}
		}
	}
}

// exportBatch exports batch, within the processor's export timeout.
func (t *Tracer) exportBatch(batch []*spanData) {
	if n := t.dropped.Swap(0); n > 0 && t.log != nil {
		t.log.Debug("dropped spans: the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE)", "spans", n)
	}
	if len(batch) == 0 || t.ctx.Err() != nil {
		return
	}
	ctx := t.ctx
	if t.cfg.exportTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.exportTimeout)
		defer cancel()
	}
	if err := t.export(ctx, batch); err != nil && t.failed != nil {
		t.failed(err)
	}
}

// Shutdown exports what is queued and stops the exporter, taking at most
// timeout: mcp-mux's exit is not held up by a collector. An export still
// in flight then (a collector that is slow, or down and retried) is ended,
// and what is left of the queue given up. Its goroutine is gone when
// Shutdown returns. Spans ended after it are dropped.
func (t *Tracer) Shutdown(timeout time.Duration) {
	if t == nil {
		return
	}
	t.shutdown.Do(func() {
		t.stopped.Store(true)
		close(t.stop)
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-t.done:
		case <-timer.C:
			if t.exp != nil {
				t.exp.Shutdown() // first: its error then says it was shut down
			}
			t.abort()
			<-t.done
		}
		t.abort()
		if t.exp != nil {
			t.exp.Shutdown()
		}
	})
}

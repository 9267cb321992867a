package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// endSpans starts and ends n spans of tr.
func endSpans(tr *Tracer, n int) {
	for range n {
		s, _ := tr.Start(Request{Method: "ping"}, nil)
		s.End(nil, nil)
	}
}

// A full queue drops spans: End never waits, not even for an export that
// hangs.
func TestAFullQueueDropsSpansWithoutBlocking(t *testing.T) {
	cfg := testConfig(t)
	cfg.queueSize, cfg.batchSize = 2, 1
	exporting, release := make(chan struct{}), make(chan struct{})
	var exported atomic.Int64
	tr := newTracer(cfg, func(ctx context.Context, spans []*spanData) error {
		if exported.Add(int64(len(spans))) == 1 {
			close(exporting)
			<-release
		}
		return nil
	}, nil, nil)
	endSpans(tr, 1)
	<-exporting // the goroutine is held in the first export
	begin := time.Now()
	endSpans(tr, 10) // 2 are queued, 8 dropped
	if d := time.Since(begin); d > time.Second {
		t.Errorf("ending 10 spans took %v with the export held up", d)
	}
	if n := tr.dropped.Load(); n != 8 {
		t.Errorf("%d spans dropped, want 8", n)
	}
	close(release)
	tr.Shutdown(5 * time.Second)
	if n := exported.Load(); n != 3 {
		t.Errorf("%d spans exported, want 3 (the first, and the 2 the queue held)", n)
	}
}

// Batches are at most OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans, and a full one
// goes at once, without waiting for the schedule delay.
func TestAFullBatchIsExportedAtOnce(t *testing.T) {
	cfg := testConfig(t)
	cfg.batchSize, cfg.scheduleDelay = 3, time.Hour
	tr, m := testTracer(t, cfg)
	endSpans(tr, 7)
	testkit.Eventually(t, 5*time.Second, "two full batches", func() bool { return len(m.spans()) == 6 })
	tr.Shutdown(5 * time.Second) // and the last, by Shutdown
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.batches) != 3 || len(m.batches[0]) != 3 || len(m.batches[1]) != 3 || len(m.batches[2]) != 1 {
		t.Errorf("batches of %v spans, want 3, 3, 1", batchSizes(m.batches))
	}
}

func batchSizes(bs [][]spanData) []int {
	var n []int
	for _, b := range bs {
		n = append(n, len(b))
	}
	return n
}

// A batch that is not full goes when the schedule delay is up; no batch
// goes when there is nothing to send.
func TestTheScheduleDelayExportsABatchNotFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.scheduleDelay = 20 * time.Millisecond
		calls := make(chan int, 100)
		tr := newTracer(cfg, func(_ context.Context, spans []*spanData) error { calls <- len(spans); return nil }, nil, nil)
		defer tr.Shutdown(time.Second)
		time.Sleep(100 * time.Millisecond) // five delays with no span
		synctest.Wait()
		if len(calls) != 0 {
			t.Fatalf("%d exports with no span", len(calls))
		}
		endSpans(tr, 2)
		time.Sleep(cfg.scheduleDelay)
		synctest.Wait()
		select {
		case n := <-calls:
			if n != 2 {
				t.Errorf("a batch of %d spans, want 2", n)
			}
		default:
			t.Fatal("the batch was not exported when the schedule delay was up")
		}
	})
}

// Shutdown exports all that is queued (in batches) and leaves no
// goroutine; spans ended after it are dropped.
func TestShutdownFlushesTheQueueAndStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := testConfig(t)
	cfg.scheduleDelay, cfg.batchSize = time.Hour, 4
	tr, m := testTracer(t, cfg)
	endSpans(tr, 10)
	tr.Shutdown(5 * time.Second)
	if n := len(m.spans()); n != 10 {
		t.Errorf("%d spans exported by Shutdown, want 10", n)
	}
	endSpans(tr, 1)
	tr.Shutdown(time.Second) // again: nothing more
	if n := len(m.spans()); n != 10 {
		t.Errorf("%d spans exported, want the 10 ended before Shutdown", n)
	}
}

// An export still going when Shutdown's time is up is ended (its context
// is), the rest of the queue given up, and the goroutine gone when
// Shutdown returns; the export's error is reported.
func TestShutdownEndsAnExportPastItsTimeout(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := testConfig(t)
	cfg.scheduleDelay, cfg.batchSize = time.Hour, 1
	var calls atomic.Int64
	failed := make(chan error, 10)
	tr := newTracer(cfg, func(ctx context.Context, _ []*spanData) error {
		calls.Add(1)
		<-ctx.Done()
		return fmt.Errorf("exporting: %w", ctx.Err())
	}, func(err error) { failed <- err }, nil)
	endSpans(tr, 3)
	begin := time.Now()
	tr.Shutdown(100 * time.Millisecond)
	if d := time.Since(begin); d < 100*time.Millisecond || d > 2*time.Second {
		t.Errorf("Shutdown took %v, want its 100 ms", d)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d exports, want the one in flight only", n)
	}
	select {
	case err := <-failed:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("reported %v, want the export's cancellation", err)
		}
	default:
		t.Error("the failed export was not reported")
	}
}

// OTEL_BSP_EXPORT_TIMEOUT bounds each export.
func TestTheExportTimeoutBoundsAnExport(t *testing.T) {
	cfg := testConfig(t)
	cfg.exportTimeout, cfg.scheduleDelay = 50*time.Millisecond, 10*time.Millisecond
	failed := make(chan error, 1)
	tr := newTracer(cfg, func(ctx context.Context, _ []*spanData) error {
		<-ctx.Done()
		return ctx.Err()
	}, func(err error) { failed <- err }, nil)
	defer tr.Shutdown(time.Second)
	endSpans(tr, 1)
	select {
	case err := <-failed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("reported %v, want the deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the export was not ended by its timeout")
	}
}

// Through FromEnv and a collector: the tracer's goroutine, the exporter's
// connections, all are gone after Shutdown.
func TestFromEnvLeavesNoGoroutineAfterShutdown(t *testing.T) {
	rcv := testkit.StartOTLPReceiver(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var logs syncBuffer
	tr, err := FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_BSP_SCHEDULE_DELAY": "10"}), "t", quietLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	endSpans(tr, 3)
	testkit.Eventually(t, 5*time.Second, "the spans at the collector", func() bool { return len(rcv.Spans()) == 3 })
	endSpans(tr, 2)
	tr.Shutdown(5 * time.Second)
	if n := len(rcv.Spans()); n != 5 {
		t.Errorf("%d spans at the collector, want 5; log:\n%s", n, logs.String())
	}
}

package mux

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/subs"
)

// Polling stands in for subscriptions a backend cannot do itself
// (poll_interval, opt-in per backend): each local-only subscribed URI is
// read once per interval, the reads spread evenly over it, and an update is
// delivered when the contents' hash changes.

// pollIdle is how often an idle poller looks for new subscriptions.
const pollIdle = 250 * time.Millisecond

func (mem *member) pollLoop() {
	interval := mem.spec.PollInterval.Duration
	next := 0
	for {
		uris := mem.localOnlyURIs()
		mem.forgetPolled(uris)
		step := min(interval, pollIdle)
		if len(uris) > 0 {
			step = interval / time.Duration(len(uris))
		}
		select {
		case <-mem.ctx.Done():
			return
		case <-time.After(step):
		}
		if len(uris) == 0 {
			continue
		}
		next %= len(uris)
		mem.pollOnce(uris[next])
		next++
	}
}

// localOnlyURIs are the distinct URIs held on this backend that it is not
// told about, sorted.
func (mem *member) localOnlyURIs() []string {
	var out []string
	for _, s := range mem.m.subs.Backend(mem.spec.Name) {
		if s.Mode == subs.LocalOnly && (len(out) == 0 || out[len(out)-1] != s.URI) {
			out = append(out, s.URI)
		}
	}
	return out
}

// forgetPolled drops the hashes of URIs no longer held.
func (mem *member) forgetPolled(held []string) {
	keep := make(map[string]bool, len(held))
	for _, u := range held {
		keep[u] = true
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	for u := range mem.pollSums {
		if !keep[u] {
			delete(mem.pollSums, u)
		}
	}
}

// pollBaseline records the contents' hash at subscribe time, so that a
// change made right after the subscribe is noticed by the first poll.
func (mem *member) pollBaseline(ctx context.Context, uri string) {
	if mem.spec.PollInterval.Duration <= 0 {
		return
	}
	if sum, ok := mem.readSum(ctx, uri); ok {
		mem.mu.Lock()
		mem.pollSums[uri] = sum
		mem.mu.Unlock()
	}
}

func (mem *member) pollOnce(uri string) {
	sum, ok := mem.readSum(mem.ctx, uri)
	if !ok {
		return
	}
	mem.mu.Lock()
	old, had := mem.pollSums[uri]
	mem.pollSums[uri] = sum
	mem.mu.Unlock()
	if had && old != sum {
		mem.log.Debug("polled resource changed", "uri", uri)
		mem.m.deliverUpdated(mem.spec.Name, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
}

func (mem *member) readSum(ctx context.Context, uri string) (uint64, bool) {
	b, err := mem.backend()
	if err != nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, mem.m.requestTimeout(mem))
	defer cancel()
	res, err := b.Session().ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		mem.log.Debug("poll read failed", "uri", uri, "err", err)
		return 0, false
	}
	return fingerprint(res.Contents), true
}

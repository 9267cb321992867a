package main

import (
	"context"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/charmbracelet/log"

	"github.com/mcp-mux/mcp-mux/mux"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/control"
)

// serveMetrics serves /metrics on [mux] metrics_listen, if set, until m
// ends, and returns their URL ("" if none). One that cannot be served
// costs the metrics, not the agent's tools: it is logged. Each agent
// starts its own stdio mcp-mux, so with one config the second finds the
// port taken: its log says which mcp-mux has it (asked through the
// control endpoints, in a goroutine that done waits for, so that a slow
// one never delays the agent's session).
func serveMetrics(m *mux.Mux, cfg *config.File, logger *log.Logger) (metricsURL string, done func()) {
	addr := cfg.Mux.MetricsListen
	if addr == "" {
		return "", func() {}
	}
	if err := cfg.ServeMetricsCheck(); err != nil {
		logger.Error("metrics not served: " + err.Error())
		return "", func() {}
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		m.ServeMetrics(ln, cfg.Mux.HTTPToken, cfg.Tokens)
		return "http://" + ln.Addr().String() + mux.MetricsPath, func() {}
	}
	// The holder may have bound the port a moment before it publishes its
	// control endpoint (mcp-mux starts both at its start): ask again for a
	// little while, apart, and give up at once when this mcp-mux ends.
	ctx, cancel := context.WithTimeout(context.Background(), holderPatience)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer cancel()
		const without = "; this mcp-mux serves its agent without metrics"
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		doc := metricsHolder(addr)
		for doc == nil {
			select {
			case <-tick.C:
				doc = metricsHolder(addr)
			case <-ctx.Done():
				logger.Warn("metrics not served: cannot listen on "+addr+without, "err", err)
				return
			}
		}
		logger.Warn("metrics not served: "+addr+" is in use by mcp-mux pid "+strconv.Itoa(doc.PID)+", which serves them there"+without,
			"config", doc.Config)
	}()
	// At exit it is told to stop, and waited for a moment: a control
	// endpoint that never answers (Wine's named pipes) must not hold the
	// exit up.
	return "", func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(time.Second):
		}
	}
}

// holderPatience bounds how long a second mcp-mux looks for the one that
// holds its metrics port.
const holderPatience = 3 * time.Second

// metricsHolder is the other mcp-mux of this user that serves metrics on
// addr, or nil.
func metricsHolder(addr string) *control.Document {
	eps, err := control.Find(func(string) {})
	if err != nil {
		return nil
	}
	for _, ep := range eps {
		if ep.PID == os.Getpid() {
			continue
		}
		if doc, err := control.Query(ep); err == nil && doc.Metrics != "" && sameAddr(doc.Metrics, addr) {
			return doc
		}
	}
	return nil
}

// sameAddr reports whether a listener on the metrics URL u holds addr's
// port for addr: the same port, on the same host, on hosts that are both
// loopback ("localhost" and 127.0.0.1), or where either is every address.
func sameAddr(u, addr string) bool {
	parsed, err := url.Parse(u)
	if err != nil {
		return false
	}
	h1, p1, err1 := net.SplitHostPort(parsed.Host)
	h2, p2, err2 := net.SplitHostPort(addr)
	if err1 != nil || err2 != nil || p1 != p2 {
		return false
	}
	every := func(h string) bool { ip := net.ParseIP(h); return h == "" || ip != nil && ip.IsUnspecified() }
	return h1 == h2 || every(h1) || every(h2) || config.IsLoopbackHost(h1) && config.IsLoopbackHost(h2)
}

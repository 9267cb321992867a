package door

import (
	"net/http"
)

// The health endpoints, for a load balancer's checks and an orchestrator's
// probes: LivePath says the process serves, ReadyPath that it should be
// sent traffic. They are outside the token (a probe carries none, and they
// say nothing but ready or not), behind the same Origin and Host checks as
// the MCP endpoint.

const (
	// LivePath answers 200 while the process serves.
	LivePath = "/healthz"
	// ReadyPath answers 200 once the core is ready and while it is not
	// draining, else 503 with the reason in one line.
	ReadyPath = "/readyz"
)

// Probes serves LivePath and ReadyPath. ready is the core's answer: nil, or
// why it is not ready (one line, naming no secret). d is the serving's
// drain, nil where there is none (a stdio mcp-mux's metrics_listen).
func Probes(ready func() error, d *Drain) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !originAllowed(r) {
			http.Error(w, "Forbidden: Origin not allowed", http.StatusForbidden)
			return
		}
		if !hostAllowed(r) {
			// As the go-sdk's handler answers /mcp: DNS rebinding.
			http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path == ReadyPath {
			if d.Draining() {
				http.Error(w, "not ready: draining (this mcp-mux is shutting down)", http.StatusServiceUnavailable)
				return
			}
			if err := ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
}

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcp-mux/mcp-mux/mux"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/mux/telemetry"
)

// serveMetrics serves the shared process's [mux] metrics_listen, if set,
// until stop: one endpoint for the process, with every class's series
// labelled class="cN" (as status names them), each family once. Without
// it the config's metrics_listen went unserved once sessions shared a
// process.
func (d *daemon) serveMetrics(cfg *config.File) (stop func()) {
	addr := cfg.Mux.MetricsListen
	if addr == "" {
		return func() {}
	}
	if err := cfg.ServeMetricsCheck(); err != nil {
		d.logger.Error("metrics not served: " + err.Error())
		return func() {}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		d.logger.Warn("metrics not served: cannot listen on "+addr, "err", err)
		return func() {}
	}
	hm := http.NewServeMux()
	hm.Handle(mux.MetricsPath, door.Guard(cfg.Mux.HTTPToken, cfg.Tokens, http.HandlerFunc(d.metrics)))
	probes := door.Probes(d.ready, nil)
	hm.Handle(door.LivePath, probes)
	hm.Handle(door.ReadyPath, probes)
	srv := &http.Server{Handler: hm, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	d.logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+mux.MetricsPath)
	return func() {
		srv.Close()
		<-done
	}
}

// metrics writes every class's metrics as one exposition.
func (d *daemon) metrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", telemetry.ContentType)
	if r.Method == http.MethodHead {
		return
	}
	var parts []labelled
	for _, cl := range d.classesByID() {
		var b bytes.Buffer
		cl.m.WriteMetrics(&b)
		parts = append(parts, labelled{fmt.Sprintf("c%d", cl.id), b.Bytes()})
	}
	bw := bufio.NewWriter(w)
	mergeMetrics(bw, parts)
	bw.Flush()
}

// ready is every class's readiness.
func (d *daemon) ready() error {
	for _, cl := range d.classesByID() {
		if err := cl.m.Ready(); err != nil {
			return err
		}
	}
	return nil
}

// classesByID is the classes, in the order they were made.
func (d *daemon) classesByID() []*class {
	d.mu.Lock()
	out := make([]*class, 0, len(d.classes))
	for _, cl := range d.classes {
		out = append(out, cl)
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b *class) int { return a.id - b.id })
	return out
}

// labelled is one class's exposition and its label.
type labelled struct {
	class string
	text  []byte
}

// mergeMetrics writes the families of parts, each once (its HELP and TYPE
// from the first part that has it, in the order they first come), with
// every sample of each part given its class label.
func mergeMetrics(w io.Writer, parts []labelled) {
	type family struct {
		head    []string
		samples []string
	}
	var order []string
	fams := map[string]*family{}
	for _, p := range parts {
		var cur *family
		for line := range strings.Lines(string(p.text)) {
			line = strings.TrimRight(line, "\n")
			if rest, ok := strings.CutPrefix(line, "# "); ok {
				f := strings.Fields(rest)
				if len(f) < 2 || (f[0] != "HELP" && f[0] != "TYPE") {
					continue
				}
				name := f[1]
				cur = fams[name]
				if cur == nil {
					cur = &family{}
					fams[name] = cur
					order = append(order, name)
				}
				if len(cur.head) < 2 && !slices.Contains(cur.head, line) {
					cur.head = append(cur.head, line)
				}
				continue
			}
			if line == "" || cur == nil {
				continue
			}
			cur.samples = append(cur.samples, withLabel(line, "class", p.class))
		}
	}
	for _, name := range order {
		f := fams[name]
		for _, l := range f.head {
			io.WriteString(w, l+"\n")
		}
		for _, l := range f.samples {
			io.WriteString(w, l+"\n")
		}
	}
}

// withLabel is a sample line with name="value" as its first label.
func withLabel(line, name, value string) string {
	label := name + `="` + value + `"`
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		if line[i] == '{' {
			if strings.HasPrefix(line[i+1:], "}") {
				return line[:i+1] + label + line[i+1:]
			}
			return line[:i+1] + label + "," + line[i+1:]
		}
		return line[:i] + "{" + label + "}" + line[i:]
	}
	return line
}

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The layering rules of the module's packages, checked on what `go list
// -deps` says each one imports, directly or not, on each platform mcp-mux
// runs on (some imports are in files for one platform only).

const module = "github.com/mcp-mux/mcp-mux"

// depRule is one package's rule: allowed says, of each of its
// dependencies, whether it may import it, or why not.
type depRule struct {
	pkg     string // relative to the module
	allowed func(dep depInfo) (ok bool, why string)
}

type depInfo struct {
	path     string
	standard bool
}

// ours is p's path inside the module ("backends/wire"), or "" if p is not
// the module's.
func ours(p string) string {
	if p == module {
		return "."
	}
	rel, ok := strings.CutPrefix(p, module+"/")
	if !ok {
		return ""
	}
	return rel
}

// under reports whether rel is dir or below it.
func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

var depRules = []depRule{
	// The supervisor is the process every backend runs under, started
	// again from mcp-mux's binary: it must stay small and self-contained.
	{"backends/internal/supervisor", func(d depInfo) (bool, string) {
		return d.standard, "the supervisor imports only the standard library"
	}},
	// The config is read by mcp-mux's CLI and by the client-config
	// import; it knows backends' specs, nothing of the mux.
	{"mux/config", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/config" || under(rel, "backends"), "mux/config imports nothing of ours but backends"
	}},
	{"mux/clientimport", func(d depInfo) (bool, string) {
		return ours(d.path) != "mux", "mux/clientimport does not import mux"
	}},
	// The control endpoint is read by `mcp-mux status`, which must not
	// need the server to find and ask the running ones.
	{"mux/control", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/control" || rel == "mux/winpipe", "mux/control imports nothing of ours but mux/winpipe"
	}},
	// The named pipe the control endpoint and the shared mcp-mux's
	// rendezvous listen on (Windows).
	{"mux/winpipe", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/winpipe", "mux/winpipe imports nothing of ours"
	}},
	{"subs", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "subs", "subs imports nothing of ours"
	}},
	// What mux writes to one agent, in order and bounded: a queue that
	// knows nothing of sessions or backends.
	{"mux/outq", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/outq", "mux/outq imports nothing of ours"
	}},
	// The agents' doors (stdio, HTTP): the core imports them, never the
	// other way, so that a new door needs nothing of the core but the seam.
	{"mux/door", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/door" || rel == "mux/outq" || rel == "mux/config" || rel == "mux/rendezvous" || rel == "mux/winpipe" || rel == "mux/instance" || under(rel, "backends"),
			"mux/door imports nothing of mux but mux/outq, mux/config, mux/rendezvous (and its mux/winpipe) and mux/instance"
	}},
	// An instance's name and the seal of what it hands an agent
	// (requestState): the doors and the core open it, it knows neither.
	{"mux/instance", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/instance" || rel == "mux/config" || under(rel, "backends"),
			"mux/instance imports nothing of ours but mux/config"
	}},
	// Where the shared mcp-mux and its sessions meet, and the session's
	// relay: a session process links nothing of the server.
	{"mux/rendezvous", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/rendezvous" || rel == "mux/winpipe", "mux/rendezvous imports nothing of ours but mux/winpipe"
	}},
	{"mux/relay", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/relay" || rel == "mux/rendezvous" || rel == "mux/winpipe" || rel == "backends/wire",
			"mux/relay imports nothing of ours but mux/rendezvous (and its mux/winpipe) and backends/wire"
	}},
	// What mcp-mux knows of each agent, and the names that fit them: tables
	// and pure functions the server asks.
	{"mux/agents", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/agents", "mux/agents imports nothing of ours"
	}},
	{"mux/toolname", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/toolname" || rel == "mux/agents", "mux/toolname imports nothing of ours but mux/agents"
	}},
	{"backends/wire", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "backends/wire", "backends/wire imports nothing of ours"
	}},
	// How many threads serve --http: a rule the CLI runs, knowing nothing
	// of what it serves.
	{"mux/cores", func(d depInfo) (bool, string) {
		return d.standard || d.path == module+"/mux/cores", "mux/cores imports only the standard library"
	}},
	// The tool search is an engine the server uses, with no knowledge of
	// the server: the standard library only.
	{"mux/search", func(d depInfo) (bool, string) {
		return d.standard || d.path == module+"/mux/search", "mux/search imports only the standard library"
	}},
	// The secret store and the sign-in are read by the CLI and the
	// config (${secret:NAME}) as well as by remote backends.
	{"backends/secrets", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "backends/secrets", "backends/secrets imports nothing of ours"
	}},
	{"backends/oauth", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "backends/oauth" || rel == "backends/secrets", "backends/oauth imports nothing of ours but backends/secrets"
	}},
	// Tracing is a seam of its own: the mux calls it, it knows nothing of
	// the mux (it gets names and _meta, gives spans and _meta back).
	{"mux/tracing", func(d depInfo) (bool, string) {
		rel := ours(d.path)
		return rel == "" || rel == "mux/tracing", "mux/tracing imports nothing of ours"
	}},
	// What every mcp-mux links it runs the init of and holds in memory,
	// tracing or not: the OTLP exporter is mux/tracing's own (protowire
	// only), where otlptracehttp linked gRPC, x/net and the generated OTLP
	// types (some 4 MB of binary and of RSS).
	// Nor anything of OpenTelemetry's (go.opentelemetry.io/...): its SDK
	// and API (otel, sdk/trace, attribute, propagation, semconv...) cost
	// 1.6 MB of binary and, measured idle after an initialize, 0.85 MB
	// of peak RSS (VmHWM, mostly its mapped code and data) in every
	// mcp-mux, tracing or not, and 0.4 MB in each backend's supervisor:
	// mux/tracing samples, batches and propagates itself.
	// Nor the Prometheus client library, which brought the protobuf
	// runtime's reflection and descriptors (1.3-1.7 MB of RSS, 3.6 MB of
	// binary): mux/telemetry writes the text format itself.
	{".", func(d depInfo) (bool, string) {
		for _, heavy := range []string{"google.golang.org/grpc", "golang.org/x/net"} {
			if d.path == heavy || strings.HasPrefix(d.path, heavy+"/") {
				return false, "mcp-mux's binary links no gRPC or x/net (mux/tracing encodes OTLP itself)"
			}
		}
		if strings.HasPrefix(d.path, "go.opentelemetry.io/") {
			return false, "mcp-mux's binary links nothing of OpenTelemetry's, neither the OTLP generated types nor the SDK and API (mux/tracing is its own SDK)"
		}
		for _, heavy := range []string{"github.com/prometheus", "google.golang.org/protobuf/reflect", "google.golang.org/protobuf/proto"} {
			if d.path == heavy || strings.HasPrefix(d.path, heavy+"/") {
				return false, "mcp-mux's binary links no Prometheus client or protobuf reflection (mux/telemetry writes the text format itself)"
			}
		}
		return true, ""
	}},
	{"backends", func(d depInfo) (bool, string) {
		return !under(ours(d.path), "mux"), "backends does not import mux"
	}},
}

func TestPackageDependencies(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command:", err)
	}
	if dir := os.Getenv(testkit.BinDirEnv); dir != "" {
		t.Skip("prebuilt binaries (" + testkit.BinDirEnv + "): there is no Go toolchain here to list packages with (under Wine: none in the prefix)")
	}
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		for _, r := range depRules {
			t.Run(goos+"/"+r.pkg, func(t *testing.T) {
				cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{.Standard}}{{range .Imports}} {{.}}{{end}}`, "./"+r.pkg)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("go list: %v\n%s", err, exitStderr(err))
				}
				self := module
				if r.pkg != "." {
					self += "/" + r.pkg
				}
				var order []string
				imports := map[string][]string{}
				why := map[string]string{} // the packages it may not import, and why
				for line := range strings.Lines(string(out)) {
					f := strings.Fields(line)
					if len(f) < 2 {
						continue
					}
					order = append(order, f[0])
					imports[f[0]] = f[2:]
					if f[0] == self {
						continue
					}
					if ok, w := r.allowed(depInfo{path: f[0], standard: f[1] == "true"}); !ok {
						why[f[0]] = w
					}
				}
				if _, ok := imports[self]; !ok {
					t.Fatalf("go list -deps ./%s does not list the package itself:\n%s", r.pkg, out)
				}
				// Name where the rule is broken: a package it may not
				// import, imported by one it may (what that one imports
				// in turn only follows).
				for _, p := range order {
					if _, bad := why[p]; bad {
						continue
					}
					via := "directly"
					if p != self {
						via = "through " + p
					}
					for _, dep := range imports[p] {
						if w, bad := why[dep]; bad {
							t.Errorf("%s imports %s (%s, GOOS=%s): %s", r.pkg, dep, via, goos, w)
						}
					}
				}
			})
		}
	}
}

func exitStderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

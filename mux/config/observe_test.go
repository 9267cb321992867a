package config

import (
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// metrics_listen is HOST:PORT, and loopback unless http_token guards it;
// audit_log is a file in a directory that exists, never stdout. Each
// mistake is reported at its line.
func TestConfigMetricsListenAndAuditLog(t *testing.T) {
	dir := t.TempDir()
	backend := "[[backend]]\nname = \"a\"\ncommand = \"go\"\n"
	for _, tc := range []struct {
		name, mux string
		env       map[string]string
		want      []wantProblem
	}{
		{"loopback", "metrics_listen = \"127.0.0.1:9464\"\n", nil, nil},
		{"not loopback with a token", "http_token = \"${TOKEN}\"\nmetrics_listen = \"0.0.0.0:9464\"\n", map[string]string{"TOKEN": "t0k3n-long-enough"}, nil},
		{"not loopback without a token", "name = \"x\"\nmetrics_listen = \"0.0.0.0:9464\"\n", nil,
			[]wantProblem{{3, `mux.metrics_listen: metrics address "0.0.0.0:9464" is not loopback`}}},
		{"not HOST:PORT", "metrics_listen = \"9464\"\n", nil,
			[]wantProblem{{2, `mux.metrics_listen: metrics address "9464": address 9464: missing port in address (want HOST:PORT`}}},
		{"audit_log in a directory that exists", "audit_log = " + quoted(filepath.Join(dir, "audit.log")) + "\naudit_arguments = true\n", nil, nil},
		{"audit_log in a directory that does not", "\naudit_log = " + quoted(filepath.Join(dir, "gone", "audit.log")) + "\n", nil,
			[]wantProblem{{3, "mux.audit_log: directory"}}},
		{"audit_log is stdout", "audit_log = \"/dev/stdout\"\n", nil,
			[]wantProblem{{2, "mux.audit_log: \"/dev/stdout\" is mcp-mux's stdout, which carries the MCP protocol: audit lines there would corrupt it"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "audit_log is stdout" && runtime.GOOS == "windows" {
				t.Skip("no /dev/stdout on Windows (TestConfigWindowsPaths: it is a path there)")
			}
			cfg, ps := parseString(t, "[mux]\n"+tc.mux+backend, envOf(tc.env))
			checkProblems(t, "test.toml", ps, tc.want)
			if len(tc.want) == 0 && cfg.Mux.MetricsListen == "" && cfg.Mux.AuditLog == "" {
				t.Errorf("neither key was read: %+v", cfg.Mux)
			}
		})
	}
}

func quoted(s string) string { return "'" + s + "'" }

// http_advertise is a base URL the other instances reach: http(s), a host
// and a port, nothing else, never a wildcard. Each mistake is reported at
// its line, with the form to write.
func TestConfigHTTPAdvertise(t *testing.T) {
	backend := "[[backend]]\nname = \"a\"\ncommand = \"go\"\n"
	for _, tc := range []struct {
		value string
		want  string // "" for none
	}{
		{"http://10.0.0.11:8931", ""},
		{"https://mux-1.internal:443/", ""},
		{"10.0.0.11:8931", `is not an address the other instances can reach: write it as "http://host:port"`},
		{"ftp://10.0.0.11:8931", `is not an address the other instances can reach`},
		{"http://10.0.0.11:8931/mcp", `has more than a scheme, host and port`},
		{"http://user:pw@10.0.0.11:8931", `has more than a scheme, host and port`},
		{"http://10.0.0.11", `has no port`},
		{"http://0.0.0.0:8931", `is a wildcard address`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			cfg, ps := parseString(t, "[mux]\nname = \"x\"\nhttp_advertise = "+quoted(tc.value)+"\n"+backend, nil)
			var want []wantProblem
			if tc.want != "" {
				want = []wantProblem{{3, "mux.http_advertise: http_advertise " + strconv.Quote(tc.value) + " " + tc.want}}
			}
			checkProblems(t, "test.toml", ps, want)
			if tc.want == "" && cfg.Mux.HTTPAdvertise != tc.value {
				t.Errorf("HTTPAdvertise %q, want %q", cfg.Mux.HTTPAdvertise, tc.value)
			}
		})
	}
}

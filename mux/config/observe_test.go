package config

import (
	"path/filepath"
	"runtime"
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

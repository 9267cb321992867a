package config

import (
	"strings"
	"testing"
)

func TestRemoteBackendConfigIsDecodedAndHeadersExpanded(t *testing.T) {
	src := `[[backend]]
name = "web"
url = "https://mcp.example.com/mcp"
transport = "streamable"
headers = { Authorization = "Bearer ${WEB_TOKEN}", X-Team = "core" }
`
	cfg, ps := parseString(t, src, envOf(map[string]string{"WEB_TOKEN": "tok-123"}))
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	s := cfg.Backends[0]
	if s.URL != "https://mcp.example.com/mcp" || s.Transport != "streamable" || s.Command != "" {
		t.Errorf("spec: %+v", s)
	}
	if s.Headers["Authorization"] != "Bearer tok-123" || s.Headers["X-Team"] != "core" {
		spec := s.Spec()
		t.Errorf("headers not expanded: %v", spec.HeaderKeys())
	}
}

func TestRemoteBackendConfigMistakes(t *testing.T) {
	const secret = "s3cr3t-h3ader-value"
	for _, tc := range []struct {
		name, body string
		want       []string // each a substring of one problem, in order
	}{
		{"both", `command = "go"` + "\n" + `url = "http://h/mcp"`,
			[]string{"url: a backend has either a command or a url, not both"}},
		{"neither", `args = ["x"]`,
			[]string{"command: missing: every [[backend]] needs a command (a program to run) or a url (a remote MCP server)"}},
		{"not http", `url = "ftp://h/mcp"`,
			[]string{`url: must be an http:// or https:// URL (got "ftp://h/mcp")`}},
		{"no host", `url = "http:///mcp"`,
			[]string{"url: must be an http:// or https:// URL"}},
		{"not expanded", `url = "https://h/mcp?key=${KEY}"`,
			[]string{`url: "${...}" is not expanded in url`}},
		{"bad transport", `url = "http://h/mcp"` + "\n" + `transport = "websocket"`,
			[]string{`transport: must be "auto", "streamable" or "sse" (got "websocket")`}},
		{"headers with command", `command = "go"` + "\n" + `headers = { A = "b" }`,
			[]string{"headers: applies only to a remote backend (url)"}},
		{"transport with command", `command = "go"` + "\n" + `transport = "sse"`,
			[]string{"transport: applies only to a remote backend (url)"}},
		{"env with url", `url = "http://h/mcp"` + "\n" + `env = { TOKEN = "` + secret + `" }`,
			[]string{"env: a remote backend has no process to give an environment: to send a token, use headers"}},
		{"args with url", `url = "http://h/mcp"` + "\n" + `args = ["x"]`,
			[]string{"args: applies only to a command"}},
		{"unset variable", `url = "http://h/mcp"` + "\n" + `headers = { Authorization = "Bearer ${NOT_SET_ANYWHERE}" }`,
			[]string{"headers.Authorization: ${NOT_SET_ANYWHERE} is not set"}},
		{"bad header name", `url = "http://h/mcp"` + "\n" + `headers = { "Authorization: Bearer ` + secret + `" = "x" }`,
			[]string{`headers."Authorization...": invalid header name`}},
		{"line break in value", `url = "http://h/mcp"` + "\n" + `headers = { A = "` + secret + `\r\nX-Evil: 1" }`,
			[]string{"headers.A: value contains a line break or NUL character"}},
		{"protocol header", `url = "http://h/mcp"` + "\n" + `headers = { Mcp-Session-Id = "x" }`,
			[]string{`headers.Mcp-Session-Id: is set by the protocol`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "[[backend]]\nname = \"web\"\n" + tc.body + "\n"
			_, ps := parseString(t, src, noEnv)
			all := problemStrings(ps)
			if len(ps) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:%s", len(ps), len(tc.want), all)
			}
			for i, w := range tc.want {
				if !strings.Contains(ps[i].String(), w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, ps[i].String(), w)
				}
			}
			if strings.Contains(all, secret) {
				t.Errorf("a value is shown:%s", all)
			}
		})
	}
}

// cwd and inherit_env mean nothing for a remote backend, but lose nothing
// either: a warning, not a refusal.
func TestRemoteBackendWarnsOfProcessOnlyKeys(t *testing.T) {
	src := "[[backend]]\nname = \"web\"\nurl = \"http://h/mcp\"\ncwd = \"/\"\ninherit_env = [\"HOME\"]\n"
	cfg, ps := parseString(t, src, noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	got := problemStrings(cfg.Warnings)
	for _, w := range []string{"cwd: ignored: a remote backend (url) has no process", "inherit_env: ignored: a remote backend (url) has no process"} {
		if !strings.Contains(got, w) {
			t.Errorf("warnings lack %q:%s", w, got)
		}
	}
}

func TestDisabledRemoteBackendMayNameUnsetVariables(t *testing.T) {
	src := "[[backend]]\nname = \"web\"\nurl = \"http://h/mcp\"\ndisabled = true\nheaders = { Authorization = \"Bearer ${NOT_SET_ANYWHERE}\" }\n\n" +
		"[[backend]]\nname = \"other\"\nurl = \"http://h/other\"\n"
	if _, ps := parseString(t, src, noEnv); ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
}

package config

import (
	"strings"
	"testing"
)

// TestUnsetVariableMessageGivesTheFixThatFits: a variable that holds a
// secret (by its name, or by where it is used: env, headers, the OAuth
// client secret, the HTTP token) gets no ${NAME:-default} advice, which
// would put the secret in the file; it is set in mcp-mux's environment,
// which the agent gives it (then the agent restarts), or, where
// ${secret:NAME} is expanded, kept in the OS store. A plain setting in
// command, args or cwd may still have a default.
func TestUnsetVariableMessageGivesTheFixThatFits(t *testing.T) {
	const restart = `set it in mcp-mux's environment (the "env" of mcp-mux's entry in the agent's MCP config) and restart the agent`
	store := func(name string) string {
		return "or store it with `mcp-mux secret set " + name + "` and write ${secret:" + name + "} in its place"
	}
	for _, tt := range []struct {
		name, src string
		want      []string // substrings of the one problem
		noStore   bool     // ${secret:NAME} is not expanded there
	}{
		{"env value named as a secret", `env = { SLACK_BOT_TOKEN = "${SLACK_BOT_TOKEN}" }`,
			[]string{"env.SLACK_BOT_TOKEN: ${SLACK_BOT_TOKEN} is not set: " + restart, store("SLACK_BOT_TOKEN")}, false},
		{"env value with a plain name", `env = { REGION = "${AWS_REGION}" }`,
			[]string{"env.REGION: ${AWS_REGION} is not set: " + restart, store("AWS_REGION")}, false},
		{"arg named as a secret", `args = ["--token", "${API_TOKEN}"]`,
			[]string{"args #2: ${API_TOKEN} is not set: " + restart}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseString(t, "[[backend]]\nname = \"a\"\ncommand = \"go\"\n"+tt.src+"\n", noEnv)
			if len(ps) != 1 {
				t.Fatalf("want one problem:%s", problemStrings(ps))
			}
			got := ps[0].String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q\nlacks %q", got, w)
				}
			}
			if strings.Contains(got, ":-") {
				t.Errorf("%q suggests a default for a secret", got)
			}
			if tt.noStore && strings.Contains(got, "${secret:") {
				t.Errorf("%q suggests ${secret:...} where it is not expanded", got)
			}
		})
	}

	remote := "[[backend]]\nname = \"web\"\nurl = \"https://mcp.example.com/mcp\"\n"
	for _, tt := range []struct{ name, src, want string }{
		{"header", remote + `headers = { Authorization = "Bearer ${WEB_TOKEN}" }`, "headers.Authorization: ${WEB_TOKEN} is not set: " + restart + ", " + store("WEB_TOKEN")},
		{"oauth client secret", remote + "oauth_client_id = \"id\"\noauth_client_secret = \"${WEB_CLIENT}\"", "oauth_client_secret: ${WEB_CLIENT} is not set: " + restart + ", " + store("WEB_CLIENT")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseString(t, tt.src+"\n", noEnv)
			if len(ps) != 1 || !strings.Contains(ps[0].String(), tt.want) {
				t.Errorf("want one problem with %q:%s", tt.want, problemStrings(ps))
			}
		})
	}

	// The HTTP token is mcp-mux's own, not a backend's: whoever starts
	// mcp-mux serve --http gives it, and ${secret:NAME} is not read there.
	_, ps := parseString(t, "[mux]\nhttp_listen = \"127.0.0.1:8931\"\nhttp_token = \"${MCP_MUX_TOKEN}\"\n[[backend]]\nname = \"a\"\ncommand = \"go\"\n", noEnv)
	if len(ps) != 1 || !strings.Contains(ps[0].String(), "mux.http_token: ${MCP_MUX_TOKEN} is not set: set it in the environment mcp-mux is started with") ||
		strings.Contains(ps[0].String(), ":-") || strings.Contains(ps[0].String(), "${secret:") {
		t.Errorf("http_token:%s", problemStrings(ps))
	}

	// A variable set to nothing is named too: the file has no empty value.
	_, ps = parseString(t, "[mux]\nhttp_token = \"${MCP_MUX_TOKEN}\"\n[[backend]]\nname = \"a\"\ncommand = \"go\"\n", envOf(map[string]string{"MCP_MUX_TOKEN": ""}))
	if len(ps) != 1 || !strings.Contains(ps[0].String(), "mux.http_token: is empty: ${MCP_MUX_TOKEN} is empty in the environment mcp-mux is started with; set it to a long random value") {
		t.Errorf("http_token with its variable empty:%s", problemStrings(ps))
	}

	// No secret: a default is the easy fix.
	_, ps = parseString(t, "[[backend]]\nname = \"a\"\ncommand = \"${TOOLS_DIR}/srv\"\n", noEnv)
	if len(ps) != 1 || !strings.Contains(ps[0].String(), "${TOOLS_DIR} is not set (use ${TOOLS_DIR:-default} for a default)") {
		t.Errorf("command:%s", problemStrings(ps))
	}
}

// TestOnlyAnAgentRestartAppliesAVariable: a backend broken by an unset
// variable is mended by the agent's config and a restart (or by the file,
// with ${secret:NAME}); one broken by anything else, by saving the file.
func TestOnlyAnAgentRestartAppliesAVariable(t *testing.T) {
	cfg, err := ParseForServing("serve.toml", []byte(`[[backend]]
name = "unset"
command = "go"
env = { T = "${SLACK_BOT_TOKEN}" }
[[backend]]
name = "typo"
command = "go"
restart = "sometimes"
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Backends[0].Broken; !NeedsAgentRestart(b) {
		t.Errorf("unset: NeedsAgentRestart(%q) = false", b)
	}
	if b := cfg.Backends[1].Broken; b == "" || NeedsAgentRestart(b) {
		t.Errorf("typo: NeedsAgentRestart(%q) = true, or not broken", b)
	}
}

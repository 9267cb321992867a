package agents_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// agent is one agent CLI as the suite drives it: offline, in a home of
// the run's own, against a fake model API.
type agent struct {
	name    string // as in the table, and its subtest's name
	version string // pinned in package.json
	bin     string // under node_modules/.bin
	model   func(testing.TB, testkit.ModelScript) *testkit.FakeModel
	// setup writes the agent's own config (home is its HOME, work its
	// working directory) for srvs and the model at url, and returns the
	// arguments and environment of a one-prompt run.
	setup func(home, work, url string, srvs []server, prompt string) (args, env []string, err error)
	// toolName is how the agent names a server's tool to the model: its
	// namespace (Codex) and name.
	toolName func(server, tool string) (ns, name string)
	// instructionsOf is where the agent puts a server's instructions for
	// the model: what req holds there (all its texts joined, whitespace
	// collapsed) must contain, if the instructions text reached the model
	// as that server's; "" where they never reach it.
	instructionsOf func(server, text string) string
	// apiLimit is the model API's limit on a tool name that the agent
	// itself does not enforce: a longer name fails the whole request.
	apiLimit int
	// result is a tool result as the model sees it, less what differs from
	// run to run (a wall time).
	result func(string) string
}

var agents = []agent{codex, gemini, opencode, copilot, claude}

// openAIName is OpenAI's rule for a function name: ^[a-zA-Z0-9_-]{1,64}$.
var openAIName = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func envList(m map[string]string) []string {
	var l []string
	for _, k := range sortedKeys(m) {
		l = append(l, k+"="+m[k])
	}
	return l
}

var codex = agent{
	name: "codex", version: "0.169.0", bin: "codex",
	model: testkit.StartResponsesModel,
	setup: func(home, work, url string, srvs []server, prompt string) ([]string, []string, error) {
		codexHome := filepath.Join(home, ".codex")
		var sb strings.Builder
		fmt.Fprintf(&sb, "model = \"gpt-5.4\"\nmodel_provider = \"fake\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n")
		fmt.Fprintf(&sb, "[model_providers.fake]\nname = \"fake\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"FAKE_MODEL_KEY\"\n\n", url+"/v1")
		for _, s := range srvs {
			args, _ := json.Marshal(s.args)
			env, _ := json.Marshal(s.env)
			// JSON strings and objects of strings are TOML too, but for the
			// inline table's "key": "value" form: TOML wants key = value.
			envTOML := strings.NewReplacer(`":"`, `" = "`, `","`, `", "`).Replace(string(env))
			fmt.Fprintf(&sb, "[mcp_servers.%q]\ncommand = %q\nargs = %s\nenv = %s\nstartup_timeout_sec = 60\n\n", s.name, s.command, args, envTOML)
		}
		if err := os.MkdirAll(codexHome, 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(sb.String()), 0o600); err != nil {
			return nil, nil, err
		}
		return []string{"exec", "--skip-git-repo-check", "--json", prompt},
			[]string{"CODEX_HOME=" + codexHome, "FAKE_MODEL_KEY=x"}, nil
	},
	toolName: func(server, tool string) (string, string) {
		return "mcp__" + openAIName.ReplaceAllString(strings.ReplaceAll(server, "-", "_"), "_"),
			openAIName.ReplaceAllString(strings.ReplaceAll(tool, "-", "_"), "_")
	},
	// The namespace's description is the server's instructions.
	instructionsOf: func(server, text string) string { return text },
	apiLimit:       64,
	result: func(s string) string {
		return regexp.MustCompile(`Wall time: [0-9.]+ ?\w*`).ReplaceAllString(s, "Wall time: T")
	},
}

var gemini = agent{
	name: "gemini", version: "0.61.0", bin: "gemini",
	model: testkit.StartGeminiModel,
	setup: func(home, work, url string, srvs []server, prompt string) ([]string, []string, error) {
		mcpServers := map[string]any{}
		for _, s := range srvs {
			mcpServers[s.name] = map[string]any{"command": s.command, "args": s.args, "env": s.env, "timeout": 60000}
		}
		settings := map[string]any{
			"security":   map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
			"mcpServers": mcpServers,
			"general":    map[string]any{"disableAutoUpdate": true},
			"privacy":    map[string]any{"usageStatisticsEnabled": false},
		}
		if err := writeJSON(filepath.Join(home, ".gemini", "settings.json"), settings); err != nil {
			return nil, nil, err
		}
		return []string{"-p", prompt, "--approval-mode", "yolo", "--output-format", "json", "-m", "gemini-2.5-pro"},
			[]string{"GEMINI_API_KEY=x", "GOOGLE_GEMINI_BASE_URL=" + url, "GEMINI_CLI_TRUST_WORKSPACE=true", "GEMINI_CLI_NO_RELAUNCH=1"}, nil
	},
	toolName: func(server, tool string) (string, string) {
		n := regexp.MustCompile(`[^a-zA-Z0-9_.:-]`).ReplaceAllString("mcp_"+server+"_"+tool, "_")
		if len(n) > 63 {
			n = n[:30] + "..." + n[len(n)-30:]
		}
		return "", n
	},
	instructionsOf: func(server, text string) string {
		return "The following are instructions provided by the tool server '" + server + "':\n---[start of server instructions]---\n" + text + "\n---[end of server instructions]---"
	},
	result: func(s string) string { return s },
}

var opencode = agent{
	name: "opencode", version: "1.18.33", bin: "opencode",
	model: testkit.StartChatModel,
	setup: func(home, work, url string, srvs []server, prompt string) ([]string, []string, error) {
		mcpServers := map[string]any{}
		for _, s := range srvs {
			mcpServers[s.name] = map[string]any{"type": "local", "command": append([]string{s.command}, s.args...), "environment": s.env, "enabled": true, "timeout": 60000}
		}
		cfg := map[string]any{
			"$schema":     "https://opencode.ai/config.json",
			"model":       "fake/fake-model",
			"small_model": "fake/fake-model",
			"provider": map[string]any{"fake": map[string]any{"npm": "@ai-sdk/openai-compatible", "name": "fake",
				"options": map[string]any{"baseURL": url + "/v1", "apiKey": "x"},
				"models":  map[string]any{"fake-model": map[string]any{"name": "fake-model", "tool_call": true}}}},
			"permission": map[string]any{"*": "allow"},
			"autoupdate": false,
			"share":      "disabled",
			"mcp":        mcpServers,
		}
		if err := writeJSON(filepath.Join(home, ".config", "opencode", "opencode.json"), cfg); err != nil {
			return nil, nil, err
		}
		return []string{"run", "--format", "json", prompt},
			[]string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
				"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state")}, nil
	},
	toolName: func(server, tool string) (string, string) {
		return "", openAIName.ReplaceAllString(server, "_") + "_" + openAIName.ReplaceAllString(tool, "_")
	},
	instructionsOf: func(server, text string) string {
		return "<server name=\"" + server + "\">\n" + text + "\n</server>"
	},
	apiLimit: 64,
	result:   func(s string) string { return s },
}

var copilot = agent{
	name: "copilot", version: "1.0.102", bin: "copilot",
	model: testkit.StartChatModel,
	setup: func(home, work, url string, srvs []server, prompt string) ([]string, []string, error) {
		mcpServers := map[string]any{}
		for _, s := range srvs {
			mcpServers[s.name] = map[string]any{"type": "local", "command": s.command, "args": s.args, "env": s.env, "tools": []string{"*"}}
		}
		if err := writeJSON(filepath.Join(home, ".copilot", "mcp-config.json"), map[string]any{"mcpServers": mcpServers}); err != nil {
			return nil, nil, err
		}
		return []string{"-p", prompt, "--allow-all-tools", "--disable-builtin-mcps", "--no-auto-update", "--output-format", "json"},
			[]string{"COPILOT_PROVIDER_BASE_URL=" + url + "/v1", "COPILOT_PROVIDER_API_KEY=x", "COPILOT_MODEL=gpt-4.1",
				"COPILOT_OFFLINE=true", "COPILOT_AUTO_UPDATE=false", "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
				"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state")}, nil
	},
	toolName: func(server, tool string) (string, string) {
		n := server + "-" + tool
		if len(n) > 64 {
			n = n[:64]
		}
		return "", n
	},
	instructionsOf: func(server, text string) string { return "" }, // none reach its model
	result:         func(s string) string { return s },
}

var claude = agent{
	name: "claude", version: "2.1.328", bin: "claude",
	model: testkit.StartAnthropicModel,
	setup: func(home, work, url string, srvs []server, prompt string) ([]string, []string, error) {
		mcpServers := map[string]any{}
		allowed := []string{}
		for _, s := range srvs {
			mcpServers[s.name] = map[string]any{"type": "stdio", "command": s.command, "args": s.args, "env": s.env}
			allowed = append(allowed, "mcp__"+s.name)
		}
		cfg := filepath.Join(home, "mcp.json")
		if err := writeJSON(cfg, map[string]any{"mcpServers": mcpServers}); err != nil {
			return nil, nil, err
		}
		seed := map[string]any{"hasCompletedOnboarding": true, "projects": map[string]any{work: map[string]any{"hasTrustDialogAccepted": true}}}
		if err := writeJSON(filepath.Join(home, ".claude.json"), seed); err != nil {
			return nil, nil, err
		}
		return []string{"-p", prompt, "--mcp-config", cfg, "--strict-mcp-config", "--output-format", "stream-json", "--verbose",
				"--allowedTools", strings.Join(allowed, " ")},
			// ENABLE_TOOL_SEARCH=false: the MCP tools' definitions go in the
			// request's tools (else only their names, in a system turn).
			[]string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=sk-ant-test", "ENABLE_TOOL_SEARCH=false",
				"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1"}, nil
	},
	toolName: func(server, tool string) (string, string) {
		return "", "mcp__" + server + "__" + tool
	},
	instructionsOf: func(server, text string) string {
		return "# MCP Server Instructions\n\nThe following MCP servers have provided instructions for how to use their tools and resources:\n\n## " + server + "\n" + text
	},
	result: func(s string) string { return s },
}

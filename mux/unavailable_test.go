package mux

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A name under the prefix of a backend that does not serve (its entry has
// mistakes, it failed at start, the config disables it) is still an
// unknown name (-32602), and the error says which backend, its state, why
// and what fixes it, as it does for one that needs a sign-in.
func TestANameOfABackendThatIsDownSaysWhichWhyAndTheFix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp-mux.toml")
	text := backendTOML(t, "local") +
		backendTOML(t, "slack", `env = { TOKEN = "${MCP_MUX_TEST_NEVER_SET}" }`) +
		fmt.Sprintf("[[backend]]\nname = \"crashy\"\ncommand = %q\nargs = [\"-name\", \"crashy\", \"-fail-start\"]\nrestart = \"never\"\n\n", testkit.FixtureBin(t)) +
		backendTOML(t, "off", "disabled = true")
	cfg, err := config.ParseForServing(path, []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Mux = testConfig().Mux
	m := startMuxConfig(t, cfg)
	cs := connect(t, m, nil)
	testkit.Eventually(t, 10*time.Second, "crashy to be failed", func() bool { return m.Status()[2].State == stateFailed })

	for _, c := range []struct {
		kind, name string
		want       []string
	}{
		{"tool", "slack__post", []string{`unknown tool "slack__post": backend "slack" (prefix slack__) is failed: ` + path + `:`,
			// A variable of mcp-mux's environment: the agent's config, then a restart of the agent.
			"${MCP_MUX_TEST_NEVER_SET} is not set", "mcp-mux secret set MCP_MUX_TEST_NEVER_SET", "applies when the agent restarts"}},
		{"prompt", "slack__greet", []string{`unknown prompt "slack__greet": backend "slack" (prefix slack__) is failed: ` + path + `:`}},
		{"tool", "crashy__echo", []string{`unknown tool "crashy__echo": backend "crashy" (prefix crashy__) is failed: `,
			"failing on purpose", "restart mcp-mux"}},
		{"tool", "off__echo", []string{`unknown tool "off__echo": backend "off" (prefix off__) is disabled by config: disabled = true in ` + path,
			"save the file: mcp-mux reloads it"}},
		{"tool", "nobody__echo", []string{`unknown tool "nobody__echo"`}},
	} {
		var err error
		if c.kind == "tool" {
			_, err = cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: c.name, Arguments: map[string]any{}})
		} else {
			_, err = cs.GetPrompt(testkit.CtxT(t), &mcp.GetPromptParams{Name: c.name})
		}
		je := rpcCode(t, err)
		if je.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: code %d, want %d", c.name, je.Code, jsonrpc.CodeInvalidParams)
		}
		for _, w := range c.want {
			if !strings.Contains(je.Message, w) {
				t.Errorf("%s: %q lacks %q", c.name, je.Message, w)
			}
		}
		if c.name == "nobody__echo" && je.Message != `unknown tool "nobody__echo"` {
			t.Errorf("%s: %q, want no backend named", c.name, je.Message)
		}
	}
}

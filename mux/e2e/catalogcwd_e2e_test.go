package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A backend with no cwd runs in the project the agent started mcp-mux in,
// and may list something else there (a server that reads the project's
// files): once it was seen in a project, what mcp-mux remembers of it in
// another is not listed at rest there.
func TestARememberedCatalogIsTheProjectsOwn(t *testing.T) {
	catalogs := filepath.Join(t.TempDir(), "catalogs")
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MCP_MUX_CATALOGS=") }), "MCP_MUX_CATALOGS="+catalogs)
	cfg := testkit.WriteConfig(t, "", []string{"proj", "-name", "proj", "-catalog", "tools.json", "-catalog-backend", "x"})
	project := func(tool string) string {
		d := t.TempDir()
		cat := fmt.Sprintf(`{"tools":[{"backend":"x","tool":{"name":"x__%s","description":"only here","inputSchema":{"type":"object"}}}]}`, tool)
		if err := os.WriteFile(filepath.Join(d, "tools.json"), []byte(cat), 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := project("only_in_a"), project("only_in_b")
	firstList := func(dir string) []string {
		t.Helper()
		cmd := exec.Command(testkit.MuxBin(t), "-c", cfg)
		cmd.Env, cmd.Dir = env, dir
		c := mcp.NewClient(&mcp.Implementation{Name: "some-agent", Version: "1"}, nil)
		cs, err := c.Connect(testkit.CtxT(t), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		return listedTools(t, cs)
	}
	// Each project seen once: from then on each lists its own at rest,
	// whichever was seen last.
	firstList(a)
	firstList(b)
	if got := firstList(a); !slices.Contains(got, "proj__only_in_a") || slices.Contains(got, "proj__only_in_b") {
		t.Errorf("back in project a the first list is %v: want a's own tool, never b's remembered one", got)
	}
	if got := firstList(b); !slices.Contains(got, "proj__only_in_b") || slices.Contains(got, "proj__only_in_a") {
		t.Errorf("back in project b the first list is %v: want b's own tool, never a's remembered one", got)
	}
}

package mux

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/oauth"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A backend whose server signs in waits for a login without holding up
// the others or retrying, names the command for any of its names, and
// connects when the login is stored, announcing its tools.
func TestBackendThatNeedsALoginWaitsForIt(t *testing.T) {
	t.Setenv("MCP_MUX_SECRET_STORE", "file")
	t.Setenv("MCP_MUX_STATE_DIR", filepath.Join(t.TempDir(), "state"))
	srv := testkit.StartOAuthServer(t, "web", time.Hour)
	m := startMux(t, fixture(t, "local"), config.Backend{Name: "web", URL: srv.URL()})
	changed := make(chan struct{}, 10)
	cs := connect(t, m, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	testkit.Eventually(t, 10*time.Second, "web needs a login", func() bool { return m.Status()[1].State == stateNeedsLogin })
	if names := toolNames(t, cs); !slices.Contains(names, "local__echo") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "web__") }) {
		t.Errorf("tools before the login: %v", names)
	}
	_, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "web__anything", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "needs a sign-in: run `mcp-mux login web` in a terminal") {
		t.Errorf("a call under web's prefix: %v", err)
	} else if je := rpcCode(t, err); je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a call under web's prefix: code %d, want %d (an unknown tool, as for any backend that is down)", je.Code, jsonrpc.CodeInvalidParams)
	}
	if st := m.Status()[1]; st.SignIn != "needs login" || st.Restarts != 0 {
		t.Errorf("web: %+v", st)
	}
	if instr := m.instructions(nil); !strings.Contains(instr, "backend \"web\" is not running: it needs a sign-in; the user runs `mcp-mux login web`") {
		t.Errorf("instructions:\n%s", instr)
	}

	s, err := oauth.Open()
	if err != nil {
		t.Fatal(err)
	}
	open := func(u string) error {
		go func() {
			if resp, err := http.Get(u); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		return nil
	}
	for len(changed) > 0 {
		<-changed // from before the login
	}
	if _, err := oauth.Login(testkit.CtxT(t), s, oauth.LoginOptions{Name: "web", ServerURL: srv.URL(), Open: open, Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after the login")
	}
	if names := toolNames(t, cs); !slices.Contains(names, "web__echo") {
		t.Errorf("tools after the login: %v", names)
	}
	// The sign-in it needed is stored now: its reason is no longer one.
	if st := m.Status()[1]; st.State != stateReady || st.SignIn != "signed in" || st.Issuer != srv.AS.URL || st.LastError != "" {
		t.Errorf("web after the login: %+v", st)
	}
}

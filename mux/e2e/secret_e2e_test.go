package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A backend that is failed because a ${secret:NAME} it names is not
// stored starts once `mcp-mux secret set NAME` stores it, as one that
// needs a sign-in connects once `mcp-mux login` ran: without saving the
// config file or a SIGHUP. Its tools appear (list_changed), it gets the
// value, and the value is in no output.
func TestASecretStoredWhileServingStartsTheBackendThatNeedsIt(t *testing.T) {
	const value = "xoxb-st0red-wh1le-serving"
	env, _ := signinEnv(t)
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\nlog_level = \"debug\"\n\n"+stdioBackend(t, "local")+
		fmt.Sprintf("[[backend]]\nname = \"slack\"\ncommand = %q\nargs = [\"-name\", \"slack\", \"-env-tool\"]\nenv = { SLACK_TOKEN = \"${secret:SLACK_TOKEN}\" }\n", testkit.FixtureBin(t)))
	r := serveWithEnv(t, env, cfg)
	if st := backendState(t, r.cs, "slack"); st.State != "failed" || !strings.Contains(st.LastError, "mcp-mux secret set SLACK_TOKEN") {
		t.Fatalf("slack before the secret is stored: %+v", st)
	}
	if msg := callErr(t, r.cs, "local__echo"); msg != "" {
		t.Fatalf("local__echo: %s", msg)
	}
	for len(r.toolsChanged) > 0 {
		<-r.toolsChanged
	}

	out, errOut, code := muxRunIn(t, env, value+"\n", "secret", "set", "SLACK_TOKEN")
	if code != 0 {
		t.Fatalf("secret set: exit %d\n%s%s", code, out, errOut)
	}
	select {
	case <-r.toolsChanged:
	case <-time.After(20 * time.Second):
		t.Fatalf("no tools/list_changed within 20 s of the secret being stored; slack: %+v\nstderr:\n%s", backendState(t, r.cs, "slack"), r.stderr)
	}
	testkit.Eventually(t, 10*time.Second, "slack to be ready", func() bool { return backendState(t, r.cs, "slack").State == "ready" })
	res, err := r.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slack__env", Arguments: map[string]any{}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("slack__env: %v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, "SLACK_TOKEN="+value) {
		t.Errorf("slack's environment lacks the stored secret: %s", got)
	}
	r.cs.Close()
	r.stdin.Close()
	<-r.exited
	noTokenIn(t, []string{value}, map[string]string{"the serving log": r.stderr.String(), "secret set": out + errOut})
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Remote backends that sign in with OAuth, through the binary: mcp-mux
// login with a $BROWSER that follows the redirects (testdata/browser),
// serving before and after the login, a server that forgets the sign-in,
// logout, and two mcp-mux processes sharing one sign-in while its tokens
// expire and its refresh tokens rotate. Every process of a test gets the
// same state directory of its own, and the file store (never the user's
// keyring).

// signinEnv is the environment of a test's mcp-mux processes: a state
// directory of the test's own, files for secrets, and the browser
// stand-in, which records where it went in the returned file.
func signinEnv(t *testing.T) (env []string, browsed string) {
	dir := t.TempDir()
	browsed = filepath.Join(dir, "browsed")
	env = append(os.Environ(),
		"MCP_MUX_SECRET_STORE=file",
		"MCP_MUX_STATE_DIR="+filepath.Join(dir, "state"),
		"BROWSER="+testkit.BrowserBin(t)+" -record "+browsed+" %s",
	)
	return env, browsed
}

// muxRun runs mcp-mux with args and env to its end.
func muxRun(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return muxRunIn(t, env, "", args...)
}

// muxRunIn is muxRun with stdin.
func muxRunIn(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testkit.MuxBin(t), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mcp-mux %v still running after 60 s\nstderr:\n%s", args, errb.String())
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// serving is mcp-mux serving stdio with env, and a client that counts
// tools/list_changed.
type serving struct {
	*running
	toolsChanged chan struct{}
}

func serveWithEnv(t *testing.T, env []string, config string) *serving {
	t.Helper()
	cmd := exec.Command(testkit.MuxBin(t), "--config", config)
	cmd.Env = env
	w := startWireExec(t, cmd)
	s := &serving{toolsChanged: make(chan struct{}, 100)}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.toolsChanged <- struct{}{} },
	})
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(w.out), Writer: nopClose{w.stdin}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, w.stderr)
	}
	s.running = &running{wire: w, cs: cs}
	return s
}

type signinState struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	LastError string `json:"last_error"`
	SignIn    string `json:"sign_in"`
	Issuer    string `json:"issuer"`
}

func backendState(t *testing.T, cs *mcp.ClientSession, name string) signinState {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Backends []signinState `json:"backends"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil {
		t.Fatal(err)
	}
	for _, b := range doc.Backends {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no backend %s in mcp-mux://backends", name)
	return signinState{}
}

func listedTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func hasToolPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// callErr is the error a tools/call gets, "" if none. The tools called
// take a name (the TypeScript example's greet) or a text (echo).
func callErr(t *testing.T, cs *mcp.ClientSession, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := map[string]any{"text": "x"}
	if strings.HasSuffix(name, "greet") {
		args = map[string]any{"name": "x"}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error()
	}
	if res.IsError {
		return "tool error"
	}
	return ""
}

// storedTokens is every token value in the state directory's secret
// files: what no output may show.
func storedTokens(t *testing.T, env []string) []string {
	t.Helper()
	var dir string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "MCP_MUX_STATE_DIR="); ok {
			dir = v
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "secrets", "oauth*"))
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Token struct {
				AccessToken  string `json:"access_token"`
				RefreshToken string `json:"refresh_token"`
			} `json:"token"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("%s is not a sign-in record: %v", f, err)
		}
		for _, v := range []string{rec.Token.AccessToken, rec.Token.RefreshToken} {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

func noTokenIn(t *testing.T, tokens []string, outputs map[string]string) {
	t.Helper()
	for what, out := range outputs {
		for _, tok := range tokens {
			if strings.Contains(out, tok) {
				t.Errorf("a token is in %s:\n%s", what, out)
			}
		}
	}
}

// tsOAuthServer is the TypeScript SDK's example server run with --oauth
// (an MCP server on one port, its authorization server on another: all
// in memory, so a restart forgets every client and token).
type tsOAuthServer struct {
	t                *testing.T
	node, script     string
	mcpPort, asPort  int
	cmd              *exec.Cmd
	done             chan struct{}
	stdout           *testkit.SyncBuffer
	listening, other chan struct{}
}

func startTSOAuth(t *testing.T, ix *interop) *tsOAuthServer {
	s := &tsOAuthServer{t: t, node: ix.node, mcpPort: freePort(t), asPort: freePort(t),
		script: filepath.Join(ix.dir, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", "examples", "server", "simpleStreamableHttp.js")}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *tsOAuthServer) start() {
	s.t.Helper()
	cmd := exec.Command(s.node, s.script, "--oauth")
	cmd.Env = append(os.Environ(), "MCP_PORT="+strconv.Itoa(s.mcpPort), "MCP_AUTH_PORT="+strconv.Itoa(s.asPort))
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd, s.done, s.stdout = cmd, make(chan struct{}), &testkit.SyncBuffer{}
	both := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "listening on port") {
				if n++; n == 2 {
					close(both)
				}
			}
		}
		cmd.Wait()
		close(s.done)
	}()
	select {
	case <-both:
	case <-s.done:
		s.t.Fatal("the TypeScript OAuth example server exited before listening")
	case <-time.After(20 * time.Second):
		s.t.Fatal("the TypeScript OAuth example server did not listen within 20s")
	}
}

func (s *tsOAuthServer) stop() {
	s.cmd.Process.Kill()
	<-s.done
}

func (s *tsOAuthServer) url() string { return fmt.Sprintf("http://localhost:%d/mcp", s.mcpPort) }

// The whole life of a sign-in against the TypeScript SDK's own OAuth
// example: serving before it (the other backend serves, the remote one
// needs a login, and a call under its prefix names the command), mcp-mux
// login through a $BROWSER, the running session picking it up (its tools
// appear, with list_changed), a server restart that forgets the tokens
// (needs login again, not a crash loop), logout, and no token in any
// output.
func TestInteropOAuthSignInWhileServing(t *testing.T) {
	ix := interopSetup(t)
	ts := startTSOAuth(t, ix)
	env, browsed := signinEnv(t)
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\nlog_level = \"debug\"\n\n"+stdioBackend(t, "local")+
		fmt.Sprintf("[[backend]]\nname = \"ts\"\nurl = %q\n", ts.url()))

	r := serveWithEnv(t, env, cfg)
	names := listedTools(t, r.cs)
	if !hasToolPrefix(names, "local__") || hasToolPrefix(names, "ts__") {
		t.Errorf("before the login, tools/list = %v: want local's and none of ts", names)
	}
	testkit.Eventually(t, 10*time.Second, "ts needs a login", func() bool { return backendState(t, r.cs, "ts").State == "needs login" })
	if b := backendState(t, r.cs, "ts"); b.SignIn != "needs login" || !strings.Contains(b.LastError, "run `mcp-mux login ts`") {
		t.Errorf("ts before the login: %+v", b)
	}
	for _, name := range []string{"ts__greet", "ts__never_listed"} {
		if msg := callErr(t, r.cs, name); !strings.Contains(msg, "needs a sign-in: run `mcp-mux login ts` in a terminal") {
			t.Errorf("%s before the login: %q, want the command", name, msg)
		}
	}
	if msg := callErr(t, r.cs, "local__echo"); msg != "" {
		t.Errorf("local__echo: %s", msg)
	}
	if n := strings.Count(r.stderr.String(), "backend needs a sign-in"); n != 1 {
		t.Errorf("the log says %d times that ts needs a sign-in, want once:\n%s", n, r.stderr)
	}
	res, err := r.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil {
		t.Fatal(err)
	}
	initInstr := r.cs.InitializeResult().Instructions
	checkBefore, checkBeforeErr, code := muxRun(t, env, "check", "--connect", "--json", "--config", cfg)
	if code != 1 || !strings.Contains(checkBefore, `"state": "needs login"`) || !strings.Contains(checkBefore, `"sign_in": "needs login"`) {
		t.Errorf("check --connect --json before the login: exit %d\n%s", code, checkBefore)
	}

	// mcp-mux login, in another terminal.
	for len(r.toolsChanged) > 0 {
		<-r.toolsChanged
	}
	out, errOut, code := muxRun(t, env, "login", "ts", "--config", cfg)
	if code != 0 || strings.TrimSpace(out) != "signed in to ts" {
		t.Fatalf("login: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, fmt.Sprintf("http://localhost:%d/authorize?", ts.asPort)) {
		t.Errorf("login did not print the authorization URL:\n%s", errOut)
	}
	page, _ := os.ReadFile(browsed)
	if !strings.Contains(string(page), "\n200\n") || !strings.Contains(string(page), "Signed in to ts. You can close this tab.") {
		t.Errorf("the browser ended on:\n%s", page)
	}

	// The running session picks it up: no restart.
	select {
	case <-r.toolsChanged:
	case <-time.After(15 * time.Second):
		t.Fatalf("no tools/list_changed within 15s of the login\nstderr:\n%s", r.stderr)
	}
	testkit.Eventually(t, 10*time.Second, "ts's tools are listed", func() bool { return hasToolPrefix(listedTools(t, r.cs), "ts__greet") })
	if msg := callErr(t, r.cs, "ts__greet"); msg != "" {
		t.Errorf("ts__greet after the login: %s", msg)
	}
	if b := backendState(t, r.cs, "ts"); b.State != "ready" || b.SignIn != "signed in" || !strings.Contains(b.Issuer, fmt.Sprintf("localhost:%d", ts.asPort)) {
		t.Errorf("ts after the login: %+v", b)
	}
	checkAfter, checkAfterErr, code := muxRun(t, env, "check", "--connect", "--config", cfg)
	if code != 0 || !strings.Contains(checkAfter, "sign-in      signed in (by http://localhost:") {
		t.Errorf("check --connect after the login: exit %d\n%s", code, checkAfter)
	}
	tokens := storedTokens(t, env)
	if len(tokens) == 0 {
		t.Fatal("no token stored")
	}

	// The server restarts and forgets the sign-in: the backend needs a
	// login again, and stays so (no retries against the server).
	ts.stop()
	ts.start()
	if !testkit.Poll(30*time.Second, func() bool { return backendState(t, r.cs, "ts").State == "needs login" }) {
		t.Fatalf("ts does not need a login 30s after the server forgot it: %+v\nstderr:\n%s", backendState(t, r.cs, "ts"), r.stderr)
	}
	if hasToolPrefix(listedTools(t, r.cs), "ts__") {
		t.Error("ts's tools are still listed")
	}
	if msg := callErr(t, r.cs, "ts__greet"); !strings.Contains(msg, "run `mcp-mux login ts`") {
		t.Errorf("ts__greet after the server forgot: %q", msg)
	}

	out, errOut2, code := muxRun(t, env, "logout", "ts", "--config", cfg)
	if code != 0 || !strings.Contains(out, "signed out of ts") {
		t.Errorf("logout: exit %d\n%s%s", code, out, errOut2)
	}
	if left := storedTokens(t, env); len(left) != 0 {
		t.Errorf("logout left %d tokens", len(left))
	}
	out2, _, code := muxRun(t, env, "logout", "ts", "--config", cfg)
	if code != 0 || !strings.Contains(out2, "ts was not signed in") {
		t.Errorf("second logout: exit %d\n%s", code, out2)
	}

	r.cs.Close()
	r.stdin.Close()
	<-r.exited
	noTokenIn(t, tokens, map[string]string{
		"the serving log": r.stderr.String(), "login's stdout": out, "login's stderr": errOut,
		"check --json": checkBefore + checkBeforeErr, "check --connect": checkAfter + checkAfterErr,
		"logout": out + errOut2, "mcp-mux://backends": res.Contents[0].Text, "the instructions": initInstr,
	})
}

// Two mcp-mux processes (a desktop agent's and an IDE's) share one
// sign-in while its tokens expire every 2 s and each refresh rotates the
// refresh token: every call of both succeeds, the tokens are refreshed
// about once per lifetime (not once per process), and no refresh token is
// ever used twice (which would revoke the grant).
func TestSignInSharedByTwoProcessesThroughRotatingRefreshes(t *testing.T) {
	const ttl = 2 * time.Second
	srv := testkit.StartOAuthServer(t, "web", ttl)
	env, _ := signinEnv(t)
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\nlog_level = \"debug\"\n\n"+
		fmt.Sprintf("[[backend]]\nname = \"web\"\nurl = %q\nauth = \"oauth\"\n", srv.URL()))
	out, errOut, code := muxRun(t, env, "login", "web", "--config", cfg)
	if code != 0 {
		t.Fatalf("login: exit %d\n%s%s", code, out, errOut)
	}
	a, b := serveWithEnv(t, env, cfg), serveWithEnv(t, env, cfg)
	start := time.Now()
	// Paced calls, both processes at once (so that both find the token
	// expiring at the same moment), over four lifetimes.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	calls := 0
	for time.Since(start) < 4*ttl+ttl/2 {
		<-tick.C
		errs := make([]string, 2)
		var wg sync.WaitGroup
		for i, s := range []*serving{a, b} {
			wg.Go(func() { errs[i] = callErr(t, s.cs, "web__echo") })
		}
		wg.Wait()
		for i, s := range []*serving{a, b} {
			if errs[i] != "" {
				t.Fatalf("call %d of process %d failed after %s: %s\nstderr:\n%s", calls, i, time.Since(start), errs[i], s.stderr)
			}
		}
		calls += 2
	}
	refreshes := srv.TokenRequests("refresh_token")
	t.Logf("%d calls, %d refreshes in %s", calls, refreshes, time.Since(start).Round(time.Millisecond))
	if refreshes < 3 || refreshes > 6 {
		t.Errorf("%d refreshes in %s with tokens of %s for two processes, want one per lifetime (3 to 6)", refreshes, time.Since(start), ttl)
	}
	if srv.Revoked() {
		t.Error("a refresh token was used twice: the grant was revoked")
	}
	for i, s := range []*serving{a, b} {
		if st := backendState(t, s.cs, "web"); st.State != "ready" {
			t.Errorf("process %d: %+v", i, st)
		}
		s.cs.Close()
		s.stdin.Close()
		<-s.exited
	}
	noTokenIn(t, srv.Issued(), map[string]string{"process 0's log": a.stderr.String(), "process 1's log": b.stderr.String(), "login": out + errOut})
}

// A secret kept in the store with mcp-mux secret set (read from stdin,
// never argv) is what ${secret:NAME} in a headers value sends; one that is
// not stored is reported by check with FILE:LINE and the command that
// stores it; the value is in no output.
func TestSecretSetFromStdinIsUsedByName(t *testing.T) {
	const value = "r1ght-s3cret-from-stdin"
	env, _ := signinEnv(t)
	out, errOut, code := muxRunIn(t, env, value+"\n", "secret", "set", "WEB_TOKEN")
	if code != 0 || !strings.Contains(out, "stored secret WEB_TOKEN in ") || !strings.Contains(out, "${secret:WEB_TOKEN}") {
		t.Fatalf("secret set: exit %d\n%s%s", code, out, errOut)
	}
	argvOut, argvErr, code := muxRunIn(t, env, "", "secret", "set", "OTHER", value)
	if code == 0 || !strings.Contains(argvErr, "takes one NAME, got 2 arguments") {
		t.Errorf("secret set with a value on the command line: exit %d\n%s%s", code, argvOut, argvErr)
	}
	fx := testkit.StartRemoteFixture(t, "-http", "-name", "web", "-require-token", value)
	cfg := testkit.WriteRawConfig(t, "[mux]\nshutdown_grace = \"1s\"\nlog_level = \"debug\"\n\n"+
		remoteBackend("web", fx, `headers = { Authorization = "Bearer ${secret:WEB_TOKEN}" }`))
	r := serveWithEnv(t, env, cfg)
	if msg := callErr(t, r.cs, "web__echo"); msg != "" {
		t.Errorf("web__echo with the stored secret: %s\n%s", msg, r.stderr)
	}
	bad := testkit.WriteRawConfig(t, "[[backend]]\nname = \"web\"\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer ${secret:MISSING}\" }\n")
	checkOut, checkErr, code := muxRun(t, env, "check", "--json", "--config", bad)
	if code != 1 || !strings.Contains(checkOut, `"line": 4`) || !strings.Contains(checkOut, "${secret:MISSING} is not stored (store it with: mcp-mux secret set MISSING)") {
		t.Errorf("check --json of a missing secret: exit %d\n%s%s", code, checkOut, checkErr)
	}
	r.cs.Close()
	r.stdin.Close()
	<-r.exited
	noTokenIn(t, []string{value}, map[string]string{"secret set": out + errOut, "secret set with argv": argvOut + argvErr,
		"the serving log": r.stderr.String(), "check --json": checkOut + checkErr})
}

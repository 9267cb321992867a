package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Protocol eras with real servers from npm: what an agent of the current
// era (2026-07-28) gets through mcp-mux from servers of the handshake era.

// TestInteropCurrentEraAgentGivesItsRootsToServerFilesystem:
// server-filesystem started without directories asks for the client's
// roots as soon as it is initialized, outside any request; an agent of
// the current era gives roots only in a request's input round. Through
// mcp-mux the agent lists and reads the files under its root, and nothing
// outside it.
func TestInteropCurrentEraAgentGivesItsRootsToServerFilesystem(t *testing.T) {
	ix := interopSetup(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "project")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("hello from the root"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(outside, []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := ix.muxConfig(t, ix.backendTOML(t, serverFilesystem, ""))

	c := mcp.NewClient(&mcp.Implementation{Name: "current-era-agent", Version: "1"}, nil)
	path := filepath.ToSlash(root)
	if !strings.HasPrefix(path, "/") {
		path = "/" + path // file:///C:/... on Windows
	}
	c.AddRoots(&mcp.Root{URI: (&url.URL{Scheme: "file", Path: path}).String(), Name: "project"})
	cmd := exec.Command(testkit.MuxBin(t), "--config", cfg)
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	ctx := testkit.CtxT(t)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{}) // probes: the current era
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("the agent speaks %s, want the current era", v)
	}
	call := func(tool string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__" + tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v\n%s", tool, err, stderr)
		}
		var sb strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				sb.WriteString(tc.Text)
			}
		}
		return sb.String(), res.IsError
	}
	if got, isErr := call("list_directory", map[string]any{"path": root}); isErr || !strings.Contains(got, "[FILE] notes.txt") {
		t.Errorf("list_directory of the root: %q (error %v)\n%s", got, isErr, stderr)
	}
	if got, isErr := call("read_text_file", map[string]any{"path": filepath.Join(root, "notes.txt")}); isErr || got != "hello from the root" {
		t.Errorf("read_text_file under the root: %q (error %v)", got, isErr)
	}
	if got, isErr := call("read_text_file", map[string]any{"path": outside}); !isErr || strings.Contains(got, "not yours") {
		t.Errorf("read_text_file outside the root: %q (error %v), want it refused", got, isErr)
	}
	if got, _ := call("list_allowed_directories", map[string]any{}); !strings.Contains(got, root) {
		t.Errorf("allowed directories %q, want the agent's root %s", got, root)
	}
}

// TestInteropInputRequestsReachAClientOfEitherEra: server-everything (the
// handshake era) asks the client for a sampling, an elicitation and its
// roots inside tools/call. The TypeScript SDK's client of each era gets,
// through mcp-mux, the tool texts the handshake-era client gets from the
// bare server: the handshake era by requests, the current era (v2 client,
// 2026-07-28) in the input rounds mcp-mux makes of them.
func TestInteropInputRequestsReachAClientOfEitherEra(t *testing.T) {
	ix := interopSetup(t)
	bare, mux := ix.both(t, "current-era-input", ix.bare(t, serverEverything), ix.mux(t, serverEverything))
	mustPass(t, bare, mux)
	want := canonicalTexts(bare.Observed["handshake"])
	for _, era := range []string{"handshake", "current"} {
		if got := canonicalTexts(mux.Observed[era]); got != want {
			t.Errorf("%s era through mcp-mux: %s\nbare (handshake era): %s", era, got, want)
		}
	}
}

// canonicalTexts is the tools' texts with the JSON that server-everything
// echoes ("Raw result: {...}") in one key order: the answer passes through
// the go-sdk's types, whose maps order an elicitation's content by key
// (JSON objects have no order).
func canonicalTexts(v any) string {
	texts, _ := v.(map[string]any)
	var sb strings.Builder
	for _, k := range []string{"sampling", "elicitation", "roots"} {
		text, _ := texts[k].(string)
		if head, raw, ok := strings.Cut(text, "Raw result: "); ok {
			var obj any
			if json.Unmarshal([]byte(raw), &obj) == nil {
				canon, _ := json.Marshal(obj)
				text = head + "Raw result: " + string(canon)
			}
		}
		fmt.Fprintf(&sb, "%s: %q\n", k, text)
	}
	return sb.String()
}

// TestInteropMCPAppsThroughMux: an MCP Apps server from npm
// (server-basic-vanillajs, the ext-apps example) listed and read by an
// agent of each era that declares the UI extension: through mcp-mux the
// tool points at the same ui:// resource as directly, and that resource
// reads the same.
func TestInteropMCPAppsThroughMux(t *testing.T) {
	ix := interopSetup(t)
	app := refServer{backend: "app", script: "server-basic-vanillajs/dist/index.js", args: []string{"--stdio"}}
	cfg := ix.muxConfig(t, ix.backendTOML(t, app, ""))
	for _, era := range []struct{ name, version string }{{"handshake", "2025-11-25"}, {"current", ""}} {
		t.Run(era.name, func(t *testing.T) {
			look := func(cmd *exec.Cmd, prefix string) (uris []string, reads []string) {
				t.Helper()
				caps := &mcp.ClientCapabilities{}
				caps.AddExtension("io.modelcontextprotocol/ui", map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app"}})
				c := mcp.NewClient(&mcp.Implementation{Name: "apps-agent", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
				ctx := testkit.CtxT(t)
				cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: era.version})
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				defer cs.Close()
				for tool, err := range cs.Tools(ctx, nil) {
					if err != nil {
						t.Fatal(err)
					}
					ui, _ := tool.Meta["ui"].(map[string]any)
					uri, _ := ui["resourceUri"].(string)
					if uri == "" {
						continue
					}
					uris = append(uris, strings.TrimPrefix(tool.Name, prefix)+" -> "+uri)
					res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
					if err != nil {
						t.Fatalf("reading %s: %v", uri, err)
					}
					data, _ := json.Marshal(res.Contents)
					reads = append(reads, string(data))
				}
				return uris, reads
			}
			wantURIs, wantReads := look(exec.Command(ix.node, ix.script(app), "--stdio"), "")
			if len(wantURIs) == 0 {
				t.Fatal("directly, no tool points at a ui:// resource")
			}
			gotURIs, gotReads := look(exec.Command(testkit.MuxBin(t), "--config", cfg), "app__")
			if fmt.Sprint(gotURIs) != fmt.Sprint(wantURIs) {
				t.Errorf("tools' UI resources through mcp-mux %v, directly %v", gotURIs, wantURIs)
			}
			if fmt.Sprint(gotReads) != fmt.Sprint(wantReads) {
				t.Errorf("UI resources read through mcp-mux differ from directly:\n%.300s\n%.300s", gotReads, wantReads)
			}
		})
	}
}

// TestInteropTwoMCPAppsWithTheSameUIResource: server-basic-vanillajs and
// server-basic-react (2.0.3) both point their tool at
// ui://get-time/mcp-app.html. Through mcp-mux each tool's UI resource is
// its own server's, byte for byte: the later backend's URI gets a form of
// its own. Before, the react tool showed the vanilla app. check --connect
// says so and passes.
func TestInteropTwoMCPAppsWithTheSameUIResource(t *testing.T) {
	ix := interopSetup(t)
	vanilla := refServer{backend: "vanilla", script: "server-basic-vanillajs/dist/index.js", args: []string{"--stdio"}}
	react := refServer{backend: "react", script: "server-basic-react/dist/index.js", args: []string{"--stdio"}}
	cfg := ix.muxConfig(t, ix.backendTOML(t, vanilla, ""), ix.backendTOML(t, react, ""))

	// uiOf lists the tools that point at a UI resource, with the resource's
	// contents as read, by tool name without prefix.
	uiOf := func(cmd *exec.Cmd, prefix string) (uris, reads map[string]string) {
		t.Helper()
		caps := &mcp.ClientCapabilities{}
		caps.AddExtension("io.modelcontextprotocol/ui", map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app"}})
		c := mcp.NewClient(&mcp.Implementation{Name: "apps-agent", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
		ctx := testkit.CtxT(t)
		cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer cs.Close()
		uris, reads = map[string]string{}, map[string]string{}
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(tool.Name, prefix) {
				continue
			}
			ui, _ := tool.Meta["ui"].(map[string]any)
			uri, _ := ui["resourceUri"].(string)
			if uri == "" {
				continue
			}
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatalf("reading %s: %v", uri, err)
			}
			var sb strings.Builder
			for _, c := range res.Contents {
				sb.WriteString(c.Text)
				sb.Write(c.Blob)
			}
			name := strings.TrimPrefix(tool.Name, prefix)
			uris[name], reads[name] = uri, sb.String()
		}
		return uris, reads
	}
	through := map[string]map[string]string{}
	for _, s := range []refServer{vanilla, react} {
		directURIs, direct := uiOf(exec.Command(ix.node, ix.script(s), "--stdio"), "")
		if len(direct) == 0 {
			t.Fatalf("%s: no tool points at a UI resource", s.backend)
		}
		uris, got := uiOf(exec.Command(testkit.MuxBin(t), "--config", cfg), s.backend+"__")
		through[s.backend] = uris
		for name, want := range direct {
			if got[name] != want {
				t.Errorf("%s's tool %s: its UI through mcp-mux (%s, %d bytes) is not its server's (%s, %d bytes)", s.backend, name, uris[name], len(got[name]), directURIs[name], len(want))
			}
		}
	}
	for name, u := range through["react"] {
		if through["vanilla"][name] == u {
			t.Errorf("both apps' tool %s point at %s through mcp-mux", name, u)
		}
	}

	out, code := runCheck(t, "--connect", "--config", cfg)
	if code != 0 || !strings.Contains(out, "react's is ui://react__get-time/mcp-app.html through mcp-mux (nothing hidden)") {
		t.Errorf("check --connect: exit %d, want 0 and the fixed collision named:\n%s", code, out)
	}
}

package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/backends/secrets"
)

// useSecretFiles points the secret store at a directory of the test's own
// (files only: never the user's keyring).
func useSecretFiles(t *testing.T) {
	t.Setenv("MCP_MUX_SECRET_STORE", "file")
	t.Setenv("MCP_MUX_STATE_DIR", filepath.Join(t.TempDir(), "state"))
}

func TestOAuthKeysAreDecodedAndTheClientExpanded(t *testing.T) {
	useSecretFiles(t)
	if _, err := secrets.Set("HOSTED_SECRET", "cl13nt-s3cr3t"); err != nil {
		t.Fatal(err)
	}
	src := `[[backend]]
name = "hosted"
url = "https://mcp.example.com/mcp"
auth = "oauth"
oauth_client_id = "${CLIENT_ID}"
oauth_client_secret = "${secret:HOSTED_SECRET}"
oauth_scopes = ["read", "write"]
oauth_callback_port = 8976
oauth_client_metadata_url = "https://example.com/mcp-mux.json"
`
	cfg, ps := parseString(t, src, envOf(map[string]string{"CLIENT_ID": "client-1"}))
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	spec := cfg.Backends[0].Spec()
	if spec.Auth != "oauth" || spec.OAuth.ClientID != "client-1" || spec.OAuth.ClientSecret != "cl13nt-s3cr3t" ||
		strings.Join(spec.OAuth.Scopes, " ") != "read write" || spec.OAuth.CallbackPort != 8976 ||
		spec.OAuth.ClientMetadataURL != "https://example.com/mcp-mux.json" {
		t.Errorf("spec: %+v", spec.OAuth)
	}
}

func TestOAuthKeyMistakes(t *testing.T) {
	useSecretFiles(t)
	const secret = "n0t-t0-b3-sh0wn"
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"bad auth", `url = "http://h/mcp"` + "\n" + `auth = "basic"`,
			[]string{`test.toml:4: backend #1 (web).auth: must be "oauth"`}},
		{"auth with command", `command = "go"` + "\n" + `auth = "oauth"`,
			[]string{"auth: applies only to a remote backend (url)"}},
		{"two tokens", `url = "http://h/mcp"` + "\n" + `auth = "oauth"` + "\n" + `headers = { Authorization = "Bearer ` + secret + `" }`,
			[]string{"headers.Authorization: an Authorization header and an OAuth sign-in are two tokens for one server"}},
		{"sse", `url = "http://h/sse"` + "\n" + `transport = "sse"` + "\n" + `auth = "oauth"`,
			[]string{"transport: an OAuth sign-in needs the Streamable HTTP transport"}},
		{"secret without id", `url = "http://h/mcp"` + "\n" + `oauth_client_secret = "` + secret + `"`,
			[]string{"test.toml:4: backend #1 (web).oauth_client_secret: a client secret without oauth_client_id"}},
		{"unset secret variable", `url = "http://h/mcp"` + "\n" + `oauth_client_id = "c"` + "\n" + `oauth_client_secret = "${NOT_SET_ANYWHERE}"`,
			[]string{"test.toml:5: backend #1 (web).oauth_client_secret: ${NOT_SET_ANYWHERE} is not set"}},
		{"metadata url", `url = "http://h/mcp"` + "\n" + `oauth_client_metadata_url = "http://example.com/c.json"`,
			[]string{"oauth_client_metadata_url: must be an https:// URL with a path"}},
		{"scope", `url = "http://h/mcp"` + "\n" + `oauth_scopes = ["a b"]`,
			[]string{`oauth_scopes #1: invalid scope "a b"`}},
		{"port", `url = "http://h/mcp"` + "\n" + `oauth_callback_port = 70000`,
			[]string{"test.toml:4: backend #1 (web).oauth_callback_port: must be a port, 1 to 65535"}},
		{"unknown key", `url = "http://h/mcp"` + "\n" + `oauth_client = "x"`,
			[]string{`oauth_client`}},
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

// ${secret:NAME} in env and headers values is the value stored with
// `mcp-mux secret set NAME`; one not stored is a problem at its line that
// says how to store it, and a value is never shown.
func TestSecretReferencesExpandFromTheStore(t *testing.T) {
	useSecretFiles(t)
	const value = "ghp_v4lu3-fr0m-th3-st0r3"
	if _, err := secrets.Set("GITHUB", value); err != nil {
		t.Fatal(err)
	}
	src := `[[backend]]
name = "gh"
command = "go"
env = { GITHUB_TOKEN = "${secret:GITHUB}", OTHER = "x-${secret:GITHUB}" }

[[backend]]
name = "web"
url = "http://h/mcp"
headers = { Authorization = "Bearer ${secret:GITHUB}" }
`
	cfg, ps := parseString(t, src, noEnv)
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	if cfg.Backends[0].Env["GITHUB_TOKEN"] != value || cfg.Backends[0].Env["OTHER"] != "x-"+value || cfg.Backends[1].Headers["Authorization"] != "Bearer "+value {
		t.Error("${secret:GITHUB} was not expanded")
	}

	bad := `[[backend]]
name = "gh"
command = "go"
env = { A = "${secret:MISSING}", B = "${secret:bad name}", C = "${secret:ghp_Ab12Cd34Ef56Gh78}" }
args = ["${secret:GITHUB}"]
`
	_, ps = parseString(t, bad, noEnv)
	all := problemStrings(ps)
	for _, want := range []string{
		"test.toml:4: backend #1 (gh).env.A: ${secret:MISSING} is not stored (store it with: mcp-mux secret set MISSING)",
		`test.toml:4: backend #1 (gh).env.B: invalid "${secret:...}"`,
		`test.toml:4: backend #1 (gh).env.C: a "${secret:...}" names a secret that is not stored; the name is not shown`,
		`test.toml:5: backend #1 (gh).args #1: "${secret:...}" is expanded only in env and headers values`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:%s", want, all)
		}
	}
	if strings.Contains(all, value) || strings.Contains(all, "ghp_Ab12") {
		t.Errorf("a secret is shown:%s", all)
	}
}

// A backend that serving marks Broken for a ${secret:NAME} that is not
// stored names it, so that mcp-mux can start it once it is stored; a
// disabled backend, not broken by one, names none.
func TestParseForServingNamesTheSecretsABackendLacks(t *testing.T) {
	useSecretFiles(t)
	if _, err := secrets.Set("STORED", "v"); err != nil {
		t.Fatal(err)
	}
	src := `[[backend]]
name = "gh"
command = "go"
env = { A = "${secret:MISSING}", B = "${secret:STORED}", C = "${secret:MISSING}-${secret:OTHER}" }

[[backend]]
name = "web"
url = "http://h/mcp"
headers = { Authorization = "Bearer ${secret:STORED}" }

[[backend]]
name = "off"
command = "go"
disabled = true
env = { A = "${secret:NEVER}" }
`
	cfg, err := ParseForServing("test.toml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := [][]string{}
	for _, b := range cfg.Backends {
		got = append(got, b.MissingSecrets)
	}
	if fmt.Sprint(got) != "[[MISSING OTHER] [] []]" {
		t.Errorf("MissingSecrets: %q, want [[MISSING OTHER] [] []]", got)
	}
}

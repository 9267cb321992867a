package config

import (
	"slices"
	"strings"
	"testing"
)

// The profiles the [[token]] tests name.
const tokenProfiles = "[[backend]]\nname = \"a\"\ncommand = \"go\"\n[profile.readonly]\nbackends = [\"a\"]\n[profile.ops]\n"

func TestTokensAreRead(t *testing.T) {
	src := tokenProfiles + "[[token]]\nname = \"alice\"\nvalue = \"${ALICE_TOKEN}\"\n" +
		"[[token]]\nname = \"bob\"\nvalue = \"${BOB_TOKEN}\"\nprofiles = [\"readonly\", \"ops\"]\n"
	cfg, ps := parseString(t, src, envOf(map[string]string{"ALICE_TOKEN": "alice-secret-1", "BOB_TOKEN": "bob-secret-2"}))
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	want := []Token{
		{Name: "alice", Value: "alice-secret-1", Line: 7},
		{Name: "bob", Value: "bob-secret-2", Profiles: []string{"readonly", "ops"}, Line: 10},
	}
	if !slices.EqualFunc(cfg.Tokens, want, func(a, b Token) bool {
		return a.Name == b.Name && a.Value == b.Value && slices.Equal(a.Profiles, b.Profiles) && a.Line == b.Line
	}) {
		t.Errorf("tokens: %+v, want %+v", cfg.Tokens, want)
	}
}

// Every mistake in a [[token]] is named at its FILE:LINE, and a token
// value is never shown.
func TestTokenMistakes(t *testing.T) {
	env := envOf(map[string]string{"SET": "a-long-token-value", "OTHER": "another-token-value", "EMPTY": "", "HTTP": "the-shared-key"})
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"unset variable", "[[token]]\nname = \"bob\"\nvalue = \"${BOB_UNSET}\"\n",
			[]string{"test.toml:9: token #1 (bob).value: ${BOB_UNSET} is not set: set it in the environment mcp-mux is started with"}},
		{"variable set to nothing", "[[token]]\nname = \"bob\"\nvalue = \"${EMPTY}\"\n",
			[]string{"test.toml:9: token #1 (bob).value: is empty: ${EMPTY} is empty in the environment mcp-mux is started with"}},
		{"empty value", "[[token]]\nname = \"bob\"\nvalue = \"\"\n",
			[]string{"test.toml:9: token #1 (bob).value: is empty"}},
		{"no value", "[[token]]\nname = \"bob\"\n",
			[]string{"test.toml:7: token #1 (bob).value: missing: every [[token]] needs a value"}},
		{"no name", "[[token]]\nvalue = \"${SET}\"\n",
			[]string{"test.toml:7: token #1.name: missing: every [[token]] needs a name"}},
		{"invalid name", "[[token]]\nname = \"bob smith\"\nvalue = \"${SET}\"\n",
			[]string{"test.toml:8: token #1.name: invalid name \"bob smith\": use only letters, digits, \"_\" and \"-\""}},
		{"duplicate name", "[[token]]\nname = \"bob\"\nvalue = \"${SET}\"\n[[token]]\nname = \"bob\"\nvalue = \"${OTHER}\"\n",
			[]string{"test.toml:11: token #2 (bob).name: duplicate token name \"bob\" (already used by token #1 at line 7)"}},
		{"the same value twice", "[[token]]\nname = \"bob\"\nvalue = \"${SET}\"\n[[token]]\nname = \"carol\"\nvalue = \"${SET}\"\n",
			[]string{"test.toml:12: token #2 (carol).value: the same value as token \"bob\" (line 7)"}},
		{"http_token's value", "[mux]\nhttp_token = \"${HTTP}\"\n[[token]]\nname = \"bob\"\nvalue = \"${HTTP}\"\n",
			[]string{"token #1 (bob).value: the same value as [mux] http_token"}},
		{"unknown profile", "[[token]]\nname = \"bob\"\nvalue = \"${SET}\"\nprofiles = [\"readonyl\"]\n",
			[]string{"test.toml:10: token #1 (bob).profiles #1: unknown profile \"readonyl\"; did you mean \"readonly\"?"}},
		{"unknown profile, nothing close", "[[token]]\nname = \"bob\"\nvalue = \"${SET}\"\nprofiles = [\"zzz\"]\n",
			[]string{"token #1 (bob).profiles #1: unknown profile \"zzz\"; the profiles are: readonly, ops"}},
		{"no profile at all", "[[token]]\nname = \"bob\"\nvalue = \"${SET}\"\nprofiles = []\n",
			[]string{"test.toml:10: token #1 (bob).profiles: empty: the token could use no view; name its profiles, or remove the key for every view"}},
		{"unknown key", "[[token]]\nname = \"bob\"\nvalue = \"${SET}\"\nprofile = [\"ops\"]\n",
			[]string{"test.toml:10: token #1 (bob).profile: unknown key; did you mean \"profiles\"?"}},
		{"not an array of tables", "[token]\nname = \"bob\"\n",
			[]string{"token: must be an array of tables: write [[token]] (double brackets) for each token, not [token]"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := tokenProfiles + tt.src
			if strings.HasPrefix(tt.src, "[mux]") {
				src = tt.src[:strings.Index(tt.src, "[[token]]")] + tokenProfiles + tt.src[strings.Index(tt.src, "[[token]]"):]
			}
			_, ps := parseString(t, src, env)
			got := problemStrings(ps)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("want %q in:%s", w, got)
				}
			}
			for _, secret := range []string{"a-long-token-value", "another-token-value", "the-shared-key"} {
				if strings.Contains(got, secret) {
					t.Errorf("a token's value is shown:%s", got)
				}
			}
		})
	}
}

// Serving, a [[token]] that is not usable stops serve --http as an unusable
// http_token does: never a server that takes no token, or fewer.
func TestTokenNotUsableRefusesToServeHTTP(t *testing.T) {
	src := tokenProfiles + "[[token]]\nname = \"bob\"\nvalue = \"${BOB_UNSET}\"\n"
	cfg, err := ParseForServing("test.toml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.ServeHTTPCheck("127.0.0.1:8931")
	if err == nil || !strings.Contains(err.Error(), "test.toml:9: token #1 (bob).value: ${BOB_UNSET} is not set") {
		t.Fatalf("ServeHTTPCheck: %v", err)
	}
	// The metrics of a stdio mcp-mux take the same keys.
	cfg.Mux.MetricsListen = "127.0.0.1:9464"
	if err := cfg.ServeMetricsCheck(); err == nil {
		t.Fatal("ServeMetricsCheck served with a [[token]] that is not usable")
	}
}

// A [[token]] guards a non-loopback address as http_token does.
func TestTokensGuardANonLoopbackAddress(t *testing.T) {
	src := tokenProfiles + "[[token]]\nname = \"bob\"\nvalue = \"${SET}\"\n"
	cfg, ps := parseString(t, src, envOf(map[string]string{"SET": "a-long-token-value"}))
	if ps != nil {
		t.Fatalf("problems:%s", problemStrings(ps))
	}
	if err := cfg.ServeHTTPCheck("0.0.0.0:8931"); err != nil {
		t.Fatalf("ServeHTTPCheck: %v", err)
	}
	_, ps = parseString(t, "[mux]\nhttp_listen = \"0.0.0.0:8931\"\n"+src, envOf(map[string]string{"SET": "a-long-token-value"}))
	if ps != nil {
		t.Fatalf("http_listen on 0.0.0.0 with a [[token]]:%s", problemStrings(ps))
	}
}

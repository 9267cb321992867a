package catalogmem

import (
	"regexp"
	"testing"
)

func sampleIdentity() Identity {
	return Identity{
		Name:       "gh",
		Command:    "github-mcp",
		Args:       []string{"stdio", "--read-only"},
		Cwd:        "/srv",
		InheritEnv: []string{"HOME", "LANG"},
		Env:        map[string]string{"GITHUB_TOKEN": "t0ken", "LOG": "debug", "A": "1"},
		Headers:    map[string]string{"Authorization": "Bearer b", "X-Org": "acme"},
	}
}

func TestKeyIsStableHex(t *testing.T) {
	key := sampleIdentity().Key()
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(key) {
		t.Fatalf("Key() = %q, want 64 hex digits", key)
	}
	if again := sampleIdentity().Key(); again != key {
		t.Errorf("Key() of an equal identity = %s, want %s", again, key)
	}
}

func TestKeyIgnoresOrderWhereNothingDependsOnIt(t *testing.T) {
	want := sampleIdentity().Key()

	// Maps built in another order, many times: Go's map iteration order
	// changes from one range to the next, so a key that depended on it
	// would differ in some of these.
	for range 50 {
		id := sampleIdentity()
		id.Env = map[string]string{}
		for _, k := range []string{"LOG", "A", "GITHUB_TOKEN"} {
			id.Env[k] = sampleIdentity().Env[k]
		}
		id.Headers = map[string]string{"X-Org": "acme", "Authorization": "Bearer b"}
		if got := id.Key(); got != want {
			t.Fatalf("Key() with maps filled in another order = %s, want %s", got, want)
		}
	}

	id := sampleIdentity()
	id.InheritEnv = []string{"LANG", "HOME"}
	if got := id.Key(); got != want {
		t.Errorf("Key() with InheritEnv reordered = %s, want %s", got, want)
	}

	empty, nilled := Identity{Name: "x", Args: []string{}, Env: map[string]string{}}, Identity{Name: "x"}
	if empty.Key() != nilled.Key() {
		t.Errorf("empty and nil Args/Env give different keys")
	}
}

func TestKeyChangesWithAnyField(t *testing.T) {
	base := sampleIdentity().Key()
	changes := map[string]func(*Identity){
		"name":              func(id *Identity) { id.Name = "gh2" },
		"command":           func(id *Identity) { id.Command = "github-mcp2" },
		"url":               func(id *Identity) { id.URL = "https://example.com/mcp" },
		"cwd":               func(id *Identity) { id.Cwd = "/tmp" },
		"protocol":          func(id *Identity) { id.Protocol = "auto" },
		"transport":         func(id *Identity) { id.Transport = "sse" },
		"args order":        func(id *Identity) { id.Args = []string{"--read-only", "stdio"} },
		"one more arg":      func(id *Identity) { id.Args = append(id.Args, "") },
		"inherit env":       func(id *Identity) { id.InheritEnv = []string{"HOME"} },
		"one env value":     func(id *Identity) { id.Env["GITHUB_TOKEN"] = "t0ken2" },
		"one env name":      func(id *Identity) { delete(id.Env, "A"); id.Env["B"] = "1" },
		"one header value":  func(id *Identity) { id.Headers["Authorization"] = "Bearer c" },
		"env moved to head": func(id *Identity) { delete(id.Env, "A"); id.Headers["A"] = "1" },
		// Run together, these would write the same bytes as the base.
		"arg moved into command": func(id *Identity) { id.Command = "github-mcp\x00stdio"; id.Args = id.Args[1:] },
	}
	seen := map[string]string{base: "base"}
	for name, change := range changes {
		id := sampleIdentity()
		change(&id)
		key := id.Key()
		if other, dup := seen[key]; dup {
			t.Errorf("changing %s gives the same key as %s", name, other)
		}
		seen[key] = name
	}
}

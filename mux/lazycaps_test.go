package mux

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A backend may list other tools to a client with other capabilities (the
// fixture's -client-requests lists gated_* per capability, as
// server-everything does): a remembered catalog is served only to an agent
// whose capabilities it was taken with; another gets what the backend
// lists to it, and each is remembered.
func TestARememberedCatalogIsServedOnlyForTheCapabilitiesItWasTakenWith(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalogs")
	cfg := testConfig(fixture(t, "ev", "-client-requests"))
	rootsOnly := &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}}
	all := &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}, Sampling: &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
	wantRoots, wantAll := directTools(t, rootsOnly), directTools(t, all)
	if slices.Equal(wantRoots, wantAll) {
		t.Fatalf("the fixture lists the same tools to both clients: %v", wantAll)
	}

	// session runs one mcp-mux on the memory, one agent with caps, and
	// returns what its first list held and whether that started ev.
	session := func(caps *mcp.ClientCapabilities) (tools []string, started bool) {
		t.Helper()
		m := runWithMemory(t, cfg, path)
		defer m.Close()
		cs := connectAgent(t, m, agent(&mcp.ClientOptions{Capabilities: caps}))
		tools = sortedTools(t, cs, "ev__")
		state, _ := stateOf(m, "ev")
		if state != stateRemembered {
			// It ran: wait until it is remembered, as an agent's
			// session would have.
			testkit.Eventually(t, 20*time.Second, "ev ready", m.members()[0].serving)
		}
		return tools, state != stateRemembered
	}

	if got, _ := session(rootsOnly); !slices.Equal(got, wantRoots) {
		t.Fatalf("first run, roots only:\n got %v\nwant %v", got, wantRoots)
	}
	got, started := session(all)
	if !slices.Equal(got, wantAll) {
		t.Fatalf("an agent with sampling and elicitation after one without got the other's remembered catalog:\n got %v\nwant %v (directly)", got, wantAll)
	}
	if !started {
		t.Errorf("ev was not started for capabilities it was never seen with")
	}
	// Each set of capabilities seen is remembered: the first list is at
	// once, from memory, for both.
	for _, c := range []struct {
		name string
		caps *mcp.ClientCapabilities
		want []string
	}{{"all", all, wantAll}, {"roots only", rootsOnly, wantRoots}} {
		got, started := session(c.caps)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s, seen before:\n got %v\nwant %v", c.name, got, c.want)
		}
		if started {
			t.Errorf("%s, seen before: ev started; want its catalog from memory", c.name)
		}
	}
}

package mux

import (
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// A backend of the handshake era that asks for roots outside any request
// (as server-filesystem started without directories does when it is
// initialized) while the agent speaks the current era, which gives roots
// only in a request's input round (roots.go).

// TestRootsAskedAtStartReachABackendFromACurrentEraAgent: the backend's
// roots/list waits; the agent's first call to it starts with an input
// round that asks the agent for its roots, which answer the backend.
func TestRootsAskedAtStartReachABackendFromACurrentEraAgent(t *testing.T) {
	m := startMux(t, fixture(t, "fs", "-client-requests", "-roots-at-start"))
	a, c := newEraAgent(t)
	a.cs = connectWith(t, m, c, currentEraV)
	var ci clientInfo
	testkit.Eventually(t, 10*time.Second, "the backend to have the agent's roots", func() bool {
		ci = fixtureClientInfo(t, a.cs, "fs__client_info")
		return ci.Roots == eraRoot
	})
	if ci.RootsListChanged != 0 {
		t.Errorf("roots_list_changed %d: the waiting roots/list was answered, none was needed", ci.RootsListChanged)
	}
}

// TestRootsLearnedLateAreAnnouncedToABackendThatGaveUp: when the backend's
// roots/list gave up waiting before the agent's first call, the backend is
// sent roots/list_changed once mux has the roots, and asks again.
func TestRootsLearnedLateAreAnnouncedToABackendThatGaveUp(t *testing.T) {
	m := New(testConfig(fixture(t, "fs", "-client-requests", "-roots-at-start")), testLogger(t), "test")
	m.roots.wait = 50 * time.Millisecond
	m.Start()
	t.Cleanup(m.Close)
	a, c := newEraAgent(t)
	a.cs = connectWith(t, m, c, currentEraV)
	// The backend asked at its start and gave up: it kept the error.
	testkit.Eventually(t, 10*time.Second, "the backend's roots/list to give up", func() bool {
		return m.roots.gaveUp(m.members()[0])
	})
	var ci clientInfo
	testkit.Eventually(t, 10*time.Second, "the backend to have the agent's roots", func() bool {
		ci = fixtureClientInfo(t, a.cs, "fs__client_info")
		return ci.Roots == eraRoot
	})
	if ci.RootsListChanged != 1 {
		t.Errorf("roots_list_changed %d, want 1", ci.RootsListChanged)
	}
}

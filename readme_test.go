package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Wherever the README passes mcp-mux's command line through another tool
// (a client's "args", claude mcp add … --, the MCP Inspector), it writes
// -c FILE: the Inspector takes --config as its own and reads FILE itself.
func TestREADMEPassesTheConfigAsDashC(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	passedOn := regexp.MustCompile(`"args":\s*\[|mcp add .*--\s|inspector .*mcp-mux`)
	for i, line := range strings.Split(string(data), "\n") {
		if !passedOn.MatchString(line) {
			continue
		}
		// The README may say what --config does to the Inspector, as a warning.
		if strings.Contains(line, "--config") && !strings.Contains(line, "reads FILE as the Inspector's config") {
			t.Errorf("README.md:%d passes --config through another tool; write -c FILE:\n%s", i+1, line)
		}
	}
}

// The README says where mcp-mux's own resources are listed (last, after
// every backend's, as resourcesPage puts them) and whose subscriptions
// mcp-mux://subscriptions shows (the reader's own), in one way only.
func TestREADMESaysOneThingOfMuxsOwnResources(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(data)), " ")
	for _, wrong := range []string{"listed first", "every subscription of every session", "all subscriptions"} {
		if strings.Contains(text, wrong) {
			t.Errorf("README.md says %q of mcp-mux's own resources", wrong)
		}
	}
	for _, right := range []string{"listed last, after every backend's", "`mcp-mux://subscriptions` — JSON: the subscriptions of the session that reads it"} {
		if !strings.Contains(text, right) {
			t.Errorf("README.md does not say %q", right)
		}
	}
}

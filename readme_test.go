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

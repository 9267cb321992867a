package mux

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// sentences is n characters or so of sentences about name.
func sentences(name string, n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		sb.WriteString("Use " + name + " for task number " + strings.Repeat("x", i%7) + " well. ")
	}
	return strings.TrimSpace(sb.String())
}

// The merged instructions fit Claude Code's cut (4,096 characters), each
// backend with a fair share cut at a sentence, and its whole text is a
// resource away.
func TestInstructionsFitWithEveryBackendsShare(t *testing.T) {
	long1, long2, short := sentences("alpha", 5000), sentences("beta", 3000), "Gamma needs nothing special."
	m := startMux(t,
		fixture(t, "alpha", "-instructions", long1),
		fixture(t, "beta", "-instructions", long2),
		fixture(t, "gamma", "-instructions", short))
	cs := connect(t, m, nil)
	instr := cs.InitializeResult().Instructions
	if n := utf16Len(instr); n > maxInstructions {
		t.Fatalf("instructions are %d characters, more than %d", n, maxInstructions)
	}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		if !strings.Contains(instr, "## "+name) {
			t.Errorf("%s's section is missing:\n%s", name, instr)
		}
	}
	if !strings.Contains(instr, short) {
		t.Errorf("gamma's short text is not whole")
	}
	for _, name := range []string{"alpha", "beta"} {
		pointer := "The whole text: read the resource mcp-mux://instructions/" + name + "."
		at := strings.Index(instr, pointer)
		if at < 0 {
			t.Errorf("%s's cut text does not point at the whole:\n%s", name, instr)
			continue
		}
		if !strings.HasSuffix(instr[:at], "well. […] ") {
			t.Errorf("%s is not cut at the end of a sentence: %q", name, instr[max(0, at-40):at])
		}
		// The share: neither long one takes the other's place.
		sec := instr[strings.Index(instr, "## "+name):]
		if utf16Len(sec) < 1000 && name == "alpha" {
			t.Errorf("alpha's share is only %d characters", utf16Len(sec))
		}
	}
	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "mcp-mux://instructions/alpha"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != long1 {
		t.Fatalf("the whole text of alpha: %v", err)
	}
	if _, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "mcp-mux://instructions/nobody"}); err == nil {
		t.Error("instructions of a backend that does not exist")
	}
}

func TestFitInstructionsSharesFairly(t *testing.T) {
	parts := []instructionPart{
		{head: "\n\n## a\n\n", text: sentences("a", 3000), name: "a"},
		{head: "\n\n## b\n\n", text: sentences("b", 400), name: "b"},
		{head: "\n\n## c\n\n", text: sentences("c", 2000), name: "c"},
	}
	fitInstructions(parts, 3000)
	total := 0
	for _, p := range parts {
		total += utf16Len(p.head) + utf16Len(p.text)
	}
	if total > 3000 {
		t.Fatalf("%d characters in a budget of 3000", total)
	}
	if strings.Contains(parts[1].text, "[…]") {
		t.Errorf("b fits its share but was cut: %q", parts[1].text)
	}
	// a and c split what b left: within a sentence of each other.
	if d := utf16Len(parts[0].text) - utf16Len(parts[2].text); d > 60 || d < -60 {
		t.Errorf("a has %d characters, c %d: not a fair share", utf16Len(parts[0].text), utf16Len(parts[2].text))
	}
}

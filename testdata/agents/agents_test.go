// Package agents_test drives the real agent CLIs pinned in package.json
// (Codex, Gemini CLI, opencode, Copilot CLI, Claude Code), each against a
// fake model API of testdata/testkit, with the same four MCP servers
// registered once directly and once through mcp-mux, and compares what
// the agent sent its model: the tools of the first request (mcp-mux
// remembering no catalog, then the same catalogs after one run), their
// names, schemas and descriptions, the servers' instructions, a tool
// call's result, the search flow where mcp-mux offers search_tools, and
// what is left running after the agent exits.
//
// It lives under testdata so that `go test ./...` stays fast; .ci/run runs
// it: go test ./testdata/agents/. It needs node, `npm ci --ignore-scripts`
// here (and npm rebuild of the two agents whose binaries are placed by an
// install script) and in ../interop; without them it skips, except under
// CI. MCP_MUX_AGENTS_BIN=/path/to/mcp-mux tests another build (an old
// commit's, for "before" numbers); MCP_MUX_MODEL_DUMP=DIR keeps every
// request body an agent sent its model.
package agents_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	muxagents "github.com/mcp-mux/mcp-mux/mux/agents"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// row is one agent's line of the table TestAgents logs.
type row struct {
	agent                    string
	truth                    int    // tools the servers list
	direct, cold, warm       int    // MCP tools in the first model request
	cutDirect, cutMux        int    // names the agent cut (Gemini's 30+...+30, Copilot's 64)
	longDirect, longMux      int    // names over the model API's 64
	instrDirect, instrMux    int    // characters of the servers' instructions that reached the model
	result, search           string // the call's result through mcp-mux; the search flow
	exitDirect, exitCold     int64  // ms from the model's last reply to the last process gone
	exitWarm                 int64
	sideDirect, sideMux      int
	stepsCold, stepsWarm     string
	missingCold, missingWarm int
}

func TestAgents(t *testing.T) {
	var rows []row
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			r := testAgent(t, a)
			if r != nil {
				rows = append(rows, *r)
			}
		})
	}
	if len(rows) > 0 {
		var sb strings.Builder
		fmt.Fprintf(&sb, "\n| agent | tools listed | 1st request: direct / mux cold / mux warm | missing cold / warm | names cut direct / mux | names > 64 direct / mux | instructions chars direct / mux | call result via mux | search flow | exit ms direct / cold / warm |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			fmt.Fprintf(&sb, "| %s | %d | %d / %d / %d | %d / %d | %d / %d | %d / %d | %d / %d | %s | %s | %d / %d / %d |\n",
				r.agent, r.truth, r.direct, r.cold, r.warm, r.missingCold, r.missingWarm, r.cutDirect, r.cutMux, r.longDirect, r.longMux,
				r.instrDirect, r.instrMux, r.result, r.search, r.exitDirect, r.exitCold, r.exitWarm)
		}
		t.Log(sb.String())
	}
}

// testAgent runs a three times (directly; through mcp-mux remembering no
// catalog; through mcp-mux again, remembering the first's) and checks
// what its model was sent. Each check is a subtest of its own, so that
// the lead sees which hold and which do not.
func testAgent(t *testing.T, a agent) *row {
	needModule(t, "agents", ".bin/"+a.bin)
	base := t.TempDir()
	dirOf := func(name string) string {
		d := filepath.Join(base, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	directDir, coldDir, warmDir := dirOf("direct"), dirOf("cold"), dirOf("warm")
	srvs := servers(t, directDir)
	truths := serverTruth(t, srvs)
	echo := truthTool(t, truths, "server-everything", "echo")
	newPlan := func() *plan {
		return &plan{
			target: func(tl testkit.ModelTool) bool {
				return tl.Description == echo.Description && strings.Contains(tl.Name, "echo")
			},
			args:  map[string]any{"message": "agents-suite"},
			query: "echo the message back",
		}
	}
	names := make([]string, len(srvs))
	for i, s := range srvs {
		names[i] = s.name
	}
	direct := runAgent(t, a, "direct", directDir, srvs, newPlan())
	// One directory of remembered catalogs: empty for the cold run, what
	// the cold run left for the warm one.
	catalogs := dirOf("catalogs")
	cold := runAgent(t, a, "mux cold", coldDir, []server{muxServer(t, coldDir, catalogs, servers(t, coldDir))}, newPlan())
	// The same backends as the cold run's (their files in its directory):
	// a backend is remembered by what runs it, paths and env included.
	warm := runAgent(t, a, "mux warm", warmDir, []server{muxServer(t, warmDir, catalogs, servers(t, coldDir))}, newPlan())
	// The search flow, which the default list no longer puts before these
	// agents: the small list asked for (--tool-list search), on the warm
	// run's backends and memory.
	// Claude Code searches its tools itself (ToolSearch, on by default):
	// mcp-mux's small list is not for it, and this suite's scripted model
	// does not load deferred tools.
	runs := []*ran{direct, cold, warm}
	var search *ran
	if a.name != "claude" {
		searchDir := dirOf("search")
		searched := muxServer(t, searchDir, catalogs, servers(t, coldDir))
		searched.args = append(searched.args, "--tool-list", "search")
		search = runAgent(t, a, "mux search", searchDir, []server{searched}, newPlan())
		runs = append(runs, search)
	}
	for _, r := range runs {
		if len(r.turns) == 0 {
			t.Errorf("%s %s: the model got no request (%v); output:\n%s", a.name, r.label, r.err, tail(r.output, 3000))
		}
	}

	directTools := mcpTools(a, direct.first(), names...)
	allDirect := directTools
	for _, tr := range direct.turns[min(1, len(direct.turns)):] {
		allDirect = unionTools(allDirect, mcpTools(a, tr, names...))
	}
	coldTools, warmTools := mcpTools(a, cold.first(), "mcp-mux"), mcpTools(a, warm.first(), "mcp-mux")
	total := 0
	for _, tr := range truths {
		total += len(tr.tools)
	}
	rw := &row{agent: a.name, truth: total, direct: len(directTools), cold: len(coldTools), warm: len(warmTools),
		exitDirect: direct.exitMs, exitCold: cold.exitMs, exitWarm: warm.exitMs, sideDirect: direct.side, sideMux: cold.side,
		stepsCold: strings.Join(cold.steps, ", "), stepsWarm: strings.Join(warm.steps, ", ")}

	// The agent's own rules, seen in the direct run: they are the README's
	// table, and what the comparisons below assume.
	t.Run("rule/names", func(t *testing.T) {
		if len(allDirect) == 0 {
			t.Skipf("%s sent its model no MCP tool in the direct run (it did not wait for the servers)", a.name)
		}
		// Each tool the agent offered, found among what its server lists
		// by description and schema (what a server lists depends on the
		// client's capabilities: server-everything's get-roots-list...).
		var wrong []string
		for _, d := range allDirect {
			s, tl := truthOf(names, d)
			if tl == nil {
				continue
			}
			if ns, name := a.toolName(s, tl.Name); d.Namespace != ns || d.Name != name {
				wrong = append(wrong, fmt.Sprintf("%s/%s is %s %s, not %s %s", s, tl.Name, d.Namespace, d.Name, ns, name))
			}
		}
		if len(wrong) > 0 {
			t.Errorf("%s does not name MCP tools as the suite says (toolName): %d of %d:\n%s", a.name, len(wrong), len(allDirect), strings.Join(wrong, "\n"))
		}
	})
	t.Run("rule/instructions", func(t *testing.T) {
		for _, s := range names {
			in := truths[s].instructions
			if in == "" || len(mcpTools(a, direct.first(), s)) == 0 {
				continue // none, or the server was not ready for the first request
			}
			texts := collapse(strings.Join(direct.first().Texts, "\n"))
			where := a.instructionsOf(s, in)
			switch {
			case where == "" && strings.Contains(texts, collapse(firstLine(in))):
				t.Errorf("%s: %s's instructions reached the model, where the suite says they never do", a.name, s)
			case where != "" && !strings.Contains(texts, collapse(where)):
				t.Errorf("%s: %s's instructions are not where the suite says (instructionsOf)", a.name, s)
			}
		}
	})

	// 1. Every tool of the direct run's first request is in mcp-mux's,
	// cold and warm; warm, every tool the servers list (a first answer
	// from memory, for the agents that do not wait).
	missCold := missing(directTools, coldTools)
	missWarm := missing(directTools, warmTools)
	rw.missingCold, rw.missingWarm = len(missCold), len(missWarm)
	t.Run("tools/cold", func(t *testing.T) {
		if len(missCold) > 0 {
			t.Errorf("mcp-mux, remembering no catalog, did not give %s's model %d of the %d tools the direct run did (first request: %d vs %d): %s",
				a.name, len(missCold), len(directTools), len(coldTools), len(directTools), short(missCold))
		}
	})
	t.Run("tools/warm", func(t *testing.T) {
		if len(missWarm) > 0 {
			t.Errorf("mcp-mux, remembering the catalogs, did not give %s's model %d of the %d tools the direct run did (first request: %d vs %d): %s",
				a.name, len(missWarm), len(directTools), len(warmTools), len(directTools), short(missWarm))
		}
		if m := missing(listedToAll(truths, a), warmTools); len(m) > 0 {
			t.Errorf("mcp-mux, remembering the catalogs, left out of %s's first request %d of the tools the servers list to any client: %s", a.name, len(m), short(m))
		}
	})

	// 2. Names: none cut by the agent that were not cut directly; none past
	// the model API's limit.
	rw.cutDirect, rw.longDirect = countCut(a, directTools), countLong(a, directTools)
	muxAll := unionTools(coldTools, warmTools)
	rw.cutMux, rw.longMux = countCut(a, muxAll), countLong(a, muxAll)
	t.Run("names", func(t *testing.T) {
		if c := cutNames(a, muxAll); len(c) > rw.cutDirect {
			t.Errorf("%s cut %d tool names through mcp-mux (directly: %d): %s", a.name, len(c), rw.cutDirect, short(c))
		}
		if a.apiLimit > 0 {
			if l := longNames(a, muxAll); len(l) > 0 {
				t.Errorf("%s sent %d tool names over the model API's %d characters through mcp-mux (a request the API rejects whole): %s", a.name, len(l), a.apiLimit, short(l))
			}
		}
	})

	// 3. Schemas and descriptions: each direct tool's partner (same
	// description) has the same schema.
	t.Run("schemas", func(t *testing.T) {
		var diff []string
		for _, d := range directTools {
			m, ok := find(muxAll, func(m testkit.ModelTool) bool { return m.Description == d.Description })
			if ok && canonical(m.Schema) != canonical(d.Schema) {
				diff = append(diff, fmt.Sprintf("%s (as %s): %s, directly %s", d.Name, m.Name, tail(canonical(m.Schema), 300), tail(canonical(d.Schema), 300)))
			}
		}
		if len(diff) > 0 {
			t.Errorf("%d schemas differ through mcp-mux:\n%s", len(diff), strings.Join(diff, "\n"))
		}
	})

	// 4. Instructions: what reached the model directly reaches it through
	// mcp-mux, whole.
	for _, s := range names {
		in := truths[s].instructions
		rw.instrDirect += reached(direct.first(), in)
		rw.instrMux += reached(cold.first(), in)
	}
	t.Run("instructions", func(t *testing.T) {
		for _, s := range names {
			in := truths[s].instructions
			if in == "" {
				continue
			}
			d, c, w := reached(direct.first(), in), reached(cold.first(), in), reached(warm.first(), in)
			if c < d || w < d {
				t.Errorf("of %s's instructions (%d characters), %d reached %s's model directly, %d through mcp-mux cold, %d warm", s, len(in), d, a.name, c, w)
			}
		}
	})

	// 5. A call's result reaches the model as it does directly.
	want := "Echo: agents-suite"
	directResult := direct.lastResult(a)
	rw.result = "ok"
	t.Run("result", func(t *testing.T) {
		for _, r := range []*ran{cold, warm} {
			got := r.lastResult(a)
			switch {
			case !strings.Contains(got, want):
				rw.result = "no result"
				t.Errorf("%s through mcp-mux (%s): the model got %q, not the echo's result (steps: %s)", a.name, r.label, tail(got, 300), strings.Join(r.steps, ", "))
			case strings.Contains(directResult, want) && got != directResult && !usedWrapper(r):
				rw.result = "differs"
				t.Errorf("%s through mcp-mux (%s): the model got %q, directly %q", a.name, r.label, got, directResult)
			}
		}
	})

	// 6. The search flow, where mcp-mux offers search_tools instead of the
	// tool: search, then call what was found, by its own name if the agent
	// offers it by then, else through call_tool.
	rw.search = "not offered"
	t.Run("search", func(t *testing.T) {
		if search == nil {
			t.Skipf("%s searches its tools itself: no search run", a.name)
		}
		if !slices.ContainsFunc(search.steps, func(s string) bool { return strings.HasPrefix(s, "search ") }) {
			t.Errorf("%s through mcp-mux --tool-list search: the model was not offered search_tools (steps: %s)", a.name, strings.Join(search.steps, ", "))
		}
		// The agent's rule in mux/agents (Relists): it lists again on
		// tools/list_changed before its model's next request, or not.
		relisted := slices.ContainsFunc(search.steps, func(s string) bool { return strings.HasPrefix(s, "call found ") })
		if want := muxagents.Of(clientInfoName[a.name]).Relists; relisted != want {
			t.Errorf("%s: the found tool reached its model's next request by its own name: %v; mux/agents says Relists %v (steps: %s)", a.name, relisted, want, strings.Join(search.steps, ", "))
		}
		for _, r := range []*ran{cold, warm, search} {
			if !slices.ContainsFunc(r.steps, func(s string) bool { return strings.HasPrefix(s, "search ") }) {
				continue
			}
			rw.search = "ok (" + strings.Join(r.steps, ", ") + ")"
			if got := r.lastResult(a); !strings.Contains(got, want) {
				rw.search = "dead end (" + strings.Join(r.steps, ", ") + ")"
				t.Errorf("%s through mcp-mux (%s): search_tools then the found tool did not give the model the result: steps %s; last result %q", a.name, r.label, strings.Join(r.steps, ", "), tail(got, 400))
			}
		}
	})

	// 7. The exit: nothing of a run is left once the agent has exited.
	t.Run("exit", func(t *testing.T) {
		for _, r := range runs {
			if len(r.left) > 0 {
				t.Errorf("%s %s: 10 s after the agent exited, still running:\n%s", a.name, r.label, strings.Join(r.left, "\n"))
			}
		}
	})
	return rw
}

// truthTool is server's tool named name, as the server lists it.
func truthTool(t *testing.T, truths map[string]truth, server, name string) *mcp.Tool {
	t.Helper()
	for _, tl := range truths[server].tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("%s lists no %s", server, name)
	return nil
}

// truthOf is the server and tool of names that d is, by description and
// schema.
func truthOf(names []string, d testkit.ModelTool) (string, *mcp.Tool) {
	for _, s := range names {
		for _, tl := range truths[s].tools {
			if tl.Description == d.Description {
				return s, tl
			}
		}
	}
	return "", nil
}

// listedToAll are the servers' tools as a's model would see them (no
// schema: the agent rewrites it), less
// those server-everything lists only to a client of some capability
// (roots, sampling, elicitation): what every agent is offered.
func listedToAll(truths map[string]truth, a agent) []testkit.ModelTool {
	var out []testkit.ModelTool
	for _, s := range sortedKeys(truths) {
		for _, tl := range truths[s].tools {
			if s == "server-everything" && (strings.Contains(tl.Name, "roots") || strings.Contains(tl.Name, "sampling") || strings.Contains(tl.Name, "elicitation")) {
				continue
			}
			ns, name := a.toolName(s, tl.Name)
			out = append(out, testkit.ModelTool{Namespace: ns, Name: name, Description: tl.Description})
		}
	}
	return out
}

// mcpTools are the tools of req that the agent named for one of servers,
// by its naming rule's prefix (of a cut name, what is left of it).
func mcpTools(a agent, req *testkit.ModelRequest, servers ...string) []testkit.ModelTool {
	var got []testkit.ModelTool
	for _, tl := range req.Tools {
		for _, s := range servers {
			ns, prefix := a.toolName(s, "")
			if tl.Namespace != ns {
				continue
			}
			head := tl.Name
			if i := strings.Index(head, "..."); i >= 0 {
				head = head[:i]
				prefix = prefix[:min(len(prefix), len(head))]
			}
			if strings.HasPrefix(head, prefix) {
				got = append(got, tl)
				break
			}
		}
	}
	return got
}

// unionTools is a with the tools of b it does not have (by name).
func unionTools(a, b []testkit.ModelTool) []testkit.ModelTool {
	out := append([]testkit.ModelTool(nil), a...)
	for _, tl := range b {
		if _, ok := find(out, func(o testkit.ModelTool) bool { return o.Namespace == tl.Namespace && o.Name == tl.Name }); !ok {
			out = append(out, tl)
		}
	}
	return out
}

// missing are the tools of want that got has no partner of: a tool with
// the same description and schema (where want has one: the agent's own
// rendering of it), whatever its name (each partner counted once).
func missing(want, got []testkit.ModelTool) []string {
	used := make([]bool, len(got))
	var miss []string
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && g.Description == w.Description && (w.Schema == nil || canonical(g.Schema) == canonical(w.Schema)) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			miss = append(miss, w.Name)
		}
	}
	return miss
}

// cutNames are the names the agent cut: Gemini's first 30 + "..." + last
// 30, and a name of exactly Copilot's 64 that does not end as any tool of
// the servers does.
func cutNames(a agent, tools []testkit.ModelTool) []string {
	var cut []string
	for _, tl := range tools {
		if strings.Contains(tl.Name, "...") || (a.name == "copilot" && len(tl.Name) == 64 && !endsAsATool(tl.Name)) {
			cut = append(cut, tl.Name)
		}
	}
	return cut
}

func countCut(a agent, tools []testkit.ModelTool) int { return len(cutNames(a, tools)) }

// endsAsATool reports whether name ends with the name of a tool some
// server lists.
func endsAsATool(name string) bool {
	for _, tr := range truths {
		for _, tl := range tr.tools {
			if strings.HasSuffix(name, tl.Name) {
				return true
			}
		}
	}
	return false
}

// longNames are the names over OpenAI's 64 characters.
func longNames(a agent, tools []testkit.ModelTool) []string {
	var long []string
	for _, tl := range tools {
		if len(tl.Name) > 64 {
			long = append(long, tl.Name)
		}
	}
	return long
}

func countLong(a agent, tools []testkit.ModelTool) int { return len(longNames(a, tools)) }

// reached is how many characters of text (its longest beginning, blanks
// collapsed) the model got in req.
func reached(req *testkit.ModelRequest, text string) int {
	if text == "" {
		return 0
	}
	all := collapse(strings.Join(req.Texts, "\n"))
	c := collapse(text)
	lo, hi := 0, len(c)
	for lo < hi { // the longest prefix of c in all
		mid := (lo + hi + 1) / 2
		if strings.Contains(all, c[:mid]) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// collapse is s with every run of blanks one space: agents indent
// instructions (opencode) or not.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// usedWrapper reports whether the run called the tool through call_tool,
// whose result may say more than the tool's.
func usedWrapper(r *ran) bool {
	return slices.ContainsFunc(r.steps, func(s string) bool { return strings.HasPrefix(s, "call_tool") })
}

// short is the first few of names, for a message.
func short(names []string) string {
	if len(names) > 8 {
		return strings.Join(names[:8], ", ") + fmt.Sprintf(" and %d more", len(names)-8)
	}
	return strings.Join(names, ", ")
}

// clientInfoName is the clientInfo name each agent sends (seen on this
// machine), by which mux/agents knows it.
var clientInfoName = map[string]string{
	"codex":    "codex-mcp-client",
	"gemini":   "gemini-cli-mcp-client",
	"opencode": "opencode",
	"copilot":  "copilot-cli",
	"claude":   "claude-code",
}

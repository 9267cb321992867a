package toolname

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcp-mux/mcp-mux/mux/agents"
)

// The four servers of the issue, as mcp-mux exposes them: server-everything,
// server-memory, server-filesystem and executeautomation's Playwright
// server 1.0.12 registered as executeautomation-playwright.
var (
	everything = []string{"echo", "get-sum", "get-env", "get-tiny-image", "get-annotated-message", "get-resource-links",
		"get-resource-reference", "get-structured-content", "gzip-file-as-resource", "toggle-simulated-logging",
		"toggle-subscriber-updates", "trigger-long-running-operation", "get-roots-list", "trigger-sampling-request",
		"trigger-elicitation-request", "trigger-sampling-request-async", "trigger-elicitation-request-async"}
	memory = []string{"create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
		"delete_relations", "read_graph", "search_nodes", "open_nodes"}
	filesystem = []string{"read_file", "read_text_file", "read_media_file", "read_multiple_files", "write_file", "edit_file",
		"create_directory", "list_directory", "list_directory_with_sizes", "directory_tree", "move_file", "search_files",
		"get_file_info", "list_allowed_directories"}
	playwright = []string{"start_codegen_session", "end_codegen_session", "get_codegen_session", "clear_codegen_session",
		"playwright_navigate", "playwright_screenshot", "playwright_click", "playwright_iframe_click", "playwright_iframe_fill",
		"playwright_fill", "playwright_select", "playwright_hover", "playwright_upload_file", "playwright_evaluate",
		"playwright_console_logs", "playwright_resize", "playwright_close", "playwright_get", "playwright_post", "playwright_put",
		"playwright_patch", "playwright_delete", "playwright_expect_response", "playwright_assert_response",
		"playwright_custom_user_agent", "playwright_get_visible_text", "playwright_get_visible_html", "playwright_go_back",
		"playwright_go_forward", "playwright_drag", "playwright_press_key", "playwright_save_as_pdf", "playwright_click_and_switch_tab"}
)

func issueNames() ([]Name, []string) {
	var names []Name
	prefixes := []string{"everything", "memory", "filesystem", "executeautomation-playwright"}
	for i, tools := range [][]string{everything, memory, filesystem, playwright} {
		for _, t := range tools {
			names = append(names, Name{Prefix: prefixes[i], Sep: "__", Tool: t})
		}
	}
	return names, prefixes
}

var reserved = []string{"search_tools", "call_tool", "call_read_only_tool"}

// limited are the agents with a known name limit, by their clientInfo names.
var limited = []string{"gemini-cli-mcp-client", "opencode", "copilot-cli", "codex-mcp-client"}

// exposed is each name as Fit leaves it or renames it.
func exposed(names []Name, fit map[string]string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n.String()
		if s, ok := fit[out[i]]; ok {
			out[i] = s
		}
	}
	return out
}

// checkFits fails t unless every name the agent shows of exposed is
// within its limit and unique, and every name that fits is unchanged.
func checkFits(t *testing.T, a agents.Agent, server string, names []Name, fit map[string]string) {
	t.Helper()
	shown := map[string]string{}
	for i, e := range exposed(names, fit) {
		full := names[i].String()
		s := a.ToolName(server, e)
		if n := utf8.RuneCountInString(s); n > a.NameLimit {
			t.Errorf("%s: %q shows as %q, %d characters, over %d", a.Name, full, s, n, a.NameLimit)
		}
		if other, dup := shown[s]; dup {
			t.Errorf("%s: %q and %q both show as %q", a.Name, other, full, s)
		}
		shown[s] = full
		if utf8.RuneCountInString(a.ToolName(server, full)) <= a.NameLimit && e != full {
			t.Errorf("%s: %q fits, and was renamed %q", a.Name, full, e)
		}
		for _, r := range reserved {
			if a.ToolName(server, r) == s {
				t.Errorf("%s: %q shows as mcp-mux's own %q", a.Name, full, r)
			}
		}
	}
}

// The issue's measurement: through mcp-mux 11 names past Gemini CLI's
// cut, 4 past opencode's and Copilot CLI's 64. Each now fits, and the
// tool's own name stays whole: only the backend's prefix is shorter.
func TestFitTheIssuesFourServers(t *testing.T) {
	names, prefixes := issueNames()
	for _, client := range limited {
		a := agents.Of(client)
		fit := Fit(a, "mcp-mux", names, prefixes, reserved)
		checkFits(t, a, "mcp-mux", names, fit)
		for full, short := range fit {
			n := Split(full, strings.SplitN(full, "__", 2)[1], "__")
			if !strings.HasSuffix(short, "__"+n.Tool) || !strings.HasPrefix(n.Prefix, strings.TrimSuffix(short, "__"+n.Tool)) {
				t.Errorf("%s: %q became %q: the prefix alone should be shorter", a.Name, full, short)
			}
		}
		t.Logf("%s: %d renamed, e.g. %v", a.Name, len(fit), firstOf(fit))
	}
	gemini := Fit(agents.Of("gemini-cli-mcp-client"), "mcp-mux", names, prefixes, reserved)
	if got, want := gemini["executeautomation-playwright__playwright_iframe_click"], "executeautomation-playwrig__playwright_iframe_click"; got != want {
		t.Errorf("Gemini CLI: %q, want %q", got, want)
	}
	// As many as the issue measured past each agent's limit.
	for client, want := range map[string]int{"gemini-cli-mcp-client": 11, "opencode": 4, "copilot-cli": 4, "codex-mcp-client": 0} {
		if got := len(Fit(agents.Of(client), "mcp-mux", names, prefixes, reserved)); got != want {
			t.Errorf("%s: %d renamed, the issue measured %d past its limit", client, got, want)
		}
	}
}

func firstOf(m map[string]string) string {
	for k, v := range m {
		return k + " -> " + v
	}
	return ""
}

// Agents mcp-mux does not know, and Cursor, have no known name limit:
// nothing is renamed for them.
func TestFitRenamesNothingWithoutALimit(t *testing.T) {
	names, prefixes := issueNames()
	names = append(names, Name{Prefix: "p", Sep: "__", Tool: strings.Repeat("x", 90)})
	for _, client := range []string{"mcp-inspector", "cursor-vscode"} {
		if fit := Fit(agents.Of(client), "mcp-mux", names, prefixes, reserved); fit != nil {
			t.Errorf("%s: %v", client, fit)
		}
	}
	if fit := Fit(agents.Of("opencode"), "mcp-mux", names[:5], prefixes, reserved); fit != nil {
		t.Errorf("names that fit: %v", fit)
	}
}

// A tool whose own name is too long is cut, with a hash that keeps two
// of the same start apart; a tool of a backend without a prefix too.
func TestFitCutsALongToolNameWithAHash(t *testing.T) {
	long := "get_the_current_status_of_every_deployment_in_the_organization_"
	names := []Name{
		{Prefix: "deploy", Sep: "__", Tool: long + "by_team"},
		{Prefix: "deploy", Sep: "__", Tool: long + "by_region"},
		{Tool: long + "by_team"},
		{Prefix: "dev", Sep: "__", Tool: "list"},
	}
	prefixes := []string{"deploy", "dev", ""}
	for _, client := range limited {
		a := agents.Of(client)
		fit := Fit(a, "mcp-mux", names, prefixes, reserved)
		checkFits(t, a, "mcp-mux", names, fit)
		if got := fit[names[0].String()]; !strings.HasPrefix(got, "dep__get_the_current") {
			t.Errorf("%s: %q: the prefix should be as short as tells it from dev's, the tool's name cut", a.Name, got)
		}
		if len(fit) != 3 {
			t.Errorf("%s: %v", a.Name, fit)
		}
	}
}

// A name is the same whatever the order the backends listed in, whichever
// other backends are ready, and from one run to the next (a reload builds
// it again from the same names).
func TestFitIsStable(t *testing.T) {
	names, prefixes := issueNames()
	extra := []Name{{Prefix: "deploy", Sep: "__", Tool: strings.Repeat("status_", 12)}, {Prefix: "deploy", Sep: "__", Tool: strings.Repeat("status_", 11) + "x"}}
	names = append(names, extra...)
	prefixes = append(prefixes, "deploy")
	for _, client := range limited {
		a := agents.Of(client)
		want := Fit(a, "mcp-mux", names, prefixes, reserved)
		r := rand.New(rand.NewPCG(1, uint64(len(client))))
		for range 20 {
			shuffled := append([]Name(nil), names...)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			// Some backends not ready yet: only some of the names.
			some := shuffled[:r.IntN(len(shuffled))+1]
			got := Fit(a, "mcp-mux", some, prefixes, reserved)
			for full, short := range got {
				if want[full] != short {
					t.Fatalf("%s: %q is %q with %d names in another order, %q with all", a.Name, full, short, len(some), want[full])
				}
			}
			if len(some) == len(names) && !maps.Equal(got, want) {
				t.Fatalf("%s: another order, other names: %v, %v", a.Name, got, want)
			}
		}
	}
}

// A shortened name never takes a name another tool has, nor mcp-mux's
// own, nor one the agent would show the same (it sanitizes names): it
// gets a hash then.
func TestFitNeverCollides(t *testing.T) {
	a := agents.Of("opencode")
	budget := 64 - len("mcp-mux_")
	tool := "run_" + strings.Repeat("t", budget-len("abcd__run_")-1)
	names := []Name{
		// Cut to abcd__run_ttt...x and abcx__run_ttt...x,
		{Prefix: "abcdef", Sep: "__", Tool: tool + "x"},
		{Prefix: "abcxyz", Sep: "__", Tool: tool + "x"},
		// but a backend without a prefix has a tool of the first's new
		// name,
		{Tool: "abcd__" + tool + "x"},
		// and one the agent shows as the second's: '.' becomes '_'.
		{Tool: "abcx__run." + tool[4:] + "x"},
	}
	prefixes := []string{"abcdef", "abcxyz", ""}
	fit := Fit(a, "mcp-mux", names, prefixes, reserved)
	checkFits(t, a, "mcp-mux", names, fit)
	for _, full := range []string{names[0].String(), names[1].String()} {
		if got := fit[full]; !strings.HasPrefix(got, full[:4]+"__run_") || got[len(got)-5] != '_' {
			t.Errorf("%q became %q: want its own cut with a hash", full, got)
		}
	}
	// mcp-mux's own tool: under a long registered name, searchxyz_tools
	// would become search_tools.
	server := strings.Repeat("m", 64-1-len("search_tools"))
	own := []Name{{Prefix: "searchxyz", Sep: "_", Tool: "tools"}}
	fit = Fit(a, server, own, []string{"searchxyz", "s2"}, reserved)
	checkFits(t, a, server, own, fit)
	if got := fit["searchxyz_tools"]; got == "" || got == "search_tools" {
		t.Errorf("searchxyz_tools became %q", got)
	}
	// The hash is of the full name, and a longer one is taken where even
	// that would be another's: many names of one start stay apart.
	for i := range 300 {
		names = append(names, Name{Prefix: "abcdef", Sep: "__", Tool: tool + fmt.Sprint(i)})
	}
	checkFits(t, a, "mcp-mux", names, Fit(a, "mcp-mux", names, prefixes, reserved))
}

// The name the agent registered mcp-mux under counts: a longer one
// leaves less room.
func TestFitCountsTheRegisteredName(t *testing.T) {
	names, prefixes := issueNames()
	a := agents.Of("copilot-cli")
	short := Fit(a, "mcp-mux", names, prefixes, reserved)
	long := Fit(a, "mcp-mux-my-project-name", names, prefixes, reserved)
	checkFits(t, a, "mcp-mux-my-project-name", names, long)
	if len(long) <= len(short) {
		t.Errorf("%d renamed under a longer name, %d under mcp-mux", len(long), len(short))
	}
}

func TestUniquePrefix(t *testing.T) {
	prefixes := []string{"github", "github-enterprise", "gitlab", "executeautomation-playwright", "everything", "same", "same"}
	for p, want := range map[string]string{
		"github-enterprise":            "github-",
		"github":                       "github",
		"gitlab":                       "gitl",
		"executeautomation-playwright": "ex",
		"same":                         "same",
	} {
		if got := uniquePrefix(p, prefixes); got != want {
			t.Errorf("uniquePrefix(%q) = %q, want %q", p, got, want)
		}
	}
}

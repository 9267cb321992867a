package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/agents"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/search"
)

// A tool list that fits each agent. Twenty real servers are 416 tools and
// about 93,000 tokens of definitions, paid on every turn; clients cap the
// count or pick worse tools from long lists. A session's tools/list is
// either every tool ("all") or a small surface ("search"): the pinned
// tools, the tools the session found (its working set, listed under their
// own names so that their own approvals apply), search_tools (mux/search
// ranks the catalog for a query) and, for agents that may not list again,
// the two wrappers of wrappers.go. Every tool stays callable by its name
// whatever the list shows. [mux] tool_list picks the mode; "auto" decides per session,
// by what the agent is (mux/agents) and how many tools there are.

// mux's own tools' names: reserved (a backend tool exposed under one of
// them is a collision mux wins).
const (
	toolSearch       = search.SearchToolName
	toolCall         = search.CallToolName
	toolCallReadOnly = search.CallReadOnlyToolName
)

// ownTool reports whether name is one of mux's own tools.
func ownTool(name string) bool {
	return name == toolSearch || name == toolCall || name == toolCallReadOnly
}

// traitsOf is what mux knows of the agent of s (mux/agents).
func traitsOf(s *session) agents.Agent {
	if s == nil {
		return agents.Agent{ListChanged: true}
	}
	p := s.initParams()
	if p == nil || p.ClientInfo == nil {
		return agents.Agent{ListChanged: true}
	}
	return agents.Of(p.ClientInfo.Name)
}

// WithToolList makes mode ("all", "search" or "auto") the tool list of
// every session that asks for none (mcp-mux --tool-list, over stdio): an
// agent that can set only its launch line picks its list there, as one
// over HTTP does with door.ToolListHeader.
func WithToolList(mode string) Option {
	return func(m *Mux) { m.launchToolList = strings.ToLower(strings.TrimSpace(mode)) }
}

// askToolList records the tool list the agent of s asked for; a value
// that is not one of the modes is ignored.
func (s *session) askToolList(v string) {
	v = strings.ToLower(strings.TrimSpace(v))
	switch v {
	case config.ToolListAll, config.ToolListSearch, config.ToolListAuto:
		if cur := s.toolList.Load(); cur == nil || *cur != v {
			s.toolList.Store(&v)
		}
	}
}

// toolListMode is the list s gets: config.ToolListAll or ToolListSearch.
func (m *Mux) toolListMode(s *session) string {
	mode, max := m.toolListOf(s) // [mux]'s, or its profile's (profile.go)
	if m.launchToolList != "" {
		mode = m.launchToolList
	}
	if s != nil {
		if v := s.toolList.Load(); v != nil {
			mode = *v
		}
	}
	switch mode {
	case config.ToolListAll, config.ToolListSearch:
		return mode
	}
	// An agent gets what it gets with the servers registered directly:
	// every tool, unless it cannot take them all (its own limit) or the
	// small list is chosen for it. An agent not known is given every tool,
	// as it would be directly: the search surface left Codex, Gemini CLI,
	// opencode and the Inspector 3 tools of 70.
	t := traitsOf(s)
	if t.Searches {
		return config.ToolListAll
	}
	n := len(m.catalogFor(s).tools.items)
	if t.MaxTools > 0 && n > t.MaxTools || t.SmallList && n > max {
		return config.ToolListSearch
	}
	return config.ToolListAll
}

// pinned reports whether e is a pinned tool of its backend.
func pinned(e exposed[mcp.Tool]) bool {
	e.mem.mu.Lock()
	pins := e.mem.spec.Pin
	e.mem.mu.Unlock()
	for _, p := range pins {
		if ok, _ := path.Match(p, e.original); ok {
			return true
		}
	}
	return false
}

// workingSet is the tools a session found with search_tools (or found and
// called): they join its list (search mode) under their own names, least
// recently used first out, so that the agent calls them as themselves.
type workingSet struct {
	mu    sync.Mutex
	found []string        // names search_tools returned, newest last (bounded)
	names []string        // the working set, newest last (bounded)
	first map[string]bool // the tools of the first search surface the agent was sent
}

// maxWorkingSet bounds a session's working set, and maxFound what it
// remembers of its searches.
const (
	maxWorkingSet = 10
	maxFound      = 200
)

// join moves name to the newest end of the working set, and reports
// whether it was not in it.
func (w *workingSet) join(name string) bool {
	had := slices.Contains(w.names, name)
	w.names = slices.DeleteFunc(w.names, func(x string) bool { return x == name })
	w.names = append(w.names, name)
	if len(w.names) > maxWorkingSet {
		w.names = w.names[len(w.names)-maxWorkingSet:]
	}
	return !had
}

// noteFound records what a search found: each joins the working set. It
// reports whether the set changed.
func (w *workingSet) noteFound(names []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := false
	for _, n := range names {
		w.found = slices.DeleteFunc(w.found, func(x string) bool { return x == n })
		w.found = append(w.found, n)
		if w.join(n) {
			changed = true
		}
	}
	if len(w.found) > maxFound {
		w.found = w.found[len(w.found)-maxFound:]
	}
	return changed
}

// noteCalled records a call of name, and reports whether it joined the
// working set (it was found, and was not in it).
func (w *workingSet) noteCalled(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.found, name) {
		return false
	}
	return w.join(name)
}

func (w *workingSet) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.names)
}

// noteShown records a search surface the agent was sent. Only the first
// is kept: an agent lists before its model's first request, so that list
// is the one its model surely has; when a later one reaches the model, if
// ever, is the agent's own (Relists).
func (w *workingSet) noteShown(names map[string]bool) {
	w.mu.Lock()
	if w.first == nil {
		w.first = names
	}
	w.mu.Unlock()
}

// inFirstList reports whether the agent was sent name in its first list;
// known is false before it was sent one.
func (w *workingSet) inFirstList(name string) (in, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first[name], w.first != nil
}

// searchSurface is the tools/list result of search mode: the pinned tools,
// the working set, search_tools, then the wrappers for an agent that may
// not list again (wrappers.go).
func (m *Mux) searchSurface(s *session) (mcp.Result, error) {
	cat := m.catalogFor(s)
	var items []*mcp.Tool
	var raw []json.RawMessage
	listed := map[string]bool{}
	add := func(e exposed[mcp.Tool]) {
		if !listed[e.item.Name] {
			listed[e.item.Name] = true
			items = append(items, e.item)
			raw = append(raw, e.raw)
		}
	}
	for _, e := range cat.tools.items {
		if pinned(e) {
			add(e)
		}
	}
	if s != nil {
		for _, name := range s.working.list() {
			if e, ok := cat.tools.lookup(name); ok {
				add(e)
			}
		}
		s.working.noteShown(listed)
	}
	var own []json.RawMessage
	if err := json.Unmarshal(search.ToolDefinitions(), &own); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-mux: its own tools' definitions: " + err.Error()}
	}
	wrappers := !traitsOf(s).Relists
	for _, o := range own {
		var t mcp.Tool
		if json.Unmarshal(o, &t) == nil && (t.Name == toolSearch || wrappers) {
			items = append(items, &t)
			raw = append(raw, o)
		}
	}
	return &toolsPage{&mcp.ListToolsResult{Tools: items, Cacheable: cat.cache[0]}, raw}, nil
}

// forClaudeCode is the page's tools with what Claude Code reads of them
// (its tool search defers MCP tools): _meta["anthropic/alwaysLoad"] on the
// pinned ones, and _meta["anthropic/searchHint"], a short line about the
// backend, on every one.
func forClaudeCode(items []exposed[mcp.Tool], raw []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, len(raw))
	for i, r := range raw {
		meta := map[string]any{"anthropic/searchHint": items[i].mem.about()}
		if pinned(items[i]) {
			meta["anthropic/alwaysLoad"] = true
		}
		out[i] = withMeta(r, meta)
	}
	return out
}

// withMeta is raw (a tool) with keys added to its _meta (decoded and
// encoded again at the top level only).
func withMeta(raw json.RawMessage, keys map[string]any) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || top == nil {
		return raw
	}
	var meta map[string]any
	_ = json.Unmarshal(top["_meta"], &meta)
	if meta == nil {
		meta = map[string]any{}
	}
	for k, v := range keys {
		meta[k] = v
	}
	top["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(top)
	if err != nil {
		return raw
	}
	return out
}

// about is one line about the backend, for search: its server's title or
// name, then the first sentence of its instructions.
func (mem *member) about() string {
	mem.mu.Lock()
	r := mem.initResult
	mem.mu.Unlock()
	s := mem.spec.Name
	if r != nil && r.ServerInfo != nil {
		title := r.ServerInfo.Title
		if title == "" {
			title = r.ServerInfo.Name
		}
		if title != "" && !strings.EqualFold(title, s) {
			s += ": " + title
		}
	}
	if r != nil {
		if first := firstSentence(r.Instructions); first != "" {
			s += ". " + first
		}
	}
	const max = 160
	if len(s) > max {
		s = s[:max]
	}
	return s
}

// firstSentence is the first sentence of prose in instructions, written
// in markdown as most are: headings, rules, fences and the like are not
// prose (a hint that reads "# Everything Server – Server Instructions"
// says nothing), and emphasis and list markers are dropped.
func firstSentence(instructions string) string {
	fenced := false
	for line := range strings.Lines(instructions) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced || line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "|") ||
			strings.HasPrefix(line, "<") || strings.Trim(line, "-*_= ") == "" {
			continue
		}
		for _, marker := range []string{"- ", "* ", "+ ", "> "} {
			line = strings.TrimPrefix(line, marker)
		}
		line = strings.NewReplacer("**", "", "__", "", "`", "").Replace(line)
		if i := strings.Index(line, ". "); i >= 0 {
			line = line[:i+1]
		}
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

// toolIndex is the search index of the catalog it was built from: the
// catalog's tool at Doc i is docs[i].
type toolIndex struct {
	cat *catalog
	ix  *search.Index
}

// index is the search index of the catalog now, built (once per catalog)
// when asked for first; a search during a build uses the previous one, so
// a catalog that changes never stalls a search.
func (m *Mux) index() *toolIndex {
	cat := m.cat.get()
	cur := m.search.Load()
	if cur != nil && cur.cat == cat {
		return cur
	}
	if m.searchBuilding.CompareAndSwap(false, true) {
		build := func() {
			defer m.searchBuilding.Store(false)
			t := &toolIndex{cat: cat, ix: search.New(docsOf(cat))}
			m.search.Store(t)
		}
		if cur == nil {
			build() // the first: nothing to search meanwhile
			return m.search.Load()
		}
		if !m.goOwned(build) {
			m.searchBuilding.Store(false)
		}
	}
	if cur == nil {
		return &toolIndex{cat: cat, ix: search.New(docsOf(cat))}
	}
	return cur
}

// docsOf is what the search sees of the catalog's tools, in its order.
func docsOf(cat *catalog) []search.Doc {
	docs := make([]search.Doc, len(cat.tools.items))
	for i, e := range cat.tools.items {
		var schema json.RawMessage
		if e.item.InputSchema != nil {
			schema, _ = json.Marshal(e.item.InputSchema)
		}
		docs[i] = search.Doc{Name: e.item.Name, Tool: e.bare, Title: e.item.Title, Description: e.item.Description,
			InputSchema: schema, Backend: e.mem.spec.Name, About: e.mem.about()}
	}
	return docs
}

// searchArgs are search_tools' arguments.
type searchArgs struct {
	Query   string `json:"query"`
	Limit   int    `json:"limit"`
	Backend string `json:"backend"`
}

// foundTool is one tool of search_tools' result.
type foundTool struct {
	Name         string               `json:"name"`
	Title        string               `json:"title,omitempty"`
	Description  string               `json:"description"`
	InputSchema  any                  `json:"inputSchema"`
	OutputSchema any                  `json:"outputSchema,omitempty"`
	Annotations  *mcp.ToolAnnotations `json:"annotations,omitempty"`
	Backend      string               `json:"backend"`
}

// searchTools answers search_tools: the best tools for the query, as the
// agent would call them, among those it could call (the catalog has only
// ready backends, filters applied), without the pinned ones (listed
// already).
func (m *Mux) searchTools(ctx context.Context, s *session, args json.RawMessage) (*mcp.CallToolResult, error) {
	m.waitStarted(ctx)
	var a searchArgs
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "search_tools: " + err.Error()}
		}
	}
	switch {
	case a.Limit <= 0:
		a.Limit = 5
	case a.Limit > 20:
		a.Limit = 20
	}
	t := m.index()
	v := m.viewOf(s) // only what the agent's profile has (profile.go)
	late := m.lateBackends(v)
	if strings.TrimSpace(a.Query) == "" {
		return m.searchMiss(m.catalogFor(s), "search_tools needs a query: words that say what the tool should do", late), nil
	}
	items, now := t.cat.tools.items, m.catalogFor(s)
	if e, ok := now.tools.lookup(strings.TrimSpace(a.Query)); ok {
		// A name this agent has for a tool (fitnames.go): the index knows
		// the tool by its full name.
		a.Query = e.full
	}
	if a.Backend != "" {
		name, why := backendNamed(v.members(m.members()), a.Backend)
		if why != "" {
			return m.searchMiss(now, why, late), nil
		}
		a.Backend = name
	}
	hits := t.ix.Search(a.Query, a.Limit, func(i int) bool {
		e := items[i]
		if a.Backend != "" && e.mem.spec.Name != a.Backend || pinned(e) {
			return false
		}
		// The index may be of the catalog before: only what the agent can
		// call now (a backend down or filtered since is not found).
		cur, ok := now.tools.lookup(e.item.Name)
		return ok && cur.mem == e.mem
	})
	if len(hits) == 0 {
		return m.searchMiss(now, fmt.Sprintf("no tool matches %q", a.Query), late), nil
	}
	found := make([]foundTool, 0, len(hits))
	var names []string
	var text strings.Builder
	for _, h := range hits {
		e, _ := now.tools.lookup(items[h.Doc].item.Name) // the session's name of it
		tool := e.item
		found = append(found, foundTool{Name: tool.Name, Title: tool.Title, Description: tool.Description, InputSchema: tool.InputSchema,
			OutputSchema: tool.OutputSchema, Annotations: tool.Annotations, Backend: e.mem.spec.Name})
		names = append(names, tool.Name)
		desc, _, _ := strings.Cut(tool.Description, "\n")
		fmt.Fprintf(&text, "%s (%s): %s\n", tool.Name, e.mem.spec.Name, desc)
	}
	text.WriteString(m.foundJoin(s, names))
	if len(late) > 0 {
		fmt.Fprintf(&text, " Still starting, not searched yet: %s.", strings.Join(late, ", "))
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text.String()}},
		StructuredContent: map[string]any{"tools": found},
	}, nil
}

// searchMiss is search_tools' answer when it finds nothing: a tool error
// that lists the backends and their tool counts, for the agent to try
// again.
func (m *Mux) searchMiss(cat *catalog, why string, late []string) *mcp.CallToolResult {
	counts := map[string]int{}
	var order []string
	for _, e := range cat.tools.items {
		if counts[e.mem.spec.Name] == 0 {
			order = append(order, e.mem.spec.Name)
		}
		counts[e.mem.spec.Name]++
	}
	var sb strings.Builder
	sb.WriteString(why)
	if !strings.HasSuffix(why, "?") {
		sb.WriteString(".")
	}
	sb.WriteString(" The backends and their tools:")
	for _, name := range order {
		fmt.Fprintf(&sb, " %s (%d),", name, counts[name])
	}
	out := strings.TrimSuffix(sb.String(), ",") + "."
	if len(late) > 0 {
		out += " Still starting: " + strings.Join(late, ", ") + "."
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: out}}}
}

// backendNamed is the backend of members that search_tools' "backend"
// argument names: by its name, or by its tools' prefix, which is what the
// argument's description tells the agent to write. Among members only (the
// session's view), a backend its profile hides is answered as one that
// does not exist; why says so, with the nearest name.
func backendNamed(members []*member, arg string) (name, why string) {
	var names []string
	for _, mem := range members {
		if mem.spec.Name == arg {
			return arg, ""
		}
		names = append(names, mem.spec.Name)
	}
	for _, mem := range members {
		if mem.spec.EffectivePrefix() == arg {
			return mem.spec.Name, ""
		}
	}
	why = fmt.Sprintf("no backend %q in this session", arg)
	if near := config.Closest(arg, names); near != "" {
		why += fmt.Sprintf("; did you mean %q?", near)
	}
	return "", why
}

// lateBackends are the backends of the view v still starting.
func (m *Mux) lateBackends(v *view) []string {
	var out []string
	for _, mem := range v.members(m.members()) {
		mem.mu.Lock()
		state := mem.state
		mem.mu.Unlock()
		if state == stateStarting {
			out = append(out, mem.spec.Name)
		}
	}
	return out
}

// calledTool notes that s called name: a tool it found joins its working
// set, and it is told its list changed.
func (m *Mux) calledTool(s *session, name string) {
	if s != nil && s.working.noteCalled(name) {
		m.workingSetChanged(s)
	}
}

// foundJoin adds what a search found to the working set of s (telling the
// agent its list changed), and says how to call them.
func (m *Mux) foundJoin(s *session, names []string) string {
	if s != nil && s.working.noteFound(names) {
		m.workingSetChanged(s)
	}
	t := traitsOf(s)
	switch {
	case m.toolListMode(s) != config.ToolListSearch:
		return "Call one by its name, with arguments matching its inputSchema."
	case t.Relists:
		return "They are in your tool list now: call one by its name, with arguments matching its inputSchema."
	case t.ListChanged:
		return "Call one by its name once your tool list shows it, with arguments matching its inputSchema; until then through call_read_only_tool (tools whose annotations say readOnlyHint: true) or call_tool (any tool)."
	}
	return "Call one through call_read_only_tool (tools whose annotations say readOnlyHint: true) or call_tool (any tool), with arguments matching its inputSchema."
}

// workingSetChanged tells s, in search mode, that its tool list changed.
func (m *Mux) workingSetChanged(s *session) {
	if m.toolListMode(s) != config.ToolListSearch || !traitsOf(s).ListChanged {
		return
	}
	if p := listChangedParams(s, kindTools, &mcp.ToolListChangedParams{}); p != nil {
		m.deliver(s, "notifications/tools/list_changed", p)
	}
}

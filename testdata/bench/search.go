//go:build linux

package main

// The search_tools rows (issue 23: "search_tools p50 ≤ 5 ms inside mcp-mux
// at 4,000 tools"): mcp-mux with tool_list = "search" over fixtures that
// list the real tools of testdata/toolsearch/catalog.json (416 tools of 20
// npm servers, -catalog), one of them (~400 tools) and ten (~4,000: copies
// whose backends are renamed, github2, github3, ..., as mux/search's
// synthetic catalogs are; -catalog-copy), over stdio, one caller. The
// queries are the tasks of tasks.json in turn. There is no direct column:
// a backend has no search_tools.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// searchCopies are the sizes measured: fixtures listing the catalog.
var searchCopies = []int{1, 10}

// Metric keys of the search rows, per number of copies.
func kSearchP50(n int) string    { return fmt.Sprintf("search_p50_%d", n) }
func kSearchP99(n int) string    { return fmt.Sprintf("search_p99_%d", n) }
func kSearchTools(n int) string  { return fmt.Sprintf("search_tools_%d", n) }
func kSearchReady(n int) string  { return fmt.Sprintf("search_ready_%d", n) }
func kSearchMisses(n int) string { return fmt.Sprintf("search_misses_%d", n) }
func kSearchCPU(n int) string    { return fmt.Sprintf("search_cpu_%d", n) }
func kSearchRSS(n int) string    { return fmt.Sprintf("search_peak_rss_%d", n) }

// searchInputs are the catalog's path and what the rows need of it and of
// the tasks, read once.
var searchInputs struct {
	once    sync.Once
	err     error
	catalog string   // path of catalog.json
	first   string   // its first tool's name, e.g. filesystem__read_file
	backend string   // that tool's backend
	tools   int      // how many tools it has
	queries []string // the tasks of tasks.json
}

func loadSearchInputs() error {
	in := &searchInputs
	in.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			in.err = err
			return
		}
		dir := filepath.Join(root, "testdata", "toolsearch")
		in.catalog = filepath.Join(dir, "catalog.json")
		var cat struct {
			Tools []struct {
				Backend string
				Tool    struct{ Name string }
			}
		}
		var tasks []struct{ Task string }
		for path, v := range map[string]any{in.catalog: &cat, filepath.Join(dir, "tasks.json"): &tasks} {
			data, err := os.ReadFile(path)
			if err == nil {
				err = json.Unmarshal(data, v)
			}
			if err != nil {
				in.err = fmt.Errorf("search rows: %w", err)
				return
			}
		}
		if len(cat.Tools) == 0 || len(tasks) == 0 {
			in.err = fmt.Errorf("search rows: no tools in catalog.json or no tasks in tasks.json")
			return
		}
		in.first, in.backend, in.tools = cat.Tools[0].Tool.Name, cat.Tools[0].Backend, len(cat.Tools)
		for _, t := range tasks {
			in.queries = append(in.queries, t.Task)
		}
	})
	return in.err
}

// searchFixture is the k-th (from 1) fixture listing the catalog, as a
// backend of mcp-mux that shows only the catalog's tools (all have "__" in
// their names; the fixture's own tools have not).
func searchFixture(k int) fixtureSpec {
	return fixtureSpec{
		name: fmt.Sprintf("fx%d", k),
		args: []string{"-resources", "0", "-catalog", searchInputs.catalog, "-catalog-copy", strconv.Itoa(k)},
		toml: "tools = ['*__*']\n",
	}
}

// searchKnown is the name the agent calls the first catalog tool of the
// k-th fixture by: what the warm-up searches for.
func searchKnown(k int) string {
	name := searchInputs.first
	if rest, ok := strings.CutPrefix(name, searchInputs.backend+"__"); ok && k > 1 {
		name = fmt.Sprintf("%s%d__%s", searchInputs.backend, k, rest)
	}
	return toolName(muxed, searchFixture(k).name, name)
}

// searchRun measures the search rows, at each size of searchCopies.
func (b *bench) searchRun(ctx context.Context, m mode, s sample) error {
	if err := loadSearchInputs(); err != nil {
		return err
	}
	for _, n := range searchCopies {
		if err := b.searchAt(ctx, m, n, s); err != nil {
			return err
		}
	}
	return nil
}

// searchAt starts mcp-mux in search mode over n catalog fixtures, waits
// until its index has every backend's tools, warms up, then times
// latencyN search_tools calls, one at a time.
func (b *bench) searchAt(ctx context.Context, m mode, n int, s sample) error {
	var fs []fixtureSpec
	for k := 1; k <= n; k++ {
		fs = append(fs, searchFixture(k))
	}
	p, err := b.startMuxWith(m, "tool_list = \"search\"\n", fs)
	if err != nil {
		return err
	}
	c, err := connect(ctx, p)
	if err != nil {
		p.stop(time.Second)
		return err
	}
	defer c.close()

	// The index is built when a search first needs it, then again, in the
	// background, after each change of the catalog (each backend that
	// arrives); a search meanwhile uses the index before. It is complete
	// once a search finds a tool of every backend.
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := 0
		for k := 1; k <= n; k++ {
			names, _, err := c.search(ctx, searchKnown(k))
			if err != nil {
				return err
			}
			if !slices.Contains(names, searchKnown(k)) {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			return c.fail("waiting for the search index", fmt.Errorf("a search for its own name does not find a tool of %d of %d backends", missing, n))
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s[kSearchReady(n)] = time.Since(p.started).Seconds()

	// How many tools there are, as a search for nothing says (it lists
	// every backend with its count of tools).
	want := n * searchInputs.tools
	_, miss, err := c.search(ctx, "")
	if err != nil {
		return err
	}
	got := 0
	for _, sub := range regexp.MustCompile(`\((\d+)\)`).FindAllStringSubmatch(miss, -1) {
		v, _ := strconv.Atoi(sub[1])
		got += v
	}
	if got != want {
		b.warn(fmt.Sprintf("%s: search rows: %d backends should have %d tools, an empty search_tools says %d (%q)", m, n, want, got, miss))
	}
	s[kSearchTools(n)] = float64(got)

	q := searchInputs.queries
	for i := range b.warmup {
		if _, _, err := c.search(ctx, q[i%len(q)]); err != nil {
			return err
		}
	}
	times := make([]time.Duration, b.latencyN)
	misses := 0
	pid := p.cmd.Process.Pid
	cpu0, err := readStat(pid)
	if err != nil {
		return fmt.Errorf("%s: reading its CPU time: %w", m, err)
	}
	for i := range times {
		t := time.Now()
		names, _, err := c.search(ctx, q[i%len(q)])
		times[i] = time.Since(t)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			misses++
		}
	}
	cpu1, err := readStat(pid)
	if err != nil {
		return fmt.Errorf("%s: reading its CPU time: %w", m, err)
	}
	s[kSearchCPU(n)] = (cpu1.cpu - cpu0.cpu).Seconds() / float64(len(times))
	rss, err := peakRSS(pid)
	if err != nil {
		return fmt.Errorf("%s: reading its peak RSS: %w", m, err)
	}
	s[kSearchRSS(n)] = float64(rss)
	s[kSearchP50(n)], s[kSearchP99(n)] = percentile(times, 50), percentile(times, 99)
	s[kSearchMisses(n)] = float64(misses)
	if misses > 0 {
		b.warn(fmt.Sprintf("%s: search rows: %d of %d queries over %d backends found nothing", m, misses, len(times), n))
	}
	return nil
}

// search calls search_tools with query: the names it found, best first,
// or, if it found none (a tool error), its text.
func (c *client) search(ctx context.Context, query string) (names []string, miss string, err error) {
	ctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": query}})
	if err != nil {
		return nil, "", c.fail("tools/call search_tools "+strconv.Quote(query), err)
	}
	if res.IsError {
		for _, ct := range res.Content {
			if t, ok := ct.(*mcp.TextContent); ok {
				miss += t.Text
			}
		}
		return nil, miss, nil
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var found struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(raw, &found); err != nil || len(found.Tools) == 0 {
		return nil, "", c.fail("tools/call search_tools "+strconv.Quote(query), fmt.Errorf("no structuredContent.tools in a result that is not an error: %s", raw))
	}
	for _, t := range found.Tools {
		names = append(names, t.Name)
	}
	return names, "", nil
}

// startMuxWith is start for a mcp-mux, with muxLines added to [mux].
func (b *bench) startMuxWith(m mode, muxLines string, fixtures []fixtureSpec) (*proc, error) {
	seq := nextSeq()
	cfg := filepath.Join(b.dir, fmt.Sprintf("mux-%d.toml", seq))
	if err := os.WriteFile(cfg, muxConfigWith(b.fixture, muxLines, fixtures), 0o600); err != nil {
		return nil, fmt.Errorf("writing the mcp-mux config: %w", err)
	}
	bin := b.mux
	if m == before {
		bin = b.before
	}
	return b.launch(m, fmt.Sprintf("%s-%d", m, seq), []string{bin, "--config", cfg}, nil, "")
}

// printSearch is the table of the search rows.
func (b *bench) printSearch(w io.Writer) {
	fmt.Fprintf(w, "### search_tools\n\n")
	fmt.Fprintf(w, "mcp-mux with `tool_list = \"search\"` over fixtures listing the %d real tools of testdata/toolsearch/catalog.json "+
		"(20 npm servers; 10 backends: copies with renamed servers), over stdio, one caller, limit 5; the queries are the %d tasks "+
		"of tasks.json in turn, %d searches per row after %d to warm up, once a search finds every backend's tools. "+
		"direct: — (a backend has no search_tools).\n\n",
		searchInputs.tools, len(searchInputs.queries), b.latencyN, b.warmup)
	fmt.Fprintln(w, "| metric | direct | mcp-mux | target | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, n := range searchCopies {
		tools := "~" + count(float64(n*searchInputs.tools))
		if v, ok := b.median(muxed, kSearchTools(n)); ok {
			tools = count(v)
		}
		backends := "1 backend"
		if n > 1 {
			backends = fmt.Sprintf("%d backends", n)
		}
		cell := func(key string, unit func(float64) string) (string, float64, bool) {
			v, ok := b.median(muxed, key)
			if !ok {
				return "—", 0, false
			}
			return unit(v), v, true
		}
		c, v, ok := cell(kSearchP50(n), dur)
		met := ""
		if ok {
			met = "no"
			if v <= 0.005 {
				met = "yes"
			}
		}
		fmt.Fprintf(w, "| search_tools p50, %s tools (%s) | — | %s | ≤ 5 ms | %s |\n", tools, backends, c, met)
		c, _, _ = cell(kSearchP99(n), dur)
		fmt.Fprintf(w, "| … p99 | — | %s | — | |\n", c)
		c, _, _ = cell(kSearchCPU(n), dur)
		fmt.Fprintf(w, "| … mcp-mux's CPU per search (user+sys over the timed searches) | — | %s | — | |\n", c)
		c, _, _ = cell(kSearchRSS(n), mb)
		fmt.Fprintf(w, "| … mcp-mux's peak RSS (VmHWM) | — | %s | — | |\n", c)
		c, _, _ = cell(kSearchReady(n), dur)
		fmt.Fprintf(w, "| … start → the first search that finds every backend's tools | — | %s | — | |\n", c)
	}
}

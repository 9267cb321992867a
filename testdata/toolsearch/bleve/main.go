// Command bleve measures Bleve (github.com/blevesearch/bleve/v2) on the
// same catalog and dev tasks as mux/search, for the choice between it and
// an engine of our own: the same fields and weights (name, title,
// description, parameters, server), names split on _ - . and case as ours
// are, Bleve's "en" analyzer (stop words, Porter stemmer), a disjunction of
// one match query per field. It prints recall@1, @5 and MRR on the dev
// split, and build time and search latency at 400, 4,000 and 40,000 tools.
// It is a module of its own, so mcp-mux does not depend on Bleve.
//
//	cd testdata/toolsearch/bleve && go run .
//
// The 40,000-tool build takes minutes.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
)

var dir = func() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(self)) + "/"
}()

type doc struct {
	Name, Title, Description, Params, Server string
}

var camel = regexp.MustCompile(`([a-z0-9])([A-Z])`)

func split(s string) string {
	s = camel.ReplaceAllString(s, "$1 $2")
	return strings.NewReplacer("_", " ", "-", " ", ".", " ").Replace(s)
}

func params(schema json.RawMessage) string {
	var root any
	json.Unmarshal(schema, &root)
	var sb strings.Builder
	var walk func(v any, d int)
	walk = func(v any, d int) {
		m, ok := v.(map[string]any)
		if !ok || d > 3 {
			return
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, p := range props {
				sb.WriteString(split(k) + " ")
				if pm, ok := p.(map[string]any); ok {
					if s, ok := pm["description"].(string); ok {
						sb.WriteString(s + " ")
					}
				}
				walk(p, d+1)
			}
		}
		walk(m["items"], d+1)
	}
	walk(root, 0)
	return sb.String()
}

func main() {
	data, _ := os.ReadFile(dir + "catalog.json")
	var cat struct {
		Backends []struct{ Name, Server, Instructions string }
		Tools    []struct {
			Backend string
			Tool    json.RawMessage
		}
	}
	json.Unmarshal(data, &cat)
	about := map[string]string{}
	for _, b := range cat.Backends {
		first, _, _ := strings.Cut(b.Instructions, "\n")
		f := strings.Fields(first)
		if len(f) > 24 {
			f = f[:24]
		}
		about[b.Name] = b.Server + " " + strings.Join(f, " ")
	}
	var docs []doc
	var names []string
	for _, t := range cat.Tools {
		var tool struct {
			Name, Title, Description string
			InputSchema              json.RawMessage
			Annotations              struct{ Title string }
		}
		json.Unmarshal(t.Tool, &tool)
		title := tool.Title
		if title == "" {
			title = tool.Annotations.Title
		}
		own := strings.TrimPrefix(tool.Name, t.Backend+"__")
		docs = append(docs, doc{Name: split(own), Title: title, Description: tool.Description, Params: params(tool.InputSchema), Server: split(t.Backend) + " " + about[t.Backend]})
		names = append(names, tool.Name)
	}
	var tasks []struct{ Task, Tool, Split string }
	data, _ = os.ReadFile(dir + "tasks.json")
	json.Unmarshal(data, &tasks)

	build := func(n int) (bleve.Index, []string, time.Duration) {
		m := bleve.NewIndexMapping()
		dm := bleve.NewDocumentMapping()
		for _, f := range []string{"Name", "Title", "Description", "Params", "Server"} {
			fm := mapping.NewTextFieldMapping()
			fm.Analyzer = "en"
			fm.Store = false
			fm.IncludeTermVectors = false
			dm.AddFieldMappingsAt(f, fm)
		}
		m.DefaultMapping = dm
		ix, err := bleve.NewMemOnly(m)
		if err != nil {
			panic(err)
		}
		start := time.Now()
		b := ix.NewBatch()
		var ns []string
		for i := 0; i < n; i++ {
			d := docs[i%len(docs)]
			name := names[i%len(docs)]
			if i >= len(docs) {
				k := i / len(docs)
				name = fmt.Sprintf("%s%d", name, k)
				d.Server = fmt.Sprintf("copy%d ", k) + d.Server
			}
			b.Index(name, d)
			ns = append(ns, name)
		}
		ix.Batch(b)
		return ix, ns, time.Since(start)
	}
	search := func(ix bleve.Index, q string) []string {
		var qs []query.Query
		for f, boost := range map[string]float64{"Name": 3, "Title": 2, "Description": 1, "Params": 0.3, "Server": 1} {
			mq := bleve.NewMatchQuery(q)
			mq.SetField(f)
			mq.SetBoost(boost)
			qs = append(qs, mq)
		}
		req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), 20, 0, false)
		req.SortBy([]string{"-_score", "_id"})
		res, err := ix.Search(req)
		if err != nil {
			panic(err)
		}
		var out []string
		for _, h := range res.Hits {
			out = append(out, h.ID)
		}
		return out
	}
	ix, _, dur := build(len(docs))
	fmt.Println("build 416:", dur)
	var r1, r5, mrr, n float64
	for _, t := range tasks {
		if t.Split != "dev" {
			continue
		}
		n++
		hits := search(ix, t.Task)
		if i := slices.Index(hits, t.Tool); i >= 0 {
			if i == 0 {
				r1++
			}
			if i < 5 {
				r5++
			}
			mrr += 1 / float64(i+1)
		}
	}
	fmt.Printf("bleve dev: recall@1 %.2f recall@5 %.2f MRR %.3f (%v tasks)\n", r1/n, r5/n, mrr/n, n)
	for _, size := range []int{400, 4000, 40000} {
		ix, _, dur := build(size)
		var times []time.Duration
		for i := 0; i < 500; i++ {
			s := time.Now()
			search(ix, tasks[i%len(tasks)].Task)
			times = append(times, time.Since(s))
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		fmt.Printf("bleve %d tools: build %v (%.0f ms/1k), search p50 %v p95 %v\n", size, dur.Round(time.Millisecond), float64(dur.Milliseconds())*1000/float64(size), times[len(times)/2], times[len(times)*95/100])
	}
}

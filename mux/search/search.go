// Package search finds tools for a request in words: the engine behind
// mcp-mux's search_tools, over every backend's catalog.
//
// It is BM25F, of our own: each tool is a document of five fields, its name
// (split on _ - . and case), its title, its description, its parameters
// (names and descriptions from the input schema) and its server (the
// backend's name and a line about it), each with its own weight and length
// normalization, so a word in a tool's name counts for more than the same
// word deep in a parameter's description, and "on GitLab" or "with
// Puppeteer" picks the server: a backend whose name the query says has its
// tools put first. Words are stemmed lightly; a query loses its stopwords,
// and its URLs and paths become what they say about the tool (it takes a
// URL, a file, a directory: matched against parameter names) instead of
// "https", "com" and path segments; a small table of synonyms adds, at a
// lower weight, the other words for the common verbs and nouns
// (find/search/lookup, create/add/new, remove/delete, folder/directory,
// ...); a word no tool has is tried as two that tools have (sitemap).
// A request that reads (a question, "show me ...") puts the tools whose name
// reads (get, list, search) before those that change (create, put,
// delete), and one that changes the other way round; of changes, one that
// makes (add, remember) puts those that remove after, and the other way
// round (intent.go). A pair of coordinates in a query stands for a
// latitude and a longitude, as a URL for a URL.
// Deprecated tools come after their replacements. A query that is a tool's
// name, or the start of one, ranks those tools first.
//
// An Index is immutable: the catalog changing means a new one (New is
// cheap: see BenchmarkNew). Search is deterministic: the same docs and query
// give the same hits in the same order (ties by name).
package search

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
)

// Doc is one tool as the search sees it.
type Doc struct {
	Name        string          // as the agent calls it (prefixed), e.g. "github__create_issue"
	Tool        string          // the backend's own name of it, e.g. "create_issue"
	Title       string          // the tool's title (or its annotations' title), if any
	Description string          // the tool's description
	InputSchema json.RawMessage // the tool's inputSchema as sent (parameter names and descriptions are searched)
	Backend     string          // the backend's name in the config, e.g. "github"
	About       string          // one line about the backend: its serverInfo title/name and the first line of its instructions
}

// Hit is a result: the index into the docs given to New, and the score.
type Hit struct {
	Doc   int
	Score float64
}

// The fields of a document, and what each is worth.
const (
	fName = iota
	fTitle
	fDesc
	fParams
	fServer
	nFields
)

// params are the scoring's parameters; defaults is what New uses (tuned on
// the dev split of testdata/toolsearch/tasks.json).
type params struct {
	weight   [nFields]float64 // BM25F field weights
	b        [nFields]float64 // length normalization per field
	k1       float64
	synonym  float64 // weight of a synonym's words relative to the query's own
	marker   float64 // weight of the parameter names (=url, =path, =file) a URL or path of the query stands for
	aboutMax int     // words of About indexed
	named    float64 // added to each tool of a backend the query names (its share of the name's words)
	obsolete float64 // factor of a tool whose description says it is deprecated
	cover    float64 // weight of the share of a tool's name (its words by idf) that the query says
	action   float64 // factor of a tool that reads when the query changes, or the other way round (intent.go)
	opposite float64 // factor of a tool that removes when the query makes, or the other way round (intent.go)
	plain    bool    // the baseline: one field, no stemming, no query processing
}

var defaults = params{
	weight:   [nFields]float64{fName: 3, fTitle: 2, fDesc: 1, fParams: 0.3, fServer: 1},
	b:        [nFields]float64{fName: 0.6, fTitle: 0.3, fDesc: 0.75, fParams: 0.75, fServer: 0.3},
	k1:       1.2,
	synonym:  0.6,
	marker:   2,
	aboutMax: 24,
	named:    8,
	obsolete: 0.6,
	cover:    1,
	action:   0.75,
	opposite: 0.75,
}

// posting is one document's part of a term's score: BM25F's saturated,
// field-weighted term frequency, idf included.
type posting struct {
	doc    int32
	impact float32
}

// Index is an immutable index of docs, safe for concurrent use.
type Index struct {
	p        params
	names    []string // each doc's Name, lower case
	tools    []string // each doc's Tool, lower case
	rank     []int32  // rank[doc] = its place in the docs sorted by Name, for ties
	terms    map[string]int32
	postings [][]posting
	scratch  sync.Pool // *[]float64, len(docs)
	// backends are the docs' backends: each one's name as stemmed words,
	// and its docs.
	backends []backend
	// backendOf is each doc's backend (an index into backends).
	backendOf []int32
	// factor is each doc's score factor (deprecated tools: p.obsolete).
	factor []float32
	// action is what each doc's name says it does: actRead, actWrite or
	// actNone (intent.go); sense, of a change, whether it makes or removes
	// (senseCreate, senseDelete or senseNone).
	action, sense []int8
}

type backend struct {
	words []string
	docs  []int32
}

// New indexes docs. It takes about 30 ms of CPU per 1,000 tools (15 to 20
// ms for the 416 tools of testdata/toolsearch), and the index keeps about
// 400 KiB per 1,000 tools (see BenchmarkNew). The docs may be changed or dropped
// after it returns.
func New(docs []Doc) *Index { return build(docs, defaults) }

func build(docs []Doc, p params) *Index {
	n := len(docs)
	ix := &Index{p: p, terms: map[string]int32{}, names: make([]string, n), tools: make([]string, n), factor: make([]float32, n), action: make([]int8, n), sense: make([]int8, n), backendOf: make([]int32, n)}
	// Each doc's terms, in the order first seen, with their frequency in
	// each field (entries[start[i]:start[i+1]] are doc i's), and each
	// field's length; then per field the average length, for BM25F's
	// normalization. Terms are numbered as first seen.
	type entry struct {
		term int32
		tf   [nFields]float32
	}
	entries := make([]entry, 0, 48*n) // about what the real catalog has
	start := make([]int, n+1)
	lens := make([][nFields]float32, n)
	var total [nFields]float64
	var df []int32
	slot := map[int32]int{} // term -> its entry, for the doc at hand
	count := func(i, f int, w string) {
		t, ok := ix.terms[w]
		if !ok {
			t = int32(len(df))
			ix.terms[w] = t
			df = append(df, 0)
		}
		e, ok := slot[t]
		if !ok {
			e = len(entries)
			slot[t] = e
			entries = append(entries, entry{term: t})
			df[t]++
		}
		entries[e].tf[f]++
		lens[i][f]++
	}
	var buf []string
	byName := map[string]int{}
	for i, d := range docs {
		start[i] = len(entries)
		clear(slot)
		ix.factor[i] = 1
		ix.names[i], ix.tools[i] = strings.ToLower(d.Name), strings.ToLower(d.Tool)
		add := func(f int, text string) {
			buf = p.indexWords(buf[:0], text)
			for _, w := range buf {
				count(i, f, w)
			}
		}
		ptext, pnames := paramText(d.InputSchema)
		if p.plain {
			add(fDesc, d.Name+" "+d.Title+" "+d.Description+" "+ptext)
		} else {
			if deprecated(d.Description) {
				ix.factor[i] = float32(p.obsolete)
			}
			b, ok := byName[d.Backend]
			if !ok {
				b = len(ix.backends)
				byName[d.Backend] = b
				ix.backends = append(ix.backends, backend{words: p.indexWords(nil, d.Backend)})
			}
			ix.backends[b].docs = append(ix.backends[b].docs, int32(i))
			ix.backendOf[i] = int32(b)
			tool := d.Tool
			if tool == "" {
				tool = d.Name
			}
			var verb string
			ix.action[i], verb = toolAction(tool)
			ix.sense[i] = verbSense(verb)
			add(fName, tool)
			add(fTitle, d.Title)
			add(fDesc, d.Description)
			add(fParams, ptext)
			for _, name := range pnames {
				for _, w := range words(buf[:0], name) {
					count(i, fParams, paramMark+stem(w))
				}
			}
			prefix := strings.TrimSuffix(d.Name, d.Tool)
			add(fServer, d.Backend+" "+prefix+" "+firstWords(d.About, p.aboutMax))
		}
		for f := range total {
			total[f] += float64(lens[i][f])
		}
	}
	start[n] = len(entries)
	var avg [nFields]float64
	for f := range avg {
		avg[f] = max(total[f]/float64(max(n, 1)), 1)
	}
	idf := make([]float64, len(df))
	for t, c := range df {
		idf[t] = math.Log(1 + (float64(n)-float64(c)+0.5)/(float64(c)+0.5))
	}
	// Each posting's impact, doc by doc, so each list is in doc order.
	ix.postings = make([][]posting, len(df))
	for t, c := range df {
		ix.postings[t] = make([]posting, 0, c)
	}
	for i := range n {
		doc := entries[start[i]:start[i+1]]
		// The name's words by idf: a query that says all of them names
		// the tool ("merge pull request": merge_pull_request), one that
		// says its rarest word most of it.
		var nameIDF float64
		for _, e := range doc {
			if e.tf[fName] > 0 {
				nameIDF += idf[e.term]
			}
		}
		for _, e := range doc {
			var tf float64
			for f := range nFields {
				if e.tf[f] > 0 {
					tf += p.weight[f] * float64(e.tf[f]) / (1 - p.b[f] + p.b[f]*float64(lens[i][f])/avg[f])
				}
			}
			impact := idf[e.term] * tf * (p.k1 + 1) / (tf + p.k1)
			if e.tf[fName] > 0 {
				impact += p.cover * idf[e.term] / nameIDF
			}
			ix.postings[e.term] = append(ix.postings[e.term], posting{doc: int32(i), impact: float32(impact)})
		}
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return strings.Compare(docs[a].Name, docs[b].Name) })
	ix.rank = make([]int32, n)
	for r, d := range order {
		ix.rank[d] = int32(r)
	}
	ix.scratch.New = func() any { s := make([]float64, n); return &s }
	return ix
}

// Len is the number of docs indexed.
func (ix *Index) Len() int { return len(ix.names) }

// Bonuses that put a query naming a tool above every score of words.
const (
	exactBonus  = 1e6
	prefixBonus = 1e5
)

// Search returns at most limit hits for query, best first, deterministic
// (ties by Name), keeping only docs for which keep(i) is true (keep may be
// nil). Only docs that match a word of the query, or whose name the query
// is or begins, are hits.
func (ix *Index) Search(query string, limit int, keep func(doc int) bool) []Hit {
	if limit <= 0 || len(ix.names) == 0 {
		return nil
	}
	// The scores, zero for each doc, and zero again when Put back: every
	// doc touched is reset as it is read below. (Not a deferred Put: a
	// keep that panics leaves scores that must not be reused.)
	sp := ix.scratch.Get().(*[]float64)
	scores := *sp
	var touched []int32
	terms := ix.decompound(ix.p.queryTerms(query))
	named := ix.namedBackends(query, terms)
	var by []int // the named backends a term names
	for _, qt := range terms {
		t, ok := ix.terms[qt.term]
		if !ok {
			continue
		}
		by = by[:0]
		for j := range named {
			named[j].max = 0
			if slices.Contains(named[j].terms, qt.term) {
				by = append(by, j)
			}
		}
	postings:
		for _, ps := range ix.postings[t] {
			// A word that names a backend says which server, not which of
			// its tools: each of them gets the most it gives any, below,
			// so a tool whose description repeats the server's name is
			// not put first for it.
			for _, j := range by {
				if ix.backendOf[ps.doc] == named[j].b {
					named[j].max = max(named[j].max, float64(ps.impact))
					continue postings
				}
			}
			if scores[ps.doc] == 0 {
				touched = append(touched, ps.doc)
			}
			scores[ps.doc] += qt.weight * float64(ps.impact)
		}
		for _, j := range by {
			for _, d := range ix.backends[named[j].b].docs {
				if scores[d] == 0 {
					touched = append(touched, d)
				}
				scores[d] += qt.weight * named[j].max
			}
		}
	}
	act, sense := actNone, senseNone
	if !ix.p.plain {
		var verb string
		act, verb = queryAction(query)
		sense = verbSense(verb)
	}
	for _, d := range touched {
		scores[d] *= float64(ix.factor[d])
		if act != actNone && ix.action[d] != actNone && ix.action[d] != act {
			scores[d] *= ix.p.action
		}
		if sense != senseNone && ix.sense[d] != senseNone && ix.sense[d] != sense {
			scores[d] *= ix.p.opposite
		}
	}
	// A backend the query names ("on GitLab", "with Puppeteer"): its tools
	// first, in proportion to how much of its name the query says
	// (playwright is all of "playwright", half of "ea-playwright").
	for _, nb := range named {
		b := ix.backends[nb.b]
		bonus := ix.p.named * float64(nb.said) / float64(len(b.words))
		for _, d := range b.docs {
			if scores[d] == 0 {
				touched = append(touched, d)
			}
			scores[d] += bonus
		}
	}
	if name := strings.ToLower(strings.TrimSpace(query)); name != "" && !strings.ContainsAny(name, " \t\n") && !ix.p.plain {
		for i := range ix.names {
			bonus := 0.0
			switch {
			case ix.names[i] == name || ix.tools[i] == name:
				bonus = exactBonus
			case len(name) >= 3 && (strings.HasPrefix(ix.names[i], name) || strings.HasPrefix(ix.tools[i], name)):
				bonus = prefixBonus
			default:
				continue
			}
			if scores[i] == 0 {
				touched = append(touched, int32(i))
			}
			scores[i] += bonus
		}
	}
	hits := make([]Hit, 0, min(limit, len(touched)))
	less := func(a, b Hit) int { // best first: higher score, then by name
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(ix.rank[a.Doc], ix.rank[b.Doc])
	}
	for _, d := range touched {
		s := scores[d]
		scores[d] = 0
		if s <= 0 || keep != nil && !keep(int(d)) {
			continue
		}
		h := Hit{Doc: int(d), Score: s}
		if len(hits) == limit {
			if less(h, hits[limit-1]) >= 0 {
				continue
			}
			hits = hits[:limit-1]
		}
		i, _ := slices.BinarySearchFunc(hits, h, less)
		hits = slices.Insert(hits, i, h)
	}
	ix.scratch.Put(sp)
	return hits
}

// namedBackend is a backend the query names: how many of its name's words
// it says, and the query's terms that name it: those words, and the parts
// of a word of the query that is one of them (git and hub of GitHub).
type namedBackend struct {
	b     int32
	said  int
	terms []string
	max   float64 // Search's: the most a term gives one of its docs
}

func (ix *Index) namedBackends(query string, terms []qterm) []namedBackend {
	var out []namedBackend
	for bi, b := range ix.backends {
		var nb namedBackend
		for _, w := range b.words {
			if slices.ContainsFunc(terms, func(t qterm) bool { return t.term == w && t.weight == 1 }) {
				nb.said++
				nb.terms = append(nb.terms, w)
			}
		}
		if nb.said == 0 {
			continue
		}
		nb.b = int32(bi)
		for _, f := range strings.Fields(query) {
			ws := words(nil, f)
			if len(ws) < 2 || !slices.Contains(nb.terms, stem(ws[len(ws)-1])) {
				continue
			}
			for _, w := range ws[:len(ws)-1] {
				if w = stem(w); !slices.Contains(nb.terms, w) {
					nb.terms = append(nb.terms, w)
				}
			}
		}
		out = append(out, nb)
	}
	return out
}

// decompound adds, for a word of the query that no tool has, the two words
// it is made of when tools have both (sitemap: site map, heapsnapshot:
// heap snapshot), and for two words of the query, the one word tools have
// that they make (function app: functionapp), at a synonym's weight.
func (ix *Index) decompound(terms []qterm) []qterm {
	if ix.p.plain {
		return terms
	}
	n := len(terms)
	for i := 0; i+1 < n; i++ {
		a, b := terms[i], terms[i+1]
		if a.weight != 1 || b.weight != 1 || !isASCIILetters(a.term) || !isASCIILetters(b.term) {
			continue
		}
		for _, w := range []string{a.term + b.term, stem(a.term + b.term)} {
			if _, ok := ix.terms[w]; ok {
				if !slices.ContainsFunc(terms, func(t qterm) bool { return t.term == w }) {
					terms = append(terms, qterm{w, ix.p.synonym}) // not GitHub's github again
				}
				break
			}
		}
	}
	for _, qt := range terms[:n] {
		w := qt.term
		if qt.weight != 1 || len(w) < 6 || !isASCIILetters(w) {
			continue
		}
		if _, ok := ix.terms[w]; ok {
			continue
		}
		// The most even split first: for one of 8 letters, 4+4, 3+5, 5+3.
		for d := 0; d <= len(w)/2-3; d++ {
			found := false
			for _, i := range []int{len(w)/2 - d, len(w)/2 + d} {
				if i < 3 || len(w)-i < 3 {
					continue
				}
				l, r := stem(w[:i]), stem(w[i:])
				_, okl := ix.terms[l]
				_, okr := ix.terms[r]
				if okl && okr {
					terms = append(terms, qterm{l, ix.p.synonym}, qterm{r, ix.p.synonym})
					found = true
					break
				}
			}
			if found {
				break
			}
		}
	}
	return terms
}

// deprecated reports whether a tool's description says, in its first
// sentence or so, that the tool is deprecated.
func deprecated(desc string) bool {
	return strings.Contains(strings.ToLower(desc[:min(len(desc), 120)]), "deprecated")
}

// qterm is a word of a query and its weight.
type qterm struct {
	term   string
	weight float64
}

// firstWords is s up to its n-th word.
func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}

// paramMark marks a term that is a word of a parameter's name (=url).
const paramMark = "="

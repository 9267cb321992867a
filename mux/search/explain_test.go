package search

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestExplain prints, for MCP_MUX_EXPLAIN="query", the top hits and what
// each query term gave them: a tool for tuning, skipped otherwise.
func TestExplain(t *testing.T) {
	q := os.Getenv("MCP_MUX_EXPLAIN")
	if q == "" {
		t.Skip("MCP_MUX_EXPLAIN not set")
	}
	docs := loadDocs(t)
	ix := New(docs)
	terms := ix.decompound(ix.p.queryTerms(q))
	t.Logf("terms: %v", terms)
	for _, h := range ix.Search(q, 6, nil) {
		var parts []string
		for _, qt := range terms {
			id, ok := ix.terms[qt.term]
			if !ok {
				continue
			}
			for _, p := range ix.postings[id] {
				if int(p.doc) == h.Doc {
					parts = append(parts, qt.term+"="+strconv.FormatFloat(qt.weight*float64(p.impact), 'f', 2, 64))
				}
			}
		}
		t.Logf("%-45s %6.2f  %s", docs[h.Doc].Name, h.Score, strings.Join(parts, " "))
	}
}

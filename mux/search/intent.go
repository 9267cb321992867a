package search

import (
	"strings"
	"sync"
)

// What a request does to its things, and what a tool does: read them (get,
// list, search) or change them (create, update, delete). A tool's name
// mostly starts with its verb (get_issue, create_issue, kv_put), and so do
// requests ("show me README.md", "add Carol ..."); a question ("what value
// is stored under ...?", "which migrations have been applied?", "are there
// open issues ...?") reads, whatever verbs it uses to describe the state it
// asks about. A tool whose verb is of the other kind than the request's
// comes after those of the same kind: the words a request uses for the
// state ("stored", "applied", "open") are the names of the tools that
// change it (kv_put, apply_migration, create_issue).

const (
	actNone  int8 = iota // no verb of either kind: navigate, click, geocode, query docs
	actRead              // get, list, search, read
	actWrite             // create, add, update, delete, send
)

// readVerbs and writeVerbs are the verbs, stemmed, of each kind: those of
// tool names, and the words requests use for them.
var readVerbs = sync.OnceValue(func() map[string]bool {
	return stemSet(`get list read retrieve search find query show view fetch check inspect
	look lookup see display describe count browse explore download obtain enumerate`)
})

var writeVerbs = sync.OnceValue(func() map[string]bool {
	return stemSet(`create add make put set post send write update edit modify change patch
	delete remove drop erase destroy push merge fork apply deploy redeploy move rename upload publish
	reply approve close archive restore pause reset rebase rollback revert record remember memorize
	save store insert append rewrite replace clear schedule submit commit assign invite
	wipe forget purge confirm accept`)
})

func stemSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[stem(w)] = true
	}
	return m
}

// httpMethods, written as such, make a request about HTTP ("make a GET
// request", "send a DELETE").
var httpMethods = sync.OnceValue(func() map[string]bool { return setOf(`GET POST PUT PATCH DELETE HEAD OPTIONS`) })

// questionWords start a question: one that reads. An auxiliary does only
// before its subject ("are there ...", "did the checks pass"; not "do a
// search"); "how do I ...", "how to ..." ask for the thing done, so its
// verb says which kind.
var questionWords = sync.OnceValue(func() map[string]bool { return setOf(`what which who whom whose where when how why`) })

var auxiliaries = sync.OnceValue(func() map[string]bool { return setOf(`did does do is are was were has have had`) })

var subjects = sync.OnceValue(func() map[string]bool {
	return setOf(`i you we they it he she there my our your their the any this that these those anyone anything`)
})

var howTo = sync.OnceValue(func() map[string]bool { return setOf(`do can could should would to`) })

// verbKind is the kind of a stemmed word: actRead, actWrite or actNone.
func verbKind(w string) int8 {
	switch {
	case readVerbs()[w]:
		return actRead
	case writeVerbs()[w]:
		return actWrite
	}
	return actNone
}

// toolAction is the kind of a tool's name: that of its first word of
// either kind (kv_put: put, API-get-block-children: get), or, when that
// is an HTTP method, of the next word if it is a verb too
// (API-post-search: searches). verb is that word, stemmed.
func toolAction(tool string) (kind int8, verb string) {
	ws := words(nil, tool)
	for i, w := range ws {
		if k := verbKind(stem(w)); k != actNone {
			if i+1 < len(ws) && httpMethods()[strings.ToUpper(w)] {
				if k2 := verbKind(stem(ws[i+1])); k2 != actNone {
					return k2, stem(ws[i+1])
				}
			}
			return k, stem(w)
		}
	}
	return actNone, ""
}

// queryAction is the kind of a request: a question reads; otherwise that
// of its first verb of either kind. A clause starts the request anew after
// a colon or a comma ("playwright: screenshot ...", "in Chrome DevTools,
// which requests ..."). verb is that verb, stemmed ("" for a question).
func queryAction(q string) (kind int8, verb string) {
	clauseStart := true
	for _, f := range strings.Fields(q) {
		if httpMethods()[strings.Trim(f, `"'(),.:;`)] {
			return actNone, "" // an HTTP request: its method says what it does, not the verb around it
		}
	}
	fields := strings.Fields(q)
	next := func(i int) string { // the first word of fields[i]
		if i < len(fields) {
			if ws := words(nil, fields[i]); len(ws) > 0 {
				return ws[0]
			}
		}
		return ""
	}
	for fi, f := range fields {
		if kind, _ := classify(f); kind != "" {
			clauseStart = false
			continue
		}
		ws := words(nil, f)
		for i, w := range ws {
			if clauseStart && i == 0 {
				switch {
				case w == "how" && howTo()[next(fi+1)]:
					// how do I ..., how to ...: the verb that follows
				case questionWords()[w], auxiliaries()[w] && subjects()[next(fi+1)]:
					return actRead, ""
				}
			}
			if k := verbKind(stem(w)); k != actNone {
				return k, stem(w)
			}
		}
		if len(ws) > 0 {
			clauseStart = false
		}
		if strings.HasSuffix(f, ":") || strings.HasSuffix(f, ",") {
			clauseStart = true
		}
	}
	return actNone, ""
}

// Of the verbs that change, those that make a thing and those that remove
// one are opposites: a request that adds ("remember that ...", "record
// ...") is not for a tool that deletes (delete_observations), nor the other
// way round, though both change. Updating is neither.
var createVerbs = sync.OnceValue(func() map[string]bool {
	return stemSet(`create add make post send write put set insert append record remember memorize
	save store upload push publish submit commit invite fork`)
})

var deleteVerbs = sync.OnceValue(func() map[string]bool { return stemSet(`delete remove drop erase destroy wipe forget purge clear`) })

const (
	senseNone int8 = iota
	senseCreate
	senseDelete
)

// verbSense is senseCreate, senseDelete or senseNone for a stemmed verb.
func verbSense(w string) int8 {
	switch {
	case createVerbs()[w]:
		return senseCreate
	case deleteVerbs()[w]:
		return senseDelete
	}
	return senseNone
}

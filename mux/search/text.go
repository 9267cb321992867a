package search

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The text side of the search: words out of names, descriptions and
// queries, one light stem each, the words a query says nothing with, and
// what a URL or a path in a query is worth.

// words appends to dst the words of s: lower case, split on everything
// that is not a letter or a digit (so on _ - . / and spaces) and on case
// changes (createIssue, HTTPServer: create issue, http server). A word that
// case splits is also given whole after its parts (GitHub: git hub github,
// DevTools: dev tools devtools), since it is also a name written in one
// piece (the backend github). Digits stay with their letters: d1, r2, s3,
// v5 are names.
func words(dst []string, s string) []string {
	start, whole := -1, -1 // the current part, and the run of letters and digits it is in
	var prev rune          // the previous rune of the current word
	lower := func(w string) string {
		if hasUpper(w) {
			return strings.ToLower(w)
		}
		return w
	}
	flush := func(end int) {
		if start >= 0 && end > start {
			dst = append(dst, lower(s[start:end]))
		}
		start = -1
	}
	endRun := func(end int) {
		flush(end)
		if whole >= 0 && end > whole && len(dst) > 0 && dst[len(dst)-1] != lower(s[whole:end]) {
			dst = append(dst, lower(s[whole:end]))
		}
		whole = -1
	}
	for i, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			endRun(i)
			prev = 0
			continue
		}
		if start < 0 {
			start, whole, prev = i, i, r
			continue
		}
		if unicode.IsUpper(r) {
			// aB: a new word at B. ABc: a new word at B (HTTPServer).
			next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
			if unicode.IsLower(prev) || unicode.IsUpper(prev) && unicode.IsLower(next) {
				flush(i)
				start = i
			}
		}
		prev = r
	}
	endRun(len(s))
	return dst
}

// hasUpper reports whether w may have an upper-case letter (any non-ASCII
// byte counts as one: ToLower decides).
func hasUpper(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return true
		}
	}
	return false
}

// stem is a light stemmer for English: plurals, -ed and -ing, a final e,
// and the -ion of -ation, -etion and -ution, so that create, creates,
// created, creating and creation meet (creat), as do generate and
// generation, file and files (fil), entity and entities (entity), match
// and matches (match). It is far lighter than Porter's: besides those
// nouns of verbs it never merges words that differ in more than their
// inflection (function, selection and connection are kept).
func stem(w string) string {
	if len(w) <= 3 || !isASCIILetters(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	if len(w) > 6 && (strings.HasSuffix(w, "ation") || strings.HasSuffix(w, "etion") || strings.HasSuffix(w, "ution")) {
		w = w[:len(w)-3] // generation, deletion, execution: generat, delet, execut, as generate, delete, execute
	}
	switch {
	case strings.HasSuffix(w, "ied") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "eed"):
	case strings.HasSuffix(w, "ed") && len(w) > 4 && hasVowel(w[:len(w)-2]):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ing") && len(w) > 5 && hasVowel(w[:len(w)-3]):
		w = w[:len(w)-3]
	}
	// A doubled final consonant (committ, runn, add) is one, but ll, ss
	// and zz stay (call, access, fizz).
	if n := len(w); n > 2 && w[n-1] == w[n-2] && !isVowel(w[n-1]) && !strings.ContainsRune("lsz", rune(w[n-1])) {
		w = w[:n-1]
	}
	if n := len(w); n > 3 && w[n-1] == 'e' {
		w = w[:n-1]
	}
	return w
}

func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

func isVowel(c byte) bool { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' }

func hasVowel(w string) bool {
	for i := 0; i < len(w); i++ {
		if isVowel(w[i]) || i > 0 && w[i] == 'y' {
			return true
		}
	}
	return false
}

// The word sets of this package are made on first use, not at init: every
// mcp-mux process runs this package's init, and most never search (a
// session that relays to the shared process, a status). Made at init they
// cost each launch 118 KB of heap (GODEBUG=inittrace=1).

// stopwords say nothing about which tool: they are dropped from the index
// and from queries.
var stopwords = sync.OnceValue(func() map[string]bool {
	return setOf(`a an and are as at be by can do does for from has have how i if in into is it its
	me my of on or our please so that the their them then there these this those to us use using via was we
	what when where which who whose why will with would you your all any each every some just also than
	should must may want need`)
})

func setOf(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// indexWords appends the terms of a field's text: its words less the
// stopwords, stemmed (the baseline: its words as they are).
func (p *params) indexWords(dst []string, text string) []string {
	start := len(dst)
	if p.plain {
		return plainWords(dst, text)
	}
	dst = words(dst, text)
	out := dst[:start]
	stop := stopwords()
	for _, w := range dst[start:] {
		if !stop[w] {
			out = append(out, stem(w))
		}
	}
	return out
}

// queryTerms are the terms of a query with their weights: its words, less
// stopwords, stemmed; URLs and paths replaced by what they say; the
// synonyms of each word at a lower weight. A term is there once, at the
// highest weight it has, in the order first seen (so sums are made in the
// same order each time).
func (p *params) queryTerms(q string) []qterm {
	var out []qterm
	seen := map[string]int{}
	add := func(t string, w float64) {
		if i, ok := seen[t]; ok {
			out[i].weight = max(out[i].weight, w)
			return
		}
		seen[t] = len(out)
		out = append(out, qterm{t, w})
	}
	if p.plain {
		for _, w := range plainWords(nil, q) {
			add(w, 1)
		}
		return out
	}
	var text strings.Builder
	for _, f := range strings.Fields(q) {
		kind, keep := classify(f)
		switch kind {
		case "":
			text.WriteString(f)
			if keys()[strings.ToLower(strings.Trim(f, `"'.,;:!?()`))] {
				add("key", p.synonym)
				add("press", p.synonym)
			}
		case "number": // #17: an issue's, a pull request's
			add(paramMark+"number", p.marker)
		case "channel": // #general
			add(paramMark+"channel", p.marker)
			add("channel", p.synonym)
		case "url":
			add(paramMark+"url", p.marker)
			add(paramMark+"uri", p.marker)
			text.WriteString(keep)
		case "path": // a file's if its last part has an extension, else a directory's
			add(paramMark+"path", p.marker)
			last := f[strings.LastIndexByte(strings.TrimRight(f, "/"), '/')+1:]
			if strings.Contains(last, ".") {
				add(paramMark+stem("file"), p.marker)
			} else {
				add(paramMark+stem("directory"), p.marker)
			}
			text.WriteString(keep)
		case "code": // JavaScript or the like: what runs it
			for _, t := range []string{"javascript", "script", "code", "expression"} {
				add(stem(t), p.synonym)
			}
		default: // file, pattern: a file's path
			add(paramMark+stem(kind), p.marker)
			add(paramMark+stem("file"), p.marker)
			text.WriteString(keep)
		}
		text.WriteByte(' ')
	}
	// A pair of coordinates (48.8584, 2.2945): the tool takes a latitude
	// and a longitude.
	if hasCoordinates(q) {
		add(paramMark+stem("latitude"), p.marker)
		add(paramMark+stem("longitude"), p.marker)
		add(stem("coordinates"), p.synonym)
	}
	// "Which ... do I have?", "what ... are there?": a list.
	if lq := " " + strings.ToLower(q) + " "; (strings.Contains(lq, " which ") || strings.Contains(lq, " what ")) &&
		(strings.Contains(lq, " have") || strings.Contains(lq, " are there") || strings.Contains(lq, " exist")) {
		add("list", p.synonym)
	}
	// "Which requests ...", "what models ...": a plural asked after is a list.
	if ws := strings.Fields(strings.ToLower(q)); len(ws) > 1 {
		for i, w := range ws[:len(ws)-1] {
			if w = strings.Trim(w, `,.:;"'`); w != "which" && w != "what" {
				continue
			}
			if n := strings.Trim(ws[i+1], `,.:;?!"'()`); len(n) > 3 && isLetters(n) && strings.HasSuffix(n, "s") && !strings.HasSuffix(n, "ss") && stem(n) != n {
				add("list", p.synonym)
			}
		}
	}
	var own []string
	for _, w := range words(nil, text.String()) {
		if len(w) > 1 && !stopwords()[w] {
			own = append(own, stem(w))
		}
	}
	for _, w := range own {
		add(w, 1)
	}
	for i, w := range own {
		keys := []string{w}
		if i+1 < len(own) {
			keys = append(keys, w+" "+own[i+1])
		}
		for _, k := range keys {
			for _, s := range synonyms()[k] {
				for _, t := range s {
					add(t, p.synonym)
				}
			}
		}
	}
	return out
}

// classify tells what a whitespace-separated piece of a query is: a URL
// ("url": keep is its host's telling labels: github of github.com, docs
// and stripe of docs.stripe.com, none of www, com, localhost, example), a
// glob ("pattern"), a path ("path": /var/log/app.log, ./src, ~/x,
// config/settings.yaml), a file name ("file": README.md, report.md), code
// ("code": document.title, alert(1)), an issue's or pull request's number
// ("number": #17), a channel ("channel": #general), or words ("": as is).
// The segments of paths and URLs and the names of channels are left out:
// they name the user's things, not the tool, and match other servers'
// parameters.
func classify(f string) (kind, keep string) {
	t := strings.Trim(f, `"'()[]{}<>,;!?`)
	lower := strings.ToLower(t)
	if len(t) > 1 && t[0] == '#' {
		if isNumberish(t[1:]) {
			return "number", ""
		}
		if isLetters(strings.NewReplacer("-", "", "_", "").Replace(lower[1:])) {
			return "channel", ""
		}
	}
	if i := strings.Index(lower, "://"); i > 0 && isScheme(lower[:i]) {
		return "url", hostWords(lower[i+3:])
	}
	if strings.HasPrefix(lower, "www.") {
		return "url", hostWords(lower)
	}
	if strings.ContainsAny(t, "*?") && strings.ContainsAny(t, "./") {
		return "pattern", ""
	}
	if strings.Contains(t, "/") {
		// A domain with a path (github.com/golang/go) is a URL; a path
		// otherwise, unless it is words around a slash ("and/or").
		host, _, _ := strings.Cut(lower, "/")
		if dot := strings.LastIndexByte(host, '.'); dot > 0 && tlds()[host[dot+1:]] {
			return "url", hostWords(lower)
		}
		if strings.HasPrefix(t, "/") || strings.HasPrefix(t, "./") || strings.HasPrefix(t, "../") ||
			strings.HasPrefix(t, "~/") || strings.Count(t, "/") > 1 || strings.Contains(t, ".") {
			return "path", ""
		}
		return "", f
	}
	if dot := strings.LastIndexByte(lower, '.'); dot > 0 && dot < len(lower)-1 && !strings.ContainsAny(lower, "@:") {
		ext := lower[dot+1:]
		if tlds()[ext] && strings.Count(lower, ".") >= 1 && !fileExts()[ext] {
			return "url", hostWords(lower)
		}
		switch {
		case fileExts()[ext]:
			return "file", ""
		case isCode(t):
			return "code", ""
		case isLetters(ext) && len(ext) <= 4 && !isNumberish(lower):
			return "file", ""
		}
	}
	call := strings.TrimRight(f, ",;.?!")
	if i := strings.IndexByte(call, '('); i > 0 && strings.HasSuffix(call, ")") && isIdent(call[:i]) {
		return "code", "" // alert(1), document.querySelector('a')
	}
	return "", f
}

// hasCoordinates reports whether q has a latitude and a longitude in
// decimal degrees, one after the other: 48.8584, 2.2945 or -33.86 151.21.
func hasCoordinates(q string) bool {
	f := strings.Fields(strings.NewReplacer(",", " ", ";", " ", "(", " ", ")", " ", "?", " ").Replace(q))
	for i := 0; i+1 < len(f); i++ {
		if isDegrees(f[i], 90) && isDegrees(f[i+1], 180) {
			return true
		}
	}
	return false
}

// isDegrees reports whether s is a decimal number of at most limit (in
// absolute value) with at least two decimals.
func isDegrees(s string, limit float64) bool {
	s = strings.TrimSuffix(strings.TrimSuffix(s, "°"), ".")
	dot := strings.IndexByte(s, '.')
	if dot < 1 || len(s)-dot-1 < 2 {
		return false
	}
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && math.Abs(v) <= limit
}

// isCode reports whether s looks like an expression: identifiers with dots
// (document.title, window.location.href).
func isCode(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if len(p) < 2 || !isIdent(p) {
			return false
		}
	}
	return true
}

// isIdent reports whether s is an identifier (dots allowed: a.b.c).
func isIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '$' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != "" && s[0] != '.'
}

func isScheme(s string) bool {
	switch s {
	case "http", "https", "ws", "wss", "ftp", "file", "postgres", "postgresql", "mysql", "redis", "mongodb", "s3", "gs", "git", "ssh":
		return true
	}
	return false
}

// hostWords are the labels of a URL's host that can tell something: not
// www, not the top-level domain(s), not placeholders.
func hostWords(rest string) string {
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, "?")
	host, _, _ = strings.Cut(host, "#")
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	if colon := strings.LastIndexByte(host, ':'); colon >= 0 {
		host = host[:colon]
	}
	labels := strings.Split(host, ".")
	var keep []string
	for i, l := range labels {
		if l == "" || l == "www" || l == "localhost" || l == "example" || isNumberish(l) {
			continue
		}
		if i == len(labels)-1 && len(labels) > 1 || tlds()[l] && i >= len(labels)-2 && len(labels) > 2 {
			continue // com; co of co.uk
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, " ")
}

func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}

func isNumberish(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// keys are the names of keyboard keys a request may say (hit Enter).
var keys = sync.OnceValue(func() map[string]bool {
	return setOf(`enter tab escape esc backspace arrowup arrowdown arrowleft arrowright pageup pagedown f5 ctrl+c ctrl+v`)
})

var tlds = sync.OnceValue(func() map[string]bool {
	return setOf(`com org net io dev app ai co so sh me info biz edu gov uk de fr jp cn ru nl eu us ca au in tech xyz cloud site page`)
})

var fileExts = sync.OnceValue(func() map[string]bool {
	return setOf(`txt md markdown json yaml yml toml xml csv tsv log js mjs cjs ts tsx jsx py go rs java kt rb php c h cc cpp hpp cs swift sh bash zsh ps1 html htm css scss sql png jpg jpeg gif svg webp pdf doc docx xls xlsx ppt pptx zip tar gz tgz env ini cfg conf lock wasm mp3 mp4 wav`)
})

// synonyms maps a stemmed word, or two (joined by a space), to the
// (stemmed) words or phrases a request may use for the same thing: "pr" is
// "pull request", "look up" is "search". See synonymGroups.
var synonyms = sync.OnceValue(func() map[string][][]string { return synonymMap(synonymGroups) })

func synonymMap(groups [][]string) map[string][][]string {
	m := map[string][][]string{}
	for _, g := range groups {
		var stems [][]string
		for _, phrase := range g {
			var s []string
			for _, w := range words(nil, phrase) {
				s = append(s, stem(w))
			}
			stems = append(stems, s)
		}
		for i, phrase := range stems {
			key := strings.Join(phrase, " ")
			for j, other := range stems {
				if i != j && !slices.Equal(other, phrase) {
					m[key] = append(m[key], other)
				}
			}
		}
	}
	return m
}

// synonymGroups: each a set of words or phrases for one thing. Kept small
// and general: the common verbs of tool names and the nouns that have two
// common names.
var synonymGroups = [][]string{
	{"find", "search", "lookup", "look up", "query", "seek", "locate"},
	{"create", "add", "new", "make", "insert", "open", "set up", "setup"},
	{"remove", "delete", "drop", "erase", "destroy"},
	{"get", "fetch", "retrieve", "read", "show", "view", "obtain", "display"},
	{"list", "enumerate", "all"},
	{"update", "edit", "modify", "change", "patch", "alter", "rewrite"},
	{"run", "execute", "exec", "invoke", "perform"},
	{"send", "post", "publish", "tell", "notify", "announce"},
	{"navigate", "go", "go to", "visit", "browse", "goto", "open"},
	{"image", "picture", "photo", "img"},
	{"page", "webpage", "website", "site", "web"},
	{"directory", "folder", "dir"},
	{"repository", "repo", "project"},
	{"pr", "pull request"},
	{"mr", "merge request"},
	{"issue", "bug", "ticket"},
	{"comment", "reply", "respond", "answer"},
	{"coordinates", "latitude", "longitude", "lat", "lng", "geocode"},
	{"database", "db"},
	{"remember", "memorize", "memory", "observation"},
	{"docs", "documentation", "doc", "manual"},
	{"vm", "virtual machine"},
	{"k8s", "kubernetes", "aks", "cluster"},
	{"cost", "price", "pricing"},
	{"emoji", "reaction", "react"},
	{"dialog", "popup", "alert", "confirm", "prompt"},
	{"entire", "whole", "everything", "complete", "full"},
	{"review", "approve"},
	{"monitor", "watch", "track"},
	{"revert", "rollback", "undo"},
	{"schedule", "cron", "periodic"},
	{"domain", "zone"},
	{"upload", "put"},
	{"put", "store", "save", "write", "set"},
	{"screenshot", "screen capture"},
	{"user agent", "useragent"},
	{"hover", "mouse over", "mouseover", "move the mouse"},
	{"press", "hit"},
	{"elevation", "altitude", "height", "sea level"},
	{"directions", "walking", "driving", "transit", "bicycling", "cycling"},
	{"script", "code", "source code"},
	{"size", "space", "big", "large", "bytes", "disk usage"},
	{"know", "knowledge", "remember", "memory", "fact"},
	{"click", "tap", "press"},
	{"select", "choose", "pick"},
	{"fork", "copy", "clone", "duplicate"},
	{"relation", "relationship", "connection", "link"},
	{"switch", "select", "activate", "focus"},
	{"download", "get", "fetch"},
	{"column", "field", "property", "attribute"},
	{"cli", "command line", "command"},
}

// plainWords are the baseline's words: lower case, split on everything that
// is not a letter or a digit, nothing else.
func plainWords(dst []string, s string) []string {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		dst = append(dst, strings.ToLower(w))
	}
	return dst
}

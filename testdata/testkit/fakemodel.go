package testkit

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A fake model API: an HTTP server that speaks one model API's dialect
// (fakemodel_*.go), answers each turn of the agent's conversation as a
// script says, and records every request, so that a test sees what the
// agent sent its model: the tools, the system text, the tool results.
// Requests that are not the conversation's turns (titles, summaries,
// token counts, routing) get a harmless answer and are recorded apart.

// ModelTool is one tool as the agent offered it to the model.
type ModelTool struct {
	// Namespace is the group the tool is in, where the dialect has one
	// (Codex sends each MCP server as a namespace of functions).
	Namespace   string
	Name        string
	Description string
	Schema      json.RawMessage // the parameters' JSON Schema as sent
}

// ModelRequest is one request the agent sent its model.
type ModelRequest struct {
	Path  string
	Body  []byte
	Tools []ModelTool
	// Texts are all the strings of the request's system text and
	// messages, in order: where server instructions and tool results are
	// looked for.
	Texts []string
	// Results are the outputs of tool calls the request carries, in
	// order, each as the dialect gives it to the model.
	Results []string
}

// Tool is the tool of r named name (in namespace ns, where the dialect
// has namespaces; "" matches any).
func (r *ModelRequest) Tool(ns, name string) (ModelTool, bool) {
	for _, t := range r.Tools {
		if t.Name == name && (ns == "" || t.Namespace == ns) {
			return t, true
		}
	}
	return ModelTool{}, false
}

// ModelReply is what the fake model answers a turn: a tool call, or text
// that ends the turn.
type ModelReply struct {
	Call *ModelCall
	Text string
}

// ModelCall is a tool call of the model's.
type ModelCall struct {
	Namespace string // Codex's namespace of the tool
	Name      string
	Args      map[string]any
}

// ModelScript answers the turn-th request of the conversation (0 first);
// reqs holds every turn so far, the current one last.
type ModelScript func(turn int, reqs []*ModelRequest) ModelReply

// FakeModel is a running fake model API.
type FakeModel struct {
	URL string // http://127.0.0.1:PORT, no trailing slash

	script  ModelScript
	dumpDir string

	mu    sync.Mutex
	turns []*ModelRequest
	side  []*ModelRequest
	n     int
}

// dialect parses one request of a model API and writes its answer.
type dialect interface {
	// parse reads req's tools, texts and results; turn says whether it is
	// a turn of the conversation (else a side request).
	parse(path string, body []byte) (req *ModelRequest, turn bool, err error)
	// answer writes reply; side is a side request's harmless answer.
	answer(w http.ResponseWriter, r *http.Request, body []byte, reply ModelReply, side bool, seq int)
}

// ModelDumpEnv names a directory where fake models write every request
// body they get (NNN-turn.json, NNN-side.json), to see what an agent sent.
const ModelDumpEnv = "MCP_MUX_MODEL_DUMP"

// dumpSeq tells apart the models of one test in ModelDumpEnv's directory.
var dumpSeq atomic.Int64

func startFakeModel(t testing.TB, d dialect, script ModelScript) *FakeModel {
	t.Helper()
	m := &FakeModel{script: script}
	if dir := os.Getenv(ModelDumpEnv); dir != "" {
		m.dumpDir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"), fmt.Sprintf("model%d", dumpSeq.Add(1)))
		os.MkdirAll(m.dumpDir, 0o755)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method != http.MethodPost {
			// Model lists and the like: an empty list is harmless.
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"data":[],"models":[]}`)
			return
		}
		req, turn, err := d.parse(r.URL.Path, body)
		if err != nil {
			http.Error(w, fmt.Sprintf("fake model: %v", err), http.StatusBadRequest)
			return
		}
		req.Path, req.Body = r.URL.Path, body
		m.mu.Lock()
		m.n++
		seq := m.n
		kind := "side"
		var reply ModelReply
		if turn {
			kind = "turn"
			m.turns = append(m.turns, req)
			reqs := append([]*ModelRequest(nil), m.turns...)
			m.mu.Unlock()
			reply = m.script(len(reqs)-1, reqs)
		} else {
			m.side = append(m.side, req)
			m.mu.Unlock()
		}
		if m.dumpDir != "" {
			os.WriteFile(filepath.Join(m.dumpDir, fmt.Sprintf("%03d-%s%s.json", seq, kind, strings.ReplaceAll(r.URL.Path, "/", "_"))), body, 0o644)
		}
		d.answer(w, r, body, reply, !turn, seq)
	}))
	t.Cleanup(srv.Close)
	m.URL = srv.URL
	return m
}

// Turns are the conversation's requests so far.
func (m *FakeModel) Turns() []*ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*ModelRequest(nil), m.turns...)
}

// Side are the requests that were not turns (titles, summaries...).
func (m *FakeModel) Side() []*ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*ModelRequest(nil), m.side...)
}

// sse writes one server-sent event (event may be "").
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data) // maps and strings: cannot fail
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func sseStart(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// argsJSON is a call's arguments as a JSON object's text.
func argsJSON(c *ModelCall) string {
	if c.Args == nil {
		return "{}"
	}
	b, _ := json.Marshal(c.Args)
	return string(b)
}

// strings of v, depth first: every string value of a decoded JSON value.
func allStrings(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case []any:
		for _, e := range x {
			allStrings(e, out)
		}
	case map[string]any:
		// Keys in the order the encoder gave them do not survive a map;
		// the order of texts matters little (they are searched).
		for _, k := range slices.Sorted(maps.Keys(x)) {
			allStrings(x[k], out)
		}
	}
}

// resultText is a tool result as the model sees it: a string as it is,
// anything else as its JSON.
func resultText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func rawJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

func str(v any) string { s, _ := v.(string); return s }

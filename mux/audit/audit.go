// Package audit writes mcp-mux's audit log ([mux] audit_log): one JSON
// line per tools/call, prompts/get and resources/read an agent made, with
// who made it, where it went, how long it took and how it ended.
//
// What a call's arguments were is the user's business, not the log's: a
// line names them, and holds their values only when the config opts in
// (audit_arguments). The file is created 0600 and appended to.
//
// The log never slows or fails a call: Record hands the line to one
// writer goroutine over a bounded queue, and drops it (counted) when the
// writer is that far behind; a write that fails is logged once, and the
// calls go on.
package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
)

// queueLen bounds the lines waiting for the writer: past it they are
// dropped (Dropped counts them).
const queueLen = 4096

// Entry is one audited request.
type Entry struct {
	Time    time.Time // when it was received
	Session string    // mux's id of the agent's session
	Agent   string    // the agent's name, as it gave it (clientInfo)
	Token   string    // the name of the [[token]] it came with over HTTP; never the value
	Backend string
	Method  string // tools/call, prompts/get or resources/read
	Target  string // the tool or prompt name the agent called, or the URI it read
	// Via is the wrapper the agent called Target through (call_tool,
	// call_read_only_tool): the approval it ran by was the wrapper's.
	Via      string
	Duration time.Duration
	Outcome  string
	// ArgNames are the arguments' names, sorted; Args their values,
	// only when the log keeps them (audit_arguments).
	ArgNames []string
	Args     json.RawMessage
}

// line is an Entry as the file has it.
type line struct {
	Time       string          `json:"time"`
	Session    string          `json:"session,omitempty"`
	Agent      string          `json:"agent,omitempty"`
	Token      string          `json:"token,omitempty"`
	Backend    string          `json:"backend"`
	Method     string          `json:"method"`
	Tool       string          `json:"tool,omitempty"`
	Prompt     string          `json:"prompt,omitempty"`
	URI        string          `json:"uri,omitempty"`
	Via        string          `json:"via,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	Outcome    string          `json:"outcome"`
	ArgNames   []string        `json:"argument_names,omitempty"`
	Args       json.RawMessage `json:"arguments,omitempty"`
}

// timeLayout is RFC 3339 with milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func (e *Entry) line() line {
	l := line{
		Time:    e.Time.UTC().Format(timeLayout),
		Session: e.Session, Agent: e.Agent, Token: e.Token, Backend: e.Backend, Method: e.Method, Via: e.Via,
		DurationMS: float64(e.Duration.Microseconds()) / 1000,
		Outcome:    e.Outcome,
		ArgNames:   e.ArgNames,
		Args:       e.Args,
	}
	switch e.Method {
	case "tools/call":
		l.Tool = e.Target
	case "prompts/get":
		l.Prompt = e.Target
	default:
		l.URI = e.Target
	}
	return l
}

// Log is an open audit log. Its writer goroutine runs until Close.
type Log struct {
	path      string
	withArgs  bool
	f         *os.File
	logger    *log.Logger
	dropped   atomic.Uint64
	failed    atomic.Bool // a write failed: logged once
	mu        sync.RWMutex
	closed    bool // guarded by mu: no more sends on queue
	queue     chan Entry
	writerEnd chan struct{}
}

// Open opens (creating it 0600) the audit log at path for appending and
// starts its writer. withArgs: lines hold the arguments' values too.
func Open(path string, withArgs bool, logger *log.Logger) (*Log, error) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit_log: %w", err)
	}
	l := &Log{path: path, withArgs: withArgs, f: f, logger: logger,
		queue: make(chan Entry, queueLen), writerEnd: make(chan struct{})}
	go l.write()
	return l, nil
}

// Path is the file the log writes.
func (l *Log) Path() string { return l.path }

// WithArgs reports whether lines hold the arguments' values.
func (l *Log) WithArgs() bool { return l.withArgs }

// Dropped is how many lines were dropped because the writer was behind.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Record queues e for the file, never waiting: a full queue drops it.
// After Close it does nothing.
func (l *Log) Record(e Entry) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return
	}
	select {
	case l.queue <- e:
	default:
		l.dropped.Add(1)
	}
}

// Close writes what is queued, stops the writer and closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.queue)
	l.mu.Unlock()
	<-l.writerEnd
	return l.f.Close()
}

// write is the writer goroutine: it writes what is queued, in one write
// per batch, until Close.
func (l *Log) write() {
	defer close(l.writerEnd)
	var buf []byte
	for e := range l.queue {
		buf = l.appendLine(buf[:0], &e)
		for more := true; more && len(buf) < 64<<10; {
			select {
			case e, ok := <-l.queue:
				if !ok {
					more = false
					break
				}
				buf = l.appendLine(buf, &e)
			default:
				more = false
			}
		}
		if _, err := l.f.Write(buf); err != nil && !l.failed.Swap(true) {
			l.logger.Error("audit log: a write failed; calls go on, and later failures are not logged", "path", l.path, "err", err)
		}
		if cap(buf) > 1<<20 {
			buf = nil // a batch of huge arguments: not kept
		}
	}
}

func (l *Log) appendLine(buf []byte, e *Entry) []byte {
	ln := e.line()
	if !l.withArgs {
		ln.Args = nil
	}
	data, err := json.Marshal(ln)
	if err != nil {
		// Arguments that are not JSON (they always are: the agent's
		// request was decoded) lose their values, not the line.
		ln.Args = nil
		data, _ = json.Marshal(ln)
	}
	buf = append(buf, data...)
	return append(buf, '\n')
}

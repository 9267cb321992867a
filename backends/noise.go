package backends

import (
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/log"
)

// noiseQuote bounds the first noise line as a start's error quotes it.
const noiseQuote = 120

// noiseReportEvery is how often, at most, the noise lines counted since the
// last warning are logged (tests shorten it).
var noiseReportEvery = time.Minute

// stdoutNoise counts the lines a backend prints on stdout that are not
// JSON-RPC. A server that logs to stdout prints one every few hundred
// milliseconds, and a warning for each buried the rest of the log: the
// first is logged as it is, the rest only counted, and the count is logged
// at most every noiseReportEvery and when the connection ends. It keeps the
// first line, cut, and two counters, however long the backend goes on.
type stdoutNoise struct {
	log   *log.Logger
	every time.Duration

	mu     sync.Mutex
	first  string      // the first line, cut to noiseQuote
	n      int         // lines in all
	logged int         // of them, the ones a warning accounted for
	timer  *time.Timer // set while a report is due
	ended  bool
}

func newStdoutNoise(logger *log.Logger) *stdoutNoise {
	return &stdoutNoise{log: logger, every: noiseReportEvery}
}

// add counts one noise line; err is why the decoder refused it, if it
// looked like JSON.
func (s *stdoutNoise) add(line []byte, err error) {
	s.mu.Lock()
	s.n++
	first := s.n == 1
	if first {
		s.first = truncate(string(line[:min(len(line), noiseQuote+utf8.UTFMax)]), noiseQuote)
		s.logged = 1
	} else if s.timer == nil && !s.ended {
		s.timer = time.AfterFunc(s.every, s.report)
	}
	s.mu.Unlock()
	if !first {
		return
	}
	kv := []any{"line", snippet(line)}
	if err != nil {
		kv = append(kv, "error", err)
	}
	s.log.Warn("noise on stdout (not JSON-RPC), skipped; more is counted, not logged line by line", kv...)
}

// report logs the lines counted since the last warning, if any.
func (s *stdoutNoise) report() {
	s.mu.Lock()
	s.timer = nil
	more, all := s.n-s.logged, s.n
	s.logged = s.n
	s.mu.Unlock()
	if more > 0 {
		s.log.Warn("more noise on stdout (not JSON-RPC), skipped", "lines", more, "in_all", all)
	}
}

// end reports what is left to report; later lines are only counted.
func (s *stdoutNoise) end() {
	s.mu.Lock()
	s.ended = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.report()
}

// seen is how many noise lines came, and the first one, cut.
func (s *stdoutNoise) seen() (n int, first string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.first
}

// noiseNote says, for a start's error, what the backend printed on stdout
// instead of JSON-RPC: a server that logs there never initializes, and its
// first line usually says why.
func (b *Backend) noiseNote() string {
	n, first := b.conn.noise.seen()
	switch n {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("; it printed on stdout instead of JSON-RPC: %q", first)
	}
	return fmt.Sprintf("; it printed on stdout instead of JSON-RPC: %q (and %d more lines)", first, n-1)
}

// StdoutNoise is how many lines the backend printed on stdout that were
// not JSON-RPC (each skipped); 0 for a remote backend.
func (b *Backend) StdoutNoise() int {
	b = b.real()
	if b.conn == nil {
		return 0
	}
	n, _ := b.conn.noise.seen()
	return n
}

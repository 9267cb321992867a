package backends

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// stderrLineMax is how much of one stderr line reaches the log and the
// crash report; the rest of a longer line is counted and dropped.
const stderrLineMax = 4096

// endStderr waits a moment for the stderr reader to read the last words
// and see EOF, then ends it: a grandchild that kept the pipe open must not
// keep a goroutine of ours alive once the backend is down.
func (b *Backend) endStderr() {
	if b.stderrDone == nil {
		return // remote: no process
	}
	select {
	case <-b.stderrDone:
	case <-time.After(stderrDrain):
		b.stderrR.Close() // unblocks the read: the pipe is polled
		<-b.stderrDone
	}
}

// stderrDrain is how long a backend's stderr is read after it went down.
const stderrDrain = 500 * time.Millisecond

// captureStderr logs the backend's stderr line by line, until EOF. It never
// stops reading early, whatever the backend writes: a reader that gave up
// would leave the backend blocked on a full pipe, or dead of SIGPIPE once
// the pipe is closed.
func (b *Backend) captureStderr(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, stderrLineMax)
	var line []byte // reused
	dropped := 0
	for {
		chunk, err := br.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if !full {
			chunk = trimEOL(chunk)
		}
		keep := min(len(chunk), stderrLineMax-len(line))
		line = append(line, chunk[:keep]...)
		dropped += len(chunk) - keep
		if full {
			continue // the same line goes on
		}
		if len(line) > 0 || dropped > 0 {
			b.stderrLine(line, dropped)
		}
		line, dropped = line[:0], 0
		if err != nil {
			return
		}
	}
}

func (b *Backend) stderrLine(line []byte, dropped int) {
	s := string(line)
	if dropped > 0 {
		whole := trimPartialRune(s)
		s = fmt.Sprintf("%s… [truncated: %d more bytes]", whole, dropped+len(s)-len(whole))
	}
	b.log.Info(s)
	b.mu.Lock()
	b.stderr = append(b.stderr, s)
	if len(b.stderr) > stderrKeep {
		b.stderr = b.stderr[len(b.stderr)-stderrKeep:]
	}
	b.mu.Unlock()
}

// truncate shortens s to at most n bytes, on a rune boundary, and marks the
// cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// trimPartialRune drops a rune cut in two at the end of s.
func trimPartialRune(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			break
		}
	}
	return s
}

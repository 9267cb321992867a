package config

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// Positions in the file for syntax errors, which the TOML library reports
// with a line of its lexer's (often the line after the error) and a
// column that belongs to neither line.

// offsetPosition is the line and column (in characters, both from 1) of
// byte offset off in data.
func offsetPosition(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return bytes.Count(data[:off], []byte{'\n'}) + 1, utf8.RuneCount(data[start:off]) + 1
}

// unclosedAt is where the innermost '[' or '{' still open at byte offset
// off of data was opened (strings and comments skipped), if one is.
func unclosedAt(data []byte, off int) (line, col int, open string, ok bool) {
	off = min(max(off, 0), len(data))
	var stack []int
	for i := 0; i < off; i++ {
		switch c := data[i]; c {
		case '#':
			for i < off && data[i] != '\n' {
				i++
			}
		case '"', '\'':
			i = stringEnd(data, i, off)
		case '[', '{':
			stack = append(stack, i)
		case ']', '}':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if len(stack) == 0 {
		return 0, 0, "", false
	}
	at := stack[len(stack)-1]
	line, col = offsetPosition(data, at)
	return line, col, string(data[at]), true
}

// stringEnd is the offset of the last byte of the TOML string that starts
// at data[i] (a quote), or the last offset before end if it does not end
// before it.
func stringEnd(data []byte, i, end int) int {
	q := data[i]
	multi := i+2 < end && data[i+1] == q && data[i+2] == q
	if multi {
		i += 3
		for ; i+2 < end; i++ {
			if q == '"' && data[i] == '\\' {
				i++
				continue
			}
			if data[i] == q && data[i+1] == q && data[i+2] == q {
				return i + 2
			}
		}
		return end - 1
	}
	for i++; i < end; i++ {
		switch {
		case q == '"' && data[i] == '\\':
			i++
		case data[i] == q, data[i] == '\n':
			return i
		}
	}
	return end - 1
}

// firstLineOfKey is the line where the key defined again at byte offset off
// (on line) was first set in the same table: the last earlier line that
// sets the same bare key name before a table header is crossed. 0 if none
// is found.
func firstLineOfKey(data []byte, off, line int) int {
	off = min(max(off, 0), len(data))
	rest := data[off:]
	end := bytes.IndexAny(rest, " \t=.")
	if end <= 0 {
		return 0
	}
	key := rest[:end]
	lines := bytes.Split(data[:off], []byte{'\n'})
	for n := len(lines) - 2; n >= 0; n-- { // lines[len-1] is the key's own line, up to the key
		l := bytes.TrimSpace(lines[n])
		if bytes.HasPrefix(l, []byte{'['}) {
			return 0
		}
		if bytes.HasPrefix(l, key) && len(l) > len(key) && strings.IndexByte(" \t=", l[len(key)]) >= 0 {
			return n + 1
		}
	}
	return 0
}

package mux

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport is the agent's side of mcp-mux: newline-delimited
// JSON-RPC on in and out, with a guard in front of the go-sdk. The SDK
// ends the whole session at the first line it cannot decode; the guard
// answers such a line itself, as JSON-RPC says (-32700 for invalid JSON,
// -32600 for JSON that is not a JSON-RPC message, or a batch, which MCP
// no longer has), and the session goes on. Lines over maxLine bytes are
// refused the same way.
func StdioTransport(in io.Reader, out io.Writer, maxLine int) mcp.Transport {
	w := &lockedWriter{w: out}
	return &mcp.IOTransport{
		Reader:        &guard{r: bufio.NewReaderSize(in, 64*1024), out: w, max: maxLine},
		Writer:        w,
		MaxLineLength: -1, // the guard enforces the limit, without ending the session
	}
}

// lockedWriter serializes whole-line writes of the SDK and of the guard.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

type guard struct {
	r       *bufio.Reader
	out     io.Writer
	max     int
	pending []byte // the rest of a valid line not yet read by the SDK
}

func (g *guard) Close() error { return nil }

func (g *guard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		line, err := g.readLine()
		if line != nil && g.admit(line) {
			g.pending = append(line, '\n')
		}
		if err != nil && len(g.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// errTooLong marks a line that exceeded the limit (and was discarded).
var errTooLong = errors.New("message too large")

// readLine returns the next line without its newline, or a nil line if it
// was over the limit (answered already).
func (g *guard) readLine() ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := g.r.ReadSlice('\n')
		if !tooLong && g.max > 0 && len(line)+len(chunk) > g.max+1 {
			tooLong = true
			line = nil
		}
		if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			g.reply(nil, jsonrpc.CodeInvalidRequest, "message larger than max_message_size")
			if err != nil {
				return nil, err
			}
			return nil, nil
		}
		return bytes.TrimSpace(line), err
	}
}

// admit reports whether line is a message the SDK can take; if not, it
// answers it.
func (g *guard) admit(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	if !json.Valid(line) {
		g.reply(nil, jsonrpc.CodeParseError, "Parse error: the message is not valid JSON")
		return false
	}
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if line[0] != '{' || json.Unmarshal(line, &probe) != nil {
		g.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: expected one JSON-RPC 2.0 object (batches are not supported)")
		return false
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		g.reply(validID(probe.ID), jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
		return false
	}
	return true
}

// validID returns id if it may be echoed in a response (string or number).
func validID(id json.RawMessage) json.RawMessage {
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9')) {
		return id
	}
	return nil
}

func (g *guard) reply(id json.RawMessage, code int64, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	g.out.Write(append(resp, '\n'))
}

// Command bridge serves Streamable HTTP of the current era (2026-07-28) at
// ADDR and forwards every request to CMD, a server of the handshake era on
// its stdio, doing no more than such a hop must: the HTTP floor of one
// process between a Go agent and a stdio server in the benchmark's go-sdk
// rows (testdata/bench), as the relay is the floor of the stdio rows.
//
// It answers server/discover from CMD's initialize result; it forwards any
// other request with its own id and without the request's _meta (whose
// keys the current era reserves describe the agent's session, not the
// bridge's with CMD), and adds to a result what the current era requires
// of it: resultType and the server's name in _meta. A notification from
// the agent is accepted and dropped. It has none of what makes a server
// of an agent's: no sessions, no server-to-client requests, no list
// hints, no limits. Only for the benchmark's cells.
//
// With -canned it answers tools/call itself, as CMD's echo would, without
// sending it on: what is left is the HTTP door alone (net/http, reading
// the request, writing the result), the part of a hop's cost that no
// routing or forwarding can remove.
//
//	bridge [-canned] ADDR CMD [ARGS...]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

func main() {
	canned := flag.Bool("canned", false, "answer tools/call without sending it to CMD")
	flag.Parse()
	if flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: bridge [-canned] ADDR CMD [ARGS...]")
		os.Exit(2)
	}
	// One thread, as mcp-mux serves (its threads.go): a process that waits
	// on pipes and sockets costs least so.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if err := run(flag.Arg(0), *canned, flag.Arg(1), flag.Args()[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "bridge:", err)
		os.Exit(1)
	}
}

// child is CMD's stdio session: requests go out whole under writeMu, each
// response comes back to the waiter of its id. mu guards only the ids, so
// that the reader never waits on a pipe write: a server blocked writing
// its stdout, while a request waits on its full stdin, would otherwise
// never be read again.
type child struct {
	writeMu sync.Mutex
	stdin   io.Writer

	mu      sync.Mutex
	next    int64
	waiting map[int64]chan []byte
}

var errGone = errors.New("the server exited")

// call sends method with params (JSON) and returns the response's line,
// or gives up when ctx ends.
func (c *child) call(ctx context.Context, method string, params json.RawMessage) ([]byte, error) {
	ch := make(chan []byte, 1)
	c.mu.Lock()
	if c.waiting == nil {
		c.mu.Unlock()
		return nil, errGone
	}
	c.next++
	id := c.next
	c.waiting[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.waiting != nil {
			delete(c.waiting, id)
		}
		c.mu.Unlock()
	}
	line := make([]byte, 0, len(params)+64)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = strconv.AppendInt(line, id, 10)
	line = append(line, `,"method":`...)
	line = strconv.AppendQuote(line, method)
	if len(params) > 0 {
		line = append(line, `,"params":`...)
		line = append(line, params...)
	}
	line = append(line, "}\n"...)
	c.writeMu.Lock()
	_, err := c.stdin.Write(line)
	c.writeMu.Unlock()
	if err != nil {
		forget()
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, errGone
		}
		return resp, nil
	case <-ctx.Done():
		forget() // a late response finds no waiter and is dropped
		return nil, ctx.Err()
	}
}

// read gives each response on r to its waiter, until r ends.
func (c *child) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var msg struct {
			ID     *int64 `json:"id"`
			Method string `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil || msg.Method != "" {
			continue // a notification, or a request the benchmark's server does not send
		}
		c.mu.Lock()
		ch := c.waiting[*msg.ID]
		delete(c.waiting, *msg.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- bytes.Clone(sc.Bytes())
		}
	}
	c.mu.Lock()
	for _, ch := range c.waiting {
		close(ch)
	}
	c.waiting = nil
	c.mu.Unlock()
}

func run(addr string, canned bool, name string, args []string) error {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { stdin.Close(); cmd.Wait() }() // the server ends on EOF
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	c := &child{stdin: stdin, waiting: map[int64]chan []byte{}}
	go c.read(stdout)

	data, err := c.call(context.Background(), "initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bridge","version":"0"}}`))
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var init struct {
		Result *struct {
			Capabilities json.RawMessage `json:"capabilities"`
			ServerInfo   json.RawMessage `json:"serverInfo"`
			Instructions string          `json:"instructions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &init); err != nil || init.Result == nil || init.Result.ServerInfo == nil {
		return fmt.Errorf("initialize: got %s", data)
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return err
	}
	// What every result gets first: the current era's members.
	resultHead := []byte(`{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` + string(init.Result.ServerInfo) + `}`)
	instructions, _ := json.Marshal(init.Result.Instructions)
	discover := append(bytes.Clone(resultHead), `,"supportedVersions":["2026-07-28"],"capabilities":`+string(init.Result.Capabilities)+`,"instructions":`+string(instructions)+`}`...)

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, "reading the body", http.StatusBadRequest)
			return
		}
		var req struct {
			ID     json.RawMessage            `json:"id"`
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
		}
		if json.Unmarshal(body, &req) != nil || req.Method == "" {
			http.Error(w, "not a JSON-RPC request", http.StatusBadRequest)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		out := append([]byte(`{"jsonrpc":"2.0","id":`), req.ID...)
		switch {
		case req.Method == "server/discover":
			out = append(append(out, `,"result":`...), discover...)
		case canned && req.Method == "tools/call":
			out = append(append(out, `,"result":`...), echo(resultHead, req.Params["arguments"])...)
		default:
			out = append(out, forward(r.Context(), c, req.Method, req.Params, resultHead)...)
		}
		out = append(out, '}')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.Write(out)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-stop:
		srv.Close()
		return nil
	case err := <-served:
		return err
	}
}

// echo is the fixture's echo result for args (its arguments as JSON
// text), with head's members first.
func echo(head []byte, args json.RawMessage) []byte {
	var compact bytes.Buffer
	if json.Compact(&compact, args) != nil || compact.Len() == 0 {
		compact.WriteString("null")
	}
	text, _ := json.Marshal(compact.String())
	return append(append(bytes.Clone(head), `,"content":[{"type":"text","text":`...), append(text, "}]}"...)...)
}

// forward sends method with params, without their _meta, to c, and returns
// the response's members after its id: its result with head first, or its
// error.
func forward(ctx context.Context, c *child, method string, params map[string]json.RawMessage, head []byte) []byte {
	delete(params, "_meta")
	var raw json.RawMessage
	if params != nil {
		raw, _ = json.Marshal(params)
	}
	data, err := c.call(ctx, method, raw)
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err == nil {
		err = json.Unmarshal(data, &resp)
	}
	res := bytes.TrimSpace(resp.Result)
	switch {
	case err != nil:
		return fmt.Appendf(nil, `,"error":{"code":-32603,"message":%q}`, "bridge: "+err.Error())
	case resp.Error != nil:
		return append([]byte(`,"error":`), resp.Error...)
	case len(res) < 2 || res[0] != '{':
		return []byte(`,"error":{"code":-32603,"message":"bridge: the server's result is not an object"}`)
	}
	out := append([]byte(`,"result":`), head...)
	if len(bytes.TrimSpace(res[1:len(res)-1])) > 0 {
		out = append(out, ',') // head's members, then the result's
	}
	return append(out, res[1:]...)
}

package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/instance"
)

// Multi-round-trip requests. In the current era (2026-07-28) a server that
// needs the client's input (an elicitation, a sampling, its roots) while it
// serves tools/call, prompts/get or resources/read answers input_required
// with the requests, and the client retries with the answers (and the
// server's requestState). In the handshake era the server sends the client
// those requests while the request is in flight. mcp-mux speaks each side's
// era and translates between them (forward.go calls what is here):
//
//   - a backend of the handshake era asks an agent of the current era: the
//     backend's request goes on (it is parked: parkedCall) while the agent
//     gets input_required with the backend's requests and a requestState of
//     mux's, unguessable and bound to the agent, the method and its target;
//     the agent's retry answers the backend's requests and gets the
//     backend's result, or the next round. A retry that never comes ends
//     with the request's max_request_time: the backend's requests get an
//     error and its call is cancelled.
//   - a backend of the current era asks an agent of the handshake era: mux
//     sends the agent the requests, as the backend would have, and retries
//     the backend with the answers, for as many rounds as it needs
//     (askAgent). The agent never sees input_required.
//   - between two sides of the current era, input_required and the retry
//     pass unchanged (the requestState is the backend's own).

// round is what an agent's retry carries: the answers to the requests of
// the last input_required, and its requestState.
type round struct {
	responses mcp.InputResponseMap
	state     string
}

// multiRound reports whether a request of method may be answered with
// input_required.
func multiRound(method string) bool {
	return method == "tools/call" || method == "prompts/get" || method == "resources/read"
}

// maxRounds bounds the rounds of input mux asks a handshake-era agent for
// on a current-era backend's behalf, as the go-sdk's own client does.
const maxRounds = 10

// inputOf reads what a backend's result asks for, if it is input_required:
// the requests and the state to send back.
func inputOf(res any) (reqs mcp.InputRequestMap, state string, ok bool) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case *mcp.GetPromptResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case *mcp.ReadResourceResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case json.RawMessage:
		if !bytes.Contains(r, []byte(`"input_required"`)) {
			return nil, "", false
		}
		var top struct {
			ResultType    string              `json:"resultType"`
			InputRequests mcp.InputRequestMap `json:"inputRequests"`
			RequestState  string              `json:"requestState"`
		}
		if json.Unmarshal(r, &top) != nil || top.ResultType != "input_required" {
			return nil, "", false
		}
		return top.InputRequests, top.RequestState, true
	}
	return nil, "", false
}

// asking is a result of type R that asks the agent for reqs.
func asking[R any](reqs mcp.InputRequestMap, state string) (R, error) {
	data, err := json.Marshal(struct {
		ResultType    string              `json:"resultType"`
		InputRequests mcp.InputRequestMap `json:"inputRequests"`
		RequestState  string              `json:"requestState,omitempty"`
	}{"input_required", reqs, state})
	if err != nil {
		var zero R
		return zero, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: encoding the backend's requests for the agent: %v", err)}
	}
	return convert[R](json.RawMessage(data))
}

// convert is v as an R: itself, or its JSON decoded into one. A parked
// call's result may come back to a retry that took the other path (bytes
// or types) than the request that started it.
func convert[R any](v any) (R, error) {
	if r, ok := v.(R); ok {
		return r, nil
	}
	var out R
	data, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return out, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: encoding a result: %v", err)}
		}
	}
	if p, ok := any(&out).(*json.RawMessage); ok {
		*p = data
		return out, nil
	}
	t := reflect.TypeFor[R]()
	if t.Kind() != reflect.Pointer {
		return out, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: cannot make a %v of a result", t)}
	}
	p := reflect.New(t.Elem())
	if err := json.Unmarshal(data, p.Interface()); err != nil {
		return out, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: decoding a result: %v", err)}
	}
	return p.Interface().(R), nil
}

// askAgent sends the handshake-era agent session s each of a current-era
// backend's requests, concurrently, and returns its answers by request id.
func (m *Mux) askAgent(ctx context.Context, mem *member, s *session, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	type answer struct {
		id  string
		res mcp.InputResponse
		err error
	}
	answers := make(chan answer, len(reqs))
	for id, r := range reqs {
		go func() {
			res, err := mem.askSession(ctx, s, r)
			answers <- answer{id, res, err}
		}()
	}
	out := make(mcp.InputResponseMap, len(reqs))
	var firstErr error
	for range reqs {
		a := <-answers
		if a.err != nil {
			if firstErr == nil {
				firstErr = a.err
			}
			continue
		}
		out[a.id] = a.res
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// parking holds the parked calls by their requestState: those whose agent
// was asked for input, and whose retries find them here.
type parking struct {
	// seal makes the requestStates, which name this instance as the holder
	// of their calls (mux/instance): set by New, never changed.
	seal  *instance.Seal
	mu    sync.Mutex
	calls map[string]*parkedCall
}

// maxParked bounds the calls that wait for agents' input at once.
const maxParked = 1000

// parkedStatePrefix starts every requestState mux makes: a retry that
// carries another is for a backend of the current era.
const parkedStatePrefix = instance.Prefix

// parkedCall is a request of a handshake-era backend from a current-era
// agent: it goes on at the backend in a goroutine of its own, so that it
// can go on between the agent's requests if the backend asks the agent
// for input. Nearly every call asks for none: what an asking call needs
// (its requestState, who may retry it, its place in parking) is made when
// the backend first asks (register), not for every call.
type parkedCall struct {
	method string
	target string // the tool or prompt name, or the URI

	asks chan *ask // the backend's requests to the agent, as they come

	mu      sync.Mutex
	open    map[string]*ask // sent to the agent, not answered yet, by input id
	next    int             // the next input id
	waiting bool            // one of the agent's requests waits on the call now
	d       *deadline       // the call's; paused while the agent has open requests
	// Set by register, under parking's lock, once the agent is asked.
	state     string // the requestState the agent gets: random, the key in parking
	principal string // who may retry it (see principalOf)
	stop      func() bool

	done   chan struct{} // closed once res and err are set
	res    any
	err    error
	cancel context.CancelCauseFunc
}

// ask is one request of the backend to the agent, while parked.
type ask struct {
	req   mcp.InputRequest
	reply chan askReply // one answer
}

type askReply struct {
	res mcp.InputResponse
	err error
}

// errAbandoned ends a parked call whose agent went away or cancelled.
var errAbandoned = errors.New("the agent ended the request before it answered the backend's requests")

// park starts run, the backend's side of a request of in, in a goroutine
// of its own (owned by mux: it may outlive the agent's request that
// started it), and returns the parked call the agent's requests wait on.
// Until the agent is asked for input, the request waiting on it ends it
// if it ends (awaitParked), mux's end among them.
func (m *Mux) park(ctx context.Context, in inbound, run func(ctx context.Context, pc *parkedCall) (any, error)) (*parkedCall, error) {
	pc := &parkedCall{
		method:  in.method,
		target:  in.target,
		asks:    make(chan *ask),
		waiting: true,
		done:    make(chan struct{}),
	}
	// The values of the agent's request stay (its session); its end does
	// not end the backend's request once the agent was asked for input.
	bctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	pc.cancel = cancel
	if !m.goOwned(func() {
		res, err := run(bctx, pc)
		pc.finish(res, err)
		cancel(context.Canceled)
		m.parked.forgetLater(pc)
	}) {
		cancel(errAbandoned)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-mux is closing"}
	}
	return pc, nil
}

// register gives pc, whose backend asks the agent of in for input, its
// requestState and its place in parking, where the agent's retry finds
// it; from then on mux's end, not the agent's request's, ends it.
func (m *Mux) register(pc *parkedCall, in inbound) error {
	p := &m.parked
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.state != "" {
		return nil // asked before
	}
	if len(p.calls) >= maxParked {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-mux: %d requests already wait for agents' input; try again later", maxParked)}
	}
	pc.state = p.seal.NewState()
	pc.principal = principalOf(in)
	if p.calls == nil {
		p.calls = map[string]*parkedCall{}
	}
	p.calls[pc.state] = pc
	pc.stop = context.AfterFunc(m.ctx, func() { pc.cancel(errAbandoned) })
	return nil
}

// principalOf is who sent in: the stdio session, or over HTTP (where a
// current-era request is a session of its own) the credentials it
// presented and the name it gave. A retry must come from the same
// principal.
func principalOf(in inbound) string {
	if in.extra != nil && in.extra.Header != nil {
		name := in.client
		if in.ss != nil {
			if p := in.ss.InitializeParams(); p != nil && p.ClientInfo != nil {
				name = p.ClientInfo.Name
			}
		}
		sum := sha256.Sum256([]byte(in.extra.Header.Get("Authorization") + "\x00" + name))
		return "http:" + base64.RawURLEncoding.EncodeToString(sum[:])
	}
	if in.ss != nil {
		return fmt.Sprintf("session:%p", in.ss)
	}
	return ""
}

// claim finds the parked call a retry is for, or reports that the retry's
// requestState is not mux's (nil, nil: it is a current-era backend's own).
func (p *parking) claim(in inbound) (*parkedCall, error) {
	state := in.round.state
	if len(state) < len(parkedStatePrefix) || state[:len(parkedStatePrefix)] != parkedStatePrefix {
		return nil, nil
	}
	invalid := func(why string) error { return instance.Refused("requestState " + why) }
	holder, err := p.seal.Open(state)
	if err != nil {
		// Made by no instance of this config: never looked up, never
		// handed on.
		return nil, instance.Refused(err.Error())
	}
	if !holder.Here {
		// The HTTP door hands such a retry to its holder (mux/door,
		// handoff.go); it gets here only when the holder cannot be asked.
		return nil, instance.Refused(instance.HeldElsewhere)
	}
	p.mu.Lock()
	pc := p.calls[state]
	p.mu.Unlock()
	switch {
	case pc == nil:
		return nil, invalid("is unknown or expired")
	case pc.principal != principalOf(in):
		return nil, invalid("belongs to another agent")
	case pc.method != in.method || pc.target != in.target:
		return nil, invalid(fmt.Sprintf("is for %s %q, not %s %q", pc.method, pc.target, in.method, in.target))
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.waiting {
		return nil, invalid("is being retried already")
	}
	pc.waiting = true
	return pc, nil
}

// remove drops pc from parking, if it was registered there.
func (p *parking) remove(pc *parkedCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.state == "" {
		return
	}
	delete(p.calls, pc.state)
	pc.stop()
}

// parkedKeep is how long the result of a parked call stays for a retry
// that has not come yet when the backend answers.
const parkedKeep = time.Minute

// forgetLater drops a finished call once its retry had time to come.
func (p *parking) forgetLater(pc *parkedCall) {
	pc.mu.Lock()
	waiting := pc.waiting
	pc.mu.Unlock()
	if waiting {
		return // the retry waiting on it removes it
	}
	time.AfterFunc(parkedKeep, func() { p.remove(pc) })
}

// endPrincipal cancels the calls parked for principal, whose retries can
// no longer come (a stdio session ended).
func (p *parking) endPrincipal(principal string) {
	p.mu.Lock()
	var ended []*parkedCall
	for _, pc := range p.calls {
		if pc.principal == principal {
			ended = append(ended, pc)
		}
	}
	p.mu.Unlock()
	for _, pc := range ended {
		pc.cancel(errAbandoned)
		p.remove(pc)
	}
}

func (pc *parkedCall) finish(res any, err error) {
	pc.res, pc.err = res, err
	close(pc.done)
}

// gatherWindow is how long after a backend's request to the agent mux waits
// for more before it answers the agent: the go-sdk sends a round's
// requests together.
const gatherWindow = 10 * time.Millisecond

// wait waits for the backend's answer (res, err) or for requests it has for
// the agent (reqs), or for ctx (the agent's request) to end.
func (pc *parkedCall) wait(ctx context.Context) (res any, reqs mcp.InputRequestMap, err error) {
	pc.mu.Lock()
	pending := len(pc.open) > 0
	pc.mu.Unlock()
	if !pending {
		select {
		case <-pc.done:
			return pc.res, nil, pc.err
		case a := <-pc.asks:
			pc.add(a)
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	gather := time.NewTimer(gatherWindow)
	defer gather.Stop()
	for more := true; more; {
		select {
		case a := <-pc.asks:
			pc.add(a)
		case <-gather.C:
			more = false
		case <-pc.done:
			more = false
		}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	reqs = make(mcp.InputRequestMap, len(pc.open))
	for id, a := range pc.open {
		reqs[id] = a.req
	}
	return nil, reqs, nil
}

func (pc *parkedCall) add(a *ask) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.next++
	if pc.open == nil {
		pc.open = map[string]*ask{}
	}
	pc.open["mcp-mux-"+strconv.Itoa(pc.next)] = a
	if len(pc.open) == 1 && pc.d != nil {
		pc.d.pause() // a human may take minutes over an elicitation
	}
}

// answer gives the backend the agent's answers to its open requests; those
// the agent left out stay open (asked again).
func (pc *parkedCall) answer(responses mcp.InputResponseMap) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for id, res := range responses {
		a := pc.open[id]
		if a == nil {
			continue // not asked, or answered already: ignored, as the spec says
		}
		delete(pc.open, id)
		a.reply <- askReply{res: res}
	}
	if len(pc.open) == 0 && pc.d != nil {
		pc.d.resume()
	}
}

// release lets the next retry claim pc. If the backend answered while
// the agent was being asked, the answer waits for that retry as long as
// forgetLater keeps it.
func (p *parking) release(pc *parkedCall) {
	pc.mu.Lock()
	pc.waiting = false
	pc.mu.Unlock()
	select {
	case <-pc.done:
		p.forgetLater(pc)
	default:
	}
}

// ask sends the agent the backend's request through the parked call, and
// waits for the agent's answer (in a retry) or for ctx (the backend's
// request) to end.
func (pc *parkedCall) ask(ctx context.Context, req mcp.InputRequest) (mcp.InputResponse, error) {
	a := &ask{req: req, reply: make(chan askReply, 1)}
	select {
	case pc.asks <- a:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-pc.done:
		return nil, errAbandoned
	}
	select {
	case r := <-a.reply:
		return r.res, r.err
	case <-ctx.Done():
		// The backend gave up on it: the agent is not asked again.
		pc.mu.Lock()
		for id, o := range pc.open {
			if o == a {
				delete(pc.open, id)
			}
		}
		pc.mu.Unlock()
		return nil, ctx.Err()
	}
}

// awaitParked is the answer to the agent's request (the first, or a retry
// that claimed pc) that waits on a parked call.
func awaitParked[R any](ctx context.Context, m *Mux, pc *parkedCall, in inbound) (R, error) {
	var zero R
	if in.round != nil {
		pc.answer(in.round.responses)
	}
	res, reqs, err := pc.wait(ctx)
	if reqs != nil {
		if err := m.register(pc, in); err != nil {
			pc.cancel(err)
			return zero, err
		}
		m.parked.release(pc)
		return asking[R](reqs, pc.state)
	}
	switch {
	case ctx.Err() != nil && err == ctx.Err():
		pc.cancel(errAbandoned)
		m.parked.remove(pc)
		return zero, err
	}
	m.parked.remove(pc)
	if err != nil {
		return zero, err
	}
	return convert[R](res)
}

package door

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// An HTTP session's calls on the go-sdk's path (what the fast path leaves
// to it: mux's own tools, prompts, completion, ...). The go-sdk cancels
// such a call on the agent's notifications/cancelled but writes its
// handler's error as the response, which MCP says a cancelled request
// does not get, and it tells the handler nothing of the agent's reason.
// The door sees both ends (http.go): the call's POST, whose response it
// leaves out once the call is cancelled, and the notification, whose
// reason it keeps for the backend (CancelReason).

// sdkCallHeader marks a call's request for its handler with the call's
// token: of the POST, the go-sdk hands a handler only the headers
// (RequestExtra.Header).
const sdkCallHeader = "Mcp-Mux-Call"

var sdkCallSeq atomic.Uint64

// sdkCall is one of the agent's calls on the go-sdk's path, in flight.
type sdkCall struct {
	token     string
	cancelled atomic.Bool
}

// sdkCalls are a session's calls on the go-sdk's path.
type sdkCalls struct {
	mu    sync.Mutex
	calls map[jsonrpc.ID]*sdkCall
}

// trackSDKCall records the call id about to go the go-sdk's way, marks r
// with it, and returns the writer for its response (which leaves the
// response out if the agent cancels the call) and a func to call once the
// go-sdk answered. A call whose id is in flight already is not tracked:
// the go-sdk refuses it.
func (st *HTTPSession) trackSDKCall(w http.ResponseWriter, r *http.Request, id jsonrpc.ID) (http.ResponseWriter, func()) {
	c := &sdkCall{token: "c" + strconv.FormatUint(sdkCallSeq.Add(1), 10)}
	st.sdk.mu.Lock()
	if _, dup := st.sdk.calls[id]; dup {
		st.sdk.mu.Unlock()
		return w, func() {}
	}
	if st.sdk.calls == nil {
		st.sdk.calls = map[jsonrpc.ID]*sdkCall{}
	}
	st.sdk.calls[id] = c
	st.sdk.mu.Unlock()
	r.Header.Set(sdkCallHeader, c.token)
	idJSON, _ := json.Marshal(id.Raw())
	return &cancelFilter{ResponseWriter: w, rc: http.NewResponseController(w), c: c, id: idJSON}, func() {
		st.sdk.mu.Lock()
		delete(st.sdk.calls, id)
		st.sdk.mu.Unlock()
		if c.cancelled.Load() {
			// The backend may be told after the handler returned.
			forgetCancelReason(c.token)
		}
	}
}

// cancelSDKCall takes the agent's notifications/cancelled of a call on the
// go-sdk's path, which the go-sdk cancels as it reads it after this: the
// call gets no response, and its reason is kept for the backend.
func (st *HTTPSession) cancelSDKCall(n *jsonrpc.Request) {
	id, reason, ok := cancelledRequest(n)
	if !ok {
		return
	}
	st.sdk.mu.Lock()
	c := st.sdk.calls[id]
	st.sdk.mu.Unlock()
	if c == nil {
		return
	}
	if reason != "" {
		cancelReasons.Store(c.token, reason)
	}
	c.cancelled.Store(true)
}

// cancelFilter writes a call's event stream, event by event, leaving out
// the response to the call once it is cancelled. A body that is not an
// event stream is written as it is.
type cancelFilter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	c       *sdkCall
	id      []byte // the call's id as JSON
	started bool
	stream  bool
	buf     []byte // the current event so far
}

func (f *cancelFilter) Write(p []byte) (int, error) {
	if !f.started {
		f.started = true
		f.stream = bytes.HasPrefix([]byte(f.Header().Get("Content-Type")), []byte("text/event-stream"))
	}
	if !f.stream {
		return f.ResponseWriter.Write(p)
	}
	f.buf = append(f.buf, p...)
	for {
		i := bytes.Index(f.buf, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		event := f.buf[:i+2]
		if !f.c.cancelled.Load() || !f.answers(event) {
			if _, err := f.ResponseWriter.Write(event); err != nil {
				return 0, err
			}
		}
		f.buf = f.buf[i+2:]
	}
}

// answers reports whether event carries the response to the call.
func (f *cancelFilter) answers(event []byte) bool {
	if !bytes.Contains(event, f.id) {
		return false
	}
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		msg, err := wire.DecodeMessage(bytes.TrimSpace(data))
		if err != nil {
			continue
		}
		if r, ok := msg.(*jsonrpc.Response); ok {
			raw, _ := json.Marshal(r.ID.Raw())
			return bytes.Equal(raw, f.id)
		}
	}
	return false
}

func (f *cancelFilter) FlushError() error { return f.rc.Flush() }

func (f *cancelFilter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

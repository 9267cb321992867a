package door

// Handing a current-era retry to the instance that holds its call. A
// handshake-era backend's call that asks a current-era agent for input is
// parked in the instance that started it, and the agent's retry (its
// answers, and the requestState that instance sealed) may reach another
// instance of the config behind a balancer with no affinity. That one
// forwards the request as the agent sent it, with the agent's own
// Authorization (the holder admits it, and checks that the call is the
// agent's, as if the agent had come to it), to the address the sealed
// state names, and relays the holder's answer as it is: status, headers,
// and the event stream as it comes. When the holder cannot be asked (gone,
// unreachable, or it named no address), the agent is told to start its
// call again; a state this instance cannot open goes on to the core, which
// refuses it. The hop is bounded by the request's own bound (Wait), and
// ends with the agent's request.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/backends/wire"
	"github.com/mcp-mux/mcp-mux/mux/instance"
)

// HandOff is how the HTTP door hands a retry to the instance that holds
// its call.
type HandOff struct {
	// Seal opens the requestStates; nil: no retry is handed on.
	Seal *instance.Seal
	// Wait bounds a handed-on request, as the holder bounds the call
	// (max_request_time).
	Wait time.Duration
	// Log is where a hop that failed is told, with the holder's address.
	Log *slog.Logger
}

// handOffDial bounds connecting to the holder: on one network, an
// instance that does not answer within it is gone.
const handOffDial = 5 * time.Second

// handOffClient carries the hops. It takes no proxy from the environment
// (the instances' addresses are their own network's) and follows no
// redirect: the agent's Authorization goes only where the seal says.
var handOffClient = &http.Client{
	Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: handOffDial}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// multiRoundMethod reports whether a request of method may carry a
// requestState of mcp-mux's: the methods whose calls it parks.
func multiRoundMethod(method string) bool {
	return method == "tools/call" || method == "prompts/get" || method == "resources/read"
}

// handedOff serves r, a current-era POST, by handing it to the instance
// that holds the call its requestState names, if it names another, and
// reports whether it did (having answered). If it did not, r's body is as
// it was.
func (h *HandOff) handedOff(w http.ResponseWriter, r *http.Request, maxBody int64) bool {
	if h.Seal == nil || r.Method != http.MethodPost || !multiRoundMethod(r.Header.Get("Mcp-Method")) || !hostAllowed(r) {
		return false
	}
	body, err := readBody(r, maxBody)
	if err != nil {
		bodyError(w, err)
		return true
	}
	r.Body = &heldBody{Reader: bytes.NewReader(body), data: body}
	if !bytes.Contains(body, []byte(instance.Prefix)) {
		return false // nearly every call: no retry of mux's
	}
	msg, err := wire.DecodeMessage(bytes.TrimSpace(body))
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !req.IsCall() {
		return false
	}
	var params struct {
		RequestState string `json:"requestState"`
	}
	if json.Unmarshal(req.Params, &params) != nil || params.RequestState == "" {
		return false
	}
	holder, err := h.Seal.Open(params.RequestState)
	if err != nil || holder.Here {
		return false // the core's to answer: its call, or a refusal
	}
	id := req.ID
	refuse := func() {
		writeJSONError(w, http.StatusBadRequest, id, instance.Refused(instance.HeldElsewhere))
	}
	if holder.URL == "" || r.Header.Get(instance.HandOffHeader) != "" {
		// It named no address, or was handed here already and this is
		// not its holder (which restarted at that address).
		refuse()
		return true
	}
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if h.Wait > 0 {
		ctx, cancel = context.WithTimeout(ctx, h.Wait)
	}
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, holder.URL+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		refuse()
		return true
	}
	out.Header = r.Header.Clone()
	for _, k := range []string{"Origin", TokenHeader, "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		// Origin was checked here; the holder checks the token again.
		out.Header.Del(k)
	}
	out.Header.Set(instance.HandOffHeader, "1")
	resp, err := handOffClient.Do(out)
	if err != nil {
		if h.Log != nil {
			h.Log.Warn("a retry's call is held by an instance that did not answer: the agent is told to start again", "holder", holder.URL, "err", err)
		}
		refuse()
		return true
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		switch k {
		case "Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade":
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	relay(w, resp.Body)
	return true
}

// relay copies body to w as it comes: an event stream's events reach the
// agent when the holder sends them.
func relay(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// heldBody is a request body read already, for the next reader: the fast
// path takes its bytes as they are (readBody), the go-sdk's reads them.
type heldBody struct {
	*bytes.Reader
	data []byte
}

func (*heldBody) Close() error { return nil }

package door

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/instance"
)

// A retry handed on once is never handed on again: an instance that
// restarted at its holder's address (a new id, the same tokens) refuses it
// rather than bouncing it, and an instance named with no address refuses
// at once. Either way the agent reads the error that says start again.
func TestARetryIsHandedOnAtMostOnce(t *testing.T) {
	var hops atomic.Int32
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{"from":"holder"}}`))
	}))
	defer holder.Close()
	elsewhere := instance.New("team")
	elsewhere.Advertise(holder.URL)
	nowhere := instance.New("team") // listening on a wildcard, no http_advertise
	h := &HandOff{Seal: instance.New("team"), Wait: time.Second}
	post := func(state string, handed bool) *httptest.ResponseRecorder {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","requestState":` + strings.TrimSpace(string(mustJSON(state))) + `}}`
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Mcp-Method", "tools/call")
		if handed {
			r.Header.Set(instance.HandOffHeader, "1")
		}
		w := httptest.NewRecorder()
		if !h.handedOff(w, r, 1<<20) {
			t.Fatalf("not handed off: %s", body)
		}
		return w
	}
	if w := post(elsewhere.NewState(), false); w.Code != 200 || !strings.Contains(w.Body.String(), `"from":"holder"`) || hops.Load() != 1 {
		t.Fatalf("handed to the holder: %d %s (hops %d)", w.Code, w.Body, hops.Load())
	}
	for name, w := range map[string]*httptest.ResponseRecorder{
		"handed on already": post(elsewhere.NewState(), true),
		"no address":        post(nowhere.NewState(), false),
	} {
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), instance.StartAgain) || !strings.Contains(w.Body.String(), `"id":7`) {
			t.Errorf("%s: %d %s, want the error that says start again", name, w.Code, w.Body)
		}
	}
	if hops.Load() != 1 {
		t.Fatalf("%d hops, want 1", hops.Load())
	}
}

func mustJSON(v any) []byte {
	data, _ := json.Marshal(v)
	return data
}

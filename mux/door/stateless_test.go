package door

import (
	"encoding/json"
	"testing"
)

// A current-era agent sends the same _meta with every request: it is
// decoded once and kept, one of each; one with a progress token is the
// request's own and is not kept; a header of another version than the
// _meta's is not taken.
func TestAgentMetaIsDecodedOnce(t *testing.T) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	params := json.RawMessage(`{"name":"notes__echo","arguments":{"text":"x"},` + meta + `}`)
	var am AgentMetas
	first := am.Of(params, CurrentEra)
	if first == nil || first.Params.ClientInfo == nil || first.Params.ClientInfo.Name != "raw" {
		t.Fatalf("Of: %+v, want the agent's params", first)
	}
	if again := am.Of(params, CurrentEra); again != first {
		t.Errorf("the same _meta again was decoded again")
	}
	if n := len(am.seen); n != 1 {
		t.Errorf("%d _meta kept after two requests with the same, want 1", n)
	}
	if got := am.Of(params, "2099-01-01"); got != nil {
		t.Errorf("a header of another version than the _meta's: %+v, want nil", got)
	}
	withToken := json.RawMessage(`{"_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
	if got := am.Of(withToken, CurrentEra); got == nil {
		t.Fatal("a _meta with a progress token: nil, want its params")
	}
	if n := len(am.seen); n != 1 {
		t.Errorf("%d _meta kept after one with a progress token, want 1", n)
	}
}

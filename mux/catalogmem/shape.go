package catalogmem

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Shape is what of a client's capabilities may change what a server lists
// to that client, as compact JSON: a server may list a tool only to a
// client that can answer its sampling or elicitation requests, or that has
// roots (server-everything does). Roots, sampling and elicitation count
// with their sub-features (sampling's context and tools, elicitation's
// form and url), and extensions with their settings; roots' listChanged
// does not, as it says only how the client tells of a change. An
// elicitation that names no mode stays apart from one that names form,
// though the spec makes them the same: a server may not, and a needless
// start costs less than a wrong list. A nil c is a client of none of them.
func Shape(c *mcp.ClientCapabilities) json.RawMessage {
	var s shape
	if c != nil {
		s.Roots = present(c.RootsV2 != nil)
		if c.Sampling != nil {
			s.Sampling = &samplingShape{Context: present(c.Sampling.Context != nil), Tools: present(c.Sampling.Tools != nil)}
		}
		if c.Elicitation != nil {
			s.Elicitation = &elicitationShape{Form: present(c.Elicitation.Form != nil), URL: present(c.Elicitation.URL != nil)}
		}
		s.Extensions = c.Extensions
	}
	b, err := json.Marshal(s)
	if err != nil {
		// An extension's settings that do not encode: told apart from
		// every other client, so never served another's catalog.
		return json.RawMessage(`{"unencodable":{}}`)
	}
	return b
}

// feature is a capability present, {} in JSON.
type feature struct{}

func present(ok bool) *feature {
	if ok {
		return &feature{}
	}
	return nil
}

type shape struct {
	Roots       *feature          `json:"roots,omitempty"`
	Sampling    *samplingShape    `json:"sampling,omitempty"`
	Elicitation *elicitationShape `json:"elicitation,omitempty"`
	Extensions  map[string]any    `json:"extensions,omitempty"`
}

type samplingShape struct {
	Context *feature `json:"context,omitempty"`
	Tools   *feature `json:"tools,omitempty"`
}

type elicitationShape struct {
	Form *feature `json:"form,omitempty"`
	URL  *feature `json:"url,omitempty"`
}

package testkit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// StartResponsesModel is a fake of OpenAI's Responses API
// (POST /v1/responses, streamed as server-sent events), as Codex CLI
// speaks it. Every request there is a turn; anything else (a model list)
// is a side request.
func StartResponsesModel(t testing.TB, script ModelScript) *FakeModel {
	return startFakeModel(t, responsesDialect{}, script)
}

type responsesDialect struct{}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Tools       []responsesTool `json:"tools"` // of a namespace
}

func (responsesDialect) parse(path string, body []byte) (*ModelRequest, bool, error) {
	if !strings.HasSuffix(path, "/responses") {
		return &ModelRequest{}, false, nil
	}
	var b struct {
		Instructions string           `json:"instructions"`
		Input        []map[string]any `json:"input"`
		Tools        []responsesTool  `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, false, fmt.Errorf("responses request: %w", err)
	}
	req := &ModelRequest{Texts: []string{b.Instructions}}
	for _, tl := range b.Tools {
		if tl.Type == "namespace" {
			// The namespace's description is where Codex puts the
			// server's instructions: a text the model sees.
			req.Texts = append(req.Texts, tl.Description)
			for _, f := range tl.Tools {
				req.Tools = append(req.Tools, ModelTool{Namespace: tl.Name, Name: f.Name, Description: f.Description, Schema: f.Parameters})
			}
			continue
		}
		req.Tools = append(req.Tools, ModelTool{Name: tl.Name, Description: tl.Description, Schema: tl.Parameters})
	}
	for _, item := range b.Input {
		allStrings(item["content"], &req.Texts)
		if item["type"] == "function_call_output" {
			req.Results = append(req.Results, responsesOutput(item["output"]))
		}
	}
	return req, true, nil
}

// responsesOutput is a function_call_output's output as text: a string,
// or its input_text items joined.
func responsesOutput(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var parts []string
	if a, ok := v.([]any); ok {
		for _, p := range a {
			if m, ok := p.(map[string]any); ok {
				parts = append(parts, str(m["text"]))
			}
		}
	}
	return strings.Join(parts, "\n")
}

func (responsesDialect) answer(w http.ResponseWriter, r *http.Request, body []byte, reply ModelReply, side bool, seq int) {
	if side {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[],"models":[]}`)
		return
	}
	id := fmt.Sprintf("resp_%d", seq)
	var item map[string]any
	if c := reply.Call; c != nil {
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", seq), "call_id": fmt.Sprintf("call_%d", seq),
			"name": c.Name, "arguments": argsJSON(c), "status": "completed"}
		if c.Namespace != "" {
			item["namespace"] = c.Namespace
		}
	} else {
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", seq), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}}
	}
	sseStart(w)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id, "status": "in_progress"}})
	sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": id, "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}},
	}})
}

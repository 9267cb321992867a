package testkit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// StartAnthropicModel is a fake of Anthropic's Messages API
// (POST /v1/messages, streamed as server-sent events or not), as Claude
// Code speaks it. A request that offers tools is a turn; the rest
// (titles, summaries) and /v1/messages/count_tokens are side requests.
func StartAnthropicModel(t testing.TB, script ModelScript) *FakeModel {
	return startFakeModel(t, anthropicDialect{}, script)
}

type anthropicDialect struct{}

func (anthropicDialect) parse(path string, body []byte) (*ModelRequest, bool, error) {
	if !strings.HasSuffix(path, "/messages") {
		return &ModelRequest{}, false, nil
	}
	var b struct {
		System   any `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, false, fmt.Errorf("messages request: %w", err)
	}
	req := &ModelRequest{}
	allStrings(b.System, &req.Texts)
	for _, tl := range b.Tools {
		req.Tools = append(req.Tools, ModelTool{Name: tl.Name, Description: tl.Description, Schema: tl.InputSchema})
	}
	for _, msg := range b.Messages {
		allStrings(msg.Content, &req.Texts)
		blocks, _ := msg.Content.([]any)
		for _, bl := range blocks {
			if m, ok := bl.(map[string]any); ok && m["type"] == "tool_result" {
				req.Results = append(req.Results, chatContent(m["content"]))
			}
		}
	}
	return req, len(req.Tools) > 0, nil
}

func (anthropicDialect) answer(w http.ResponseWriter, r *http.Request, body []byte, reply ModelReply, side bool, seq int) {
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"input_tokens":10}`)
		return
	}
	if side {
		reply = ModelReply{Text: "Agent test"}
	}
	var b struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal(body, &b)
	id := fmt.Sprintf("msg_%d", seq)
	block := map[string]any{"type": "text", "text": reply.Text}
	stop := "end_turn"
	if c := reply.Call; c != nil {
		stop = "tool_use"
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", seq), "name": c.Name, "input": args}
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5}
	if !b.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": b.Model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	sseStart(w)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": b.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	if block["type"] == "tool_use" {
		input, _ := json.Marshal(block["input"])
		start := map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": reply.Text}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

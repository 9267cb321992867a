package testkit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// StartChatModel is a fake of OpenAI's chat completions API
// (POST /v1/chat/completions, streamed as server-sent events or not), as
// opencode and Copilot CLI speak it. A request that offers tools is a
// turn; one without (a title) is a side request, answered with a title.
func StartChatModel(t testing.TB, script ModelScript) *FakeModel {
	return startFakeModel(t, chatDialect{}, script)
}

type chatDialect struct{}

func (chatDialect) parse(path string, body []byte) (*ModelRequest, bool, error) {
	if !strings.HasSuffix(path, "/chat/completions") {
		return &ModelRequest{}, false, nil
	}
	var b struct {
		Messages []map[string]any `json:"messages"`
		Tools    []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, false, fmt.Errorf("chat completions request: %w", err)
	}
	req := &ModelRequest{}
	for _, tl := range b.Tools {
		req.Tools = append(req.Tools, ModelTool{Name: tl.Function.Name, Description: tl.Function.Description, Schema: tl.Function.Parameters})
	}
	for _, msg := range b.Messages {
		allStrings(msg["content"], &req.Texts)
		if msg["role"] == "tool" {
			req.Results = append(req.Results, chatContent(msg["content"]))
		}
	}
	return req, len(req.Tools) > 0, nil
}

// chatContent is a message's content as text: a string, or its text parts
// joined.
func chatContent(v any) string {
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

func (chatDialect) answer(w http.ResponseWriter, r *http.Request, body []byte, reply ModelReply, side bool, seq int) {
	if side {
		reply = ModelReply{Text: "Agent test"}
	}
	var b struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal(body, &b)
	id := fmt.Sprintf("chatcmpl-%d", seq)
	finish := "stop"
	msg := map[string]any{"role": "assistant", "content": reply.Text}
	if c := reply.Call; c != nil {
		finish = "tool_calls"
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": fmt.Sprintf("call_%d", seq), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": argsJSON(c)},
		}}}
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !b.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": 1, "model": b.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}
	sseStart(w)
	chunk := func(delta map[string]any, finish any, usage any) map[string]any {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": b.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		return c
	}
	sse(w, "", chunk(msg, nil, nil))
	sse(w, "", chunk(map[string]any{}, finish, usage))
	fmt.Fprint(w, "data: [DONE]\n\n")
}

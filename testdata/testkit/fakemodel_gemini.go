package testkit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// StartGeminiModel is a fake of Google's Gemini API
// (POST …/models/MODEL:streamGenerateContent?alt=sse and
// :generateContent), as Gemini CLI speaks it. A request that declares
// functions is a turn; the rest (the next-speaker check, routing, token
// counts) are side requests, answered so that the turn simply ends.
func StartGeminiModel(t testing.TB, script ModelScript) *FakeModel {
	return startFakeModel(t, geminiDialect{}, script)
}

type geminiDialect struct{}

func (geminiDialect) parse(path string, body []byte) (*ModelRequest, bool, error) {
	if !strings.Contains(path, ":streamGenerateContent") && !strings.Contains(path, ":generateContent") {
		return &ModelRequest{}, false, nil
	}
	var b struct {
		Contents []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"contents"`
		SystemInstruction any `json:"systemInstruction"`
		Tools             []struct {
			FunctionDeclarations []struct {
				Name                 string          `json:"name"`
				Description          string          `json:"description"`
				Parameters           json.RawMessage `json:"parameters"`
				ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, false, fmt.Errorf("gemini request: %w", err)
	}
	req := &ModelRequest{}
	allStrings(b.SystemInstruction, &req.Texts)
	for _, tl := range b.Tools {
		for _, f := range tl.FunctionDeclarations {
			schema := f.ParametersJSONSchema
			if schema == nil {
				schema = f.Parameters
			}
			req.Tools = append(req.Tools, ModelTool{Name: f.Name, Description: f.Description, Schema: schema})
		}
	}
	for _, c := range b.Contents {
		for _, p := range c.Parts {
			allStrings(p["text"], &req.Texts)
			if fr, ok := p["functionResponse"].(map[string]any); ok {
				req.Results = append(req.Results, resultText(fr["response"]))
			}
		}
	}
	return req, len(req.Tools) > 0, nil
}

func (geminiDialect) answer(w http.ResponseWriter, r *http.Request, body []byte, reply ModelReply, side bool, seq int) {
	if strings.Contains(r.URL.Path, ":countTokens") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"totalTokens":10}`)
		return
	}
	if side {
		// The side requests that want JSON want one of these keys; a
		// user's turn next ends the conversation.
		reply = ModelReply{Text: `{"next_speaker":"user","reasoning":"the turn is over","model_choice":"flash"}`}
	}
	part := map[string]any{"text": reply.Text}
	if c := reply.Call; c != nil {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		part = map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}}
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{"index": 0, "finishReason": "STOP",
			"content": map[string]any{"role": "model", "parts": []any{part}}}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  "gemini-2.5-pro",
	}
	if !strings.Contains(r.URL.Path, ":streamGenerateContent") {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
		return
	}
	sseStart(w)
	sse(w, "", resp)
}

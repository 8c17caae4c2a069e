package intercept_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// modelServer is an OpenAI-compatible model for the agents' tests: the
// Responses API (POST /v1/responses, not streamed), which the OpenAI Agents
// SDK for JavaScript calls by default. Its answers are scripted from the
// conversation it is sent, so that the same conversation always gets the
// same answer: no tool output yet → a call of the book tool (agent C); one
// → a call of the notify tool (agent D); two → the final text. It counts
// the calls it answers, by the task (the conversation's user text).
type modelServer struct {
	mu     sync.Mutex
	calls  int
	byTask map[string]int
}

func newModelServer() *modelServer { return &modelServer{byTask: map[string]int{}} }

// count returns the calls answered, all together and for task.
func (m *modelServer) count(task string) (all, forTask int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls, m.byTask[task]
}

// responsesItem is an item of a Responses API request's input: a message
// (role, content as a string or as parts) or a tool call's output.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func (it responsesItem) text() string {
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(it.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (m *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.Error(w, `{"error":{"message":"only POST /v1/responses is served here"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"not JSON"}}`, http.StatusBadRequest)
		return
	}
	var items []responsesItem
	if json.Unmarshal(req.Input, &items) != nil {
		items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
	}
	task, outputs := "", 0
	for _, it := range items {
		switch {
		case it.Type == "function_call_output":
			outputs++
		case it.Role == "user" && task == "":
			task = it.text()
		}
	}
	m.mu.Lock()
	m.calls++
	m.byTask[task]++
	n := m.calls
	m.mu.Unlock()

	call := func(step int, tool, verb string) map[string]any {
		args, _ := json.Marshal(map[string]string{"request": verb + ": " + task})
		return map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", step),
			"call_id": fmt.Sprintf("call_%d", step), "name": tool, "arguments": string(args), "status": "completed"}
	}
	var output []map[string]any
	switch outputs {
	case 0:
		output = append(output, call(1, "book", "book"))
	case 1:
		output = append(output, call(2, "notify", "notify"))
	default:
		output = append(output, map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": "done: " + task, "annotations": []any{}}}})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1767225600, "status": "completed",
		"model": req.Model, "output": output,
		"usage": map[string]int{"input_tokens": 120, "output_tokens": 30, "total_tokens": 150},
	})
}

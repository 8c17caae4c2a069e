package middleware

import "testing"

func TestA2AFailed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, contentType string
		want                    bool
	}{
		{"v1.0 failed task", `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","status":{"state":"TASK_STATE_FAILED"}}}}`, "application/json", true},
		{"v1.0 completed task", `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","status":{"state":"TASK_STATE_COMPLETED"}}}}`, "application/json", false},
		{"v1.0 message", `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m","parts":[{"text":"failed"}]}}}`, "application/json", false},
		{"v0.3 failed task", `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","status":{"state":"failed"}}}`, "application/json; charset=utf-8", true},
		{"v0.3 rejected task: the agent's decision", `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","status":{"state":"rejected"}}}`, "application/json", false},
		{"internal error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`, "application/json", true},
		{"invalid params: the caller's mistake", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`, "application/json", false},
		{"task not found", `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no task"}}`, "application/json", false},
		{"a stream that fails", "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"status\":{\"state\":\"TASK_STATE_FAILED\"}}}}\n\n", "text/event-stream", true},
		{"a stream that completes", "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}\n\n", "text/event-stream", false},
		{"not JSON-RPC", `{"status":"failed"}`, "application/json", false},
		{"malformed", `{"jsonrpc":"2.0","result":{"task":`, "application/json", false},
		{"empty", ``, "application/json", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := A2AFailed([]byte(tc.body), tc.contentType); got != tc.want {
				t.Errorf("A2AFailed = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzA2AFailed: any answer is read without panicking, and a JSON answer
// reads the same as the one event of a stream carrying it.
func FuzzA2AFailed(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"task":{"status":{"state":"TASK_STATE_FAILED"}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","status":{"state":"failed"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		json := A2AFailed(body, "application/json")
		for _, c := range body {
			if c == '\n' || c == '\r' {
				return // a stream's event is one line
			}
		}
		if sse := A2AFailed(append([]byte("data: "), body...), "text/event-stream"); sse != json {
			t.Errorf("as JSON %v, as one event %v", json, sse)
		}
	})
}

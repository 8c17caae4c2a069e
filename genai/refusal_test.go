package genai

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

func TestWriteRefusal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		call    Call
		status  int
		code    string
		want    string
		errType string // what ParseResponse reads back
	}{
		{"openai budget", chatStreamCall, 429, "chain_budget_exceeded",
			`{"error":{"message":"the chain \"c-1\" is over its budget","type":"insufficient_quota","param":null,"code":"chain_budget_exceeded"}}`,
			"chain_budget_exceeded"},
		{"openai without code", responsesCall, 403, "",
			`{"error":{"message":"the chain \"c-1\" is over its budget","type":"invalid_request_error","param":null,"code":null}}`,
			"invalid_request_error"},
		{"azure server error", azureStreamCall, 503, "x",
			`{"error":{"message":"the chain \"c-1\" is over its budget","type":"server_error","param":null,"code":"x"}}`, "x"},
		{"anthropic openai-compatible endpoint", mustDetect(Anthropic, "/v1/chat/completions", `{}`), 429, "b",
			`{"error":{"message":"the chain \"c-1\" is over its budget","type":"insufficient_quota","param":null,"code":"b"}}`, "b"},
		{"anthropic budget", messagesStream, 429, "chain_budget_exceeded",
			`{"type":"error","error":{"type":"rate_limit_error","message":"the chain \"c-1\" is over its budget"}}`, "rate_limit_error"},
		{"anthropic forbidden", messagesCall, 403, "denied",
			`{"type":"error","error":{"type":"permission_error","message":"the chain \"c-1\" is over its budget"}}`, "permission_error"},
		{"gemini budget", geminiStream, 429, "chain_budget_exceeded",
			`{"error":{"code":429,"message":"the chain \"c-1\" is over its budget","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"chain_budget_exceeded","domain":"baton"}]}}`,
			"RESOURCE_EXHAUSTED"},
		{"gemini without code", geminiCall, 400, "",
			`{"error":{"code":400,"message":"the chain \"c-1\" is over its budget","status":"INVALID_ARGUMENT"}}`, "INVALID_ARGUMENT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			WriteRefusal(rec, tt.call, tt.status, tt.code, `the chain "c-1" is over its budget`)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d", rec.Code, tt.status)
			}
			h := rec.Header()
			if h.Get("Content-Type") != "application/json" || h.Get("X-Should-Retry") != "false" {
				t.Errorf("headers %v", h)
			}
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Error("not JSON")
			}
			r := ParseResponse(tt.call, rec.Code, h.Get("Content-Type"), "", rec.Body.Bytes())
			if r.ErrorType != tt.errType || r.ErrorMessage != `the chain "c-1" is over its budget` {
				t.Errorf("read back as %q, %q; want %q", r.ErrorType, r.ErrorMessage, tt.errType)
			}
		})
	}
}

func TestGRPCStatus(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 418: "INVALID_ARGUMENT",
		500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"} {
		if got := grpcStatus(status); got != want {
			t.Errorf("grpcStatus(%d) = %s, want %s", status, got, want)
		}
	}
	for status, want := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 404: "not_found_error",
		413: "request_too_large", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"} {
		if got := anthropicErrorType(status); got != want {
			t.Errorf("anthropicErrorType(%d) = %s, want %s", status, got, want)
		}
	}
}

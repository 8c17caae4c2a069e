package genai

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// WriteRefusal answers a model call that Baton refuses itself (a chain
// over its token or cost budget) in the error shape of the provider the
// agent's SDK expects, rather than as Baton's own problem+json: the SDK
// then raises its usual error for the status (a RateLimitError for 429),
// with the message and code intact, where a problem document would reach
// the agent as an unparsed body. The shape follows the call's endpoint, so
// that a call to a provider's OpenAI-compatible endpoint gets OpenAI's:
//
//   - OpenAI and Azure OpenAI: {"error":{"message","type","param","code"}},
//     the type "insufficient_quota" for 429 (what OpenAI answers when an
//     account's quota is spent), "server_error" for 5xx,
//     "invalid_request_error" otherwise; code is code, or null.
//   - Anthropic: {"type":"error","error":{"type","message"}}, the type
//     Anthropic uses for the status ("rate_limit_error" for 429). The shape
//     has no place for code, which is left out.
//   - Gemini: {"error":{"code","message","status","details"}}, the status
//     the gRPC code of the HTTP status ("RESOURCE_EXHAUSTED" for 429), and
//     code as the reason of a google.rpc.ErrorInfo detail.
//
// A streaming call gets the same plain JSON error with its status, not an
// event stream: the SDKs check the status before they read a stream.
//
// The answer carries x-should-retry: false. OpenAI's and Anthropic's SDKs
// read it before anything else when deciding to retry, and do not retry
// when it says false, where they would retry a 429 or 5xx by default: see
// shouldRetry in openai-node's src/client.ts (at 7b7d6ca, 2026-08-21) and
// anthropic-sdk-typescript's src/client.ts (at bfa9197, 2026-08-19), and
// openai-go's internal/requestconfig/requestconfig.go (v3.96.0, tested in
// refusal_test.go). The Python SDKs, generated from the same templates,
// were not read. Google's Gen AI SDKs do not read the header.
func WriteRefusal(w http.ResponseWriter, c Call, status int, code, message string) {
	var body any
	switch c.Endpoint {
	case Messages:
		body = anthropicRefusal{Type: "error", Error: anthropicError{Type: anthropicErrorType(status), Message: message}}
	case GenerateContent:
		g := geminiError{Code: status, Message: message, Status: grpcStatus(status)}
		if code != "" {
			g.Details = []errorInfo{{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: code, Domain: "baton"}}
		}
		body = geminiRefusal{Error: g}
	default:
		o := openAIError{Message: message, Type: "invalid_request_error"}
		switch {
		case status == http.StatusTooManyRequests:
			o.Type = "insufficient_quota"
		case status >= 500:
			o.Type = "server_error"
		}
		if code != "" {
			o.Code = &code
		}
		body = openAIRefusal{Error: o}
	}
	b, _ := json.Marshal(body) // plain structs of strings and ints
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Should-Retry", "false")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

type openAIRefusal struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type anthropicRefusal struct {
	Type  string         `json:"type"`
	Error anthropicError `json:"error"`
}

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// anthropicErrorType is the error type Anthropic's API answers a status
// with.
func anthropicErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

type geminiRefusal struct {
	Error geminiError `json:"error"`
}

type geminiError struct {
	Code    int         `json:"code"`
	Message string      `json:"message"`
	Status  string      `json:"status"`
	Details []errorInfo `json:"details,omitempty"`
}

// errorInfo is a google.rpc.ErrorInfo.
type errorInfo struct {
	Type   string `json:"@type"`
	Reason string `json:"reason"`
	Domain string `json:"domain"`
}

// grpcStatus is the google.rpc.Code Google's APIs answer a status with.
func grpcStatus(status int) string {
	switch status {
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "INVALID_ARGUMENT"
}

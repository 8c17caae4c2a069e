package genai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/batonproxy/baton/genai"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestRefusalOpenAISDK shows that OpenAI's Go SDK raises a refusal as the
// provider's own error and, told x-should-retry: false, does not retry the
// 429 it retries otherwise.
func TestRefusalOpenAISDK(t *testing.T) {
	t.Parallel()
	call, _ := genai.Detect(genai.OpenAI, "POST", "/v1/chat/completions", []byte(`{"model":"gpt-4o"}`))
	for _, tt := range []struct {
		name     string
		retry    bool // drop x-should-retry
		requests int32
	}{{"refusal", false, 1}, {"the same without x-should-retry", true, 3}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				if tt.retry {
					w = dropRetryHeader{w}
					w.Header().Set("Retry-After-Ms", "1")
				}
				genai.WriteRefusal(w, call, http.StatusTooManyRequests, "chain_budget_exceeded", "the chain is over its budget")
			}))
			defer srv.Close()
			client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(2))
			_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    "gpt-4o",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an *openai.Error", err)
			}
			if apiErr.StatusCode != 429 || apiErr.Code != "chain_budget_exceeded" || apiErr.Type != "insufficient_quota" || apiErr.Message != "the chain is over its budget" {
				t.Errorf("error = %d %q %q %q", apiErr.StatusCode, apiErr.Code, apiErr.Type, apiErr.Message)
			}
			if got := n.Load(); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
		})
	}
}

// dropRetryHeader removes x-should-retry before the header is written.
type dropRetryHeader struct{ http.ResponseWriter }

func (d dropRetryHeader) WriteHeader(status int) {
	d.Header().Del("X-Should-Retry")
	d.ResponseWriter.WriteHeader(status)
}

package genai

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"reflect"
	"strings"
	"testing"
)

// calls used by the tests, as Detect makes them.
var (
	chatCall        = mustDetect(OpenAI, "/v1/chat/completions", `{"model":"gpt-4o"}`)
	chatStreamCall  = mustDetect(OpenAI, "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true}}`)
	azureStreamCall = mustDetect(AzureOpenAI, "/openai/deployments/prod-4o/chat/completions", `{"stream":true}`)
	responsesCall   = mustDetect(OpenAI, "/v1/responses", `{"model":"gpt-5.4"}`)
	responsesStream = mustDetect(OpenAI, "/v1/responses", `{"model":"gpt-4.1","stream":true}`)
	completionsCall = mustDetect(OpenAI, "/v1/completions", `{"model":"gpt-3.5-turbo-instruct"}`)
	embeddingsCall  = mustDetect(OpenAI, "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`)
	messagesCall    = mustDetect(Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1024}`)
	messagesStream  = mustDetect(Anthropic, "/v1/messages", `{"model":"claude-opus-4-8","max_tokens":1024,"stream":true}`)
	geminiCall      = mustDetect(Gemini, "/v1beta/models/gemini-2.5-flash:generateContent", `{}`)
	geminiStream    = mustDetect(Gemini, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", `{}`)
)

func mustDetect(api API, path, body string) Call {
	c, ok := Detect(api, "POST", path, []byte(body))
	if !ok {
		panic("not a call: " + path)
	}
	return c
}

func gzipBytes(t testing.TB, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.Bytes()
}

func zlibBytes(t testing.TB, s string) []byte {
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.Bytes()
}

const (
	jsonType = "application/json"
	sseType  = "text/event-stream"
)

func TestParseResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		call        Call
		status      int
		contentType string
		encoding    string
		body        string
		want        Result
	}{
		{
			name: "openai chat", call: chatCall, status: 200, contentType: jsonType, body: openAIChatJSON,
			want: Result{ResponseID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", ResponseModel: "gpt-4o-2024-08-06",
				FinishReasons: []string{"stop", "length"},
				Usage:         Usage{Input: 1117, CachedInput: 1024, Output: 46, Reasoning: 12, Known: true}},
		},
		{
			name: "openai chat stream read whole", call: chatStreamCall, status: 200, contentType: sseType, body: openAIChatSSE,
			want: Result{ResponseID: "chatcmpl-123", ResponseModel: "gpt-4o-mini-2024-07-18", FinishReasons: []string{"stop"},
				Usage: Usage{Input: 9, Output: 12, Known: true}},
		},
		{
			name: "openai responses", call: responsesCall, status: 200, contentType: jsonType, body: openAIResponsesJSON,
			want: Result{ResponseID: "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41", ResponseModel: "gpt-5.4-2026-03-05",
				FinishReasons: []string{"stop"},
				Usage:         Usage{Input: 12033, CachedInput: 11904, CacheCreation: 64, Output: 544, Reasoning: 512, Known: true}},
		},
		{
			name: "openai completions", call: completionsCall, status: 200, contentType: jsonType, body: openAICompletionsJSON,
			want: Result{ResponseID: "cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7", ResponseModel: "gpt-3.5-turbo-instruct",
				FinishReasons: []string{"length"}, Usage: Usage{Input: 5, Output: 7, Known: true}},
		},
		{
			name: "openai embeddings have no output", call: embeddingsCall, status: 200, contentType: jsonType, body: openAIEmbeddingsJSON,
			want: Result{ResponseModel: "text-embedding-3-small", Usage: Usage{Input: 8, Known: true}},
		},
		{
			name: "openai error", call: chatCall, status: 429, contentType: jsonType, body: openAIErrorJSON,
			want: Result{ErrorType: "rate_limit_exceeded", ErrorMessage: "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000."},
		},
		{
			name: "azure error", call: chatCall, status: 429, contentType: jsonType, body: azureErrorJSON,
			want: Result{ErrorType: "429", ErrorMessage: "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier."},
		},
		{
			name: "anthropic cache counts are input", call: messagesCall, status: 200, contentType: jsonType, body: anthropicJSON,
			want: Result{ResponseID: "msg_013Zva2CMHLNnXjNJJKqJ2EF", ResponseModel: "claude-sonnet-4-5-20250929",
				FinishReasons: []string{"end_turn"},
				Usage:         Usage{Input: 2110, CachedInput: 2000, CacheCreation: 100, Output: 503, Reasoning: 120, Known: true}},
		},
		{
			name: "anthropic error", call: messagesCall, status: 429, contentType: jsonType, body: anthropicErrorJSON,
			want: Result{ErrorType: "rate_limit_error", ErrorMessage: "Number of request tokens has exceeded your per-minute rate limit"},
		},
		{
			name: "gemini thoughts are output", call: geminiCall, status: 200, contentType: "application/json; charset=UTF-8", body: geminiJSON,
			want: Result{ResponseID: "mIvOaMuZJ8eJ1dkPp7mXuQ0", ResponseModel: "gemini-2.5-flash", FinishReasons: []string{"stop"},
				Usage: Usage{Input: 1015, CachedInput: 1000, Output: 120, Reasoning: 100, Known: true}},
		},
		{
			name: "gemini array read whole", call: geminiStream, status: 200, contentType: jsonType, body: geminiArray,
			want: Result{ResponseID: "abc", ResponseModel: "gemini-2.5-flash-lite", FinishReasons: []string{"stop"},
				Usage: Usage{Input: 8, Output: 35, Reasoning: 5, Known: true}},
		},
		{
			name: "gemini error", call: geminiCall, status: 429, contentType: jsonType, body: geminiErrorJSON,
			want: Result{ErrorType: "RESOURCE_EXHAUSTED", ErrorMessage: "You exceeded your current quota, please check your plan and billing details."},
		},
		{
			name: "gemini blocked prompt", call: geminiCall, status: 200, contentType: jsonType, body: geminiBlockedJSON,
			want: Result{ResponseModel: "gemini-2.5-flash", ErrorType: "BLOCKED_SAFETY", Usage: Usage{Input: 7, Known: true}},
		},
		{
			name: "gzip", call: chatCall, status: 200, contentType: jsonType, encoding: "gzip", body: string(gzipBytes(t, openAICompletionsJSON)),
			want: Result{ResponseID: "cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7", ResponseModel: "gpt-3.5-turbo-instruct",
				FinishReasons: []string{"length"}, Usage: Usage{Input: 5, Output: 7, Known: true}},
		},
		{
			name: "deflate", call: chatCall, status: 200, contentType: jsonType, encoding: "Deflate", body: string(zlibBytes(t, openAICompletionsJSON)),
			want: Result{ResponseID: "cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7", ResponseModel: "gpt-3.5-turbo-instruct",
				FinishReasons: []string{"length"}, Usage: Usage{Input: 5, Output: 7, Known: true}},
		},
		{name: "bad gzip", call: chatCall, status: 200, contentType: jsonType, encoding: "gzip", body: openAIChatJSON},
		{name: "unknown encoding", call: chatCall, status: 200, contentType: jsonType, encoding: "br", body: openAIChatJSON},
		{name: "not json", call: chatCall, status: 502, contentType: "text/html", body: "<html>Bad gateway</html>", want: Result{ErrorType: "502"}},
		{name: "empty", call: chatCall, status: 200, contentType: jsonType},
		{name: "array for openai", call: chatCall, status: 200, contentType: jsonType, body: `[` + openAIChatJSON + `]`},
		{name: "truncated json keeps what came before", call: chatCall, status: 200, contentType: jsonType,
			body: openAIChatJSON[:strings.Index(openAIChatJSON, `"usage"`)+20],
			want: Result{ResponseID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", ResponseModel: "gpt-4o-2024-08-06", FinishReasons: []string{"stop", "length"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ParseResponse(tt.call, tt.status, tt.contentType, tt.encoding, []byte(tt.body))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseResponse =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestUsageUnknown checks that usage Baton cannot trust is never reported
// as a known zero.
func TestUsageUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		call Call
		body string
	}{
		{"openai no usage", chatCall, `{"choices":[{"finish_reason":"stop"}]}`},
		{"openai null usage", chatCall, `{"usage":null}`},
		{"openai empty usage", chatCall, `{"usage":{}}`},
		{"openai missing output", chatCall, `{"usage":{"prompt_tokens":5}}`},
		{"openai negative", chatCall, `{"usage":{"prompt_tokens":-5,"completion_tokens":3}}`},
		{"openai fractional", chatCall, `{"usage":{"prompt_tokens":5.5,"completion_tokens":3}}`},
		{"openai string", chatCall, `{"usage":{"prompt_tokens":"5","completion_tokens":3}}`},
		{"openai absurd", chatCall, `{"usage":{"prompt_tokens":1e13,"completion_tokens":3}}`},
		{"openai huge digits", chatCall, `{"usage":{"prompt_tokens":99999999999999999999999,"completion_tokens":3}}`},
		{"openai nan", chatCall, `{"usage":{"prompt_tokens":NaN,"completion_tokens":3}}`},
		{"openai cached above input", chatCall, `{"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":6}}}`},
		{"openai reasoning above output", chatCall, `{"usage":{"prompt_tokens":5,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":4}}}`},
		{"openai garbage details", chatCall, `{"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":[1]}}`},
		{"openai usage not an object", chatCall, `{"usage":[5,3]}`},
		{"openai cut inside usage", chatCall, `{"usage":{"prompt_tokens":5,"completion_tokens":3`},
		{"responses total only", responsesCall, `{"status":"completed","usage":{"total_tokens":9}}`},
		{"anthropic no output", messagesCall, `{"usage":{"input_tokens":5}}`},
		{"anthropic negative cache", messagesCall, `{"usage":{"input_tokens":5,"output_tokens":3,"cache_read_input_tokens":-1}}`},
		{"gemini no prompt count", geminiCall, `{"usageMetadata":{"candidatesTokenCount":3,"totalTokenCount":3}}`},
		{"gemini cached above prompt", geminiCall, `{"usageMetadata":{"promptTokenCount":3,"cachedContentTokenCount":4}}`},
		{"gemini garbage thoughts", geminiCall, `{"usageMetadata":{"promptTokenCount":3,"thoughtsTokenCount":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ParseResponse(tt.call, 200, jsonType, "", []byte(tt.body))
			if got.Usage != (Usage{}) {
				t.Errorf("Usage = %+v, want unknown zero", got.Usage)
			}
		})
	}
}

func TestUsageNumberForms(t *testing.T) {
	t.Parallel()
	got := ParseResponse(chatCall, 200, jsonType, "", []byte(`{"usage":{"prompt_tokens":1.2e1,"completion_tokens":3.0,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null}}}`))
	if want := (Usage{Input: 12, Output: 3, Known: true}); got.Usage != want {
		t.Errorf("Usage = %+v, want %+v", got.Usage, want)
	}
}

// reasonOf reads a finish reason as stringOf does, the usual ones without
// allocating.
func TestReasonOf(t *testing.T) {
	t.Parallel()
	for _, v := range []string{`"stop"`, `"length"`, `"end_turn"`, `"st\u006fp"`, `"STOP"`, `"other"`, `""`, `null`, `12`, `"stop`} {
		got, ok := reasonOf([]byte(v))
		want, wantOK := stringOf([]byte(v))
		if got != want || ok != wantOK {
			t.Errorf("reasonOf(%s) = %q, %v; stringOf says %q, %v", v, got, ok, want, wantOK)
		}
	}
}

// setModel reads a model's name as setString does, whatever name it read
// before: the same name again, names with escapes, an escape's decoding
// read raw, values that are no string.
func TestSetModel(t *testing.T) {
	t.Parallel()
	seq := []string{`"gpt-4.1"`, `"gpt-4.1"`, `"claude\u002dx"`, `"claude-x"`, `"claude\u002dx"`, `"a\\b"`, `"a\\b"`, `"a\b"`, "\"a\x08\"",
		`null`, `""`, `""`, `12`, `"gpt-4.1`, `"gpt-4.1"`}
	for i, v := range seq {
		var got, want string
		setModel(&got, []byte(v))
		setString(&want, []byte(v))
		if got != want {
			t.Errorf("%d: setModel(%s) = %q, setString says %q", i, v, got, want)
		}
	}
	kept := "kept"
	setModel(&kept, []byte(`"other"`))
	if kept != "kept" {
		t.Errorf("setModel replaced a model already read: %q", kept)
	}
}

// finish keeps one reason per choice, the last said for each, in the order
// the choices first gave one.
func TestFinishReasonsPerChoice(t *testing.T) {
	t.Parallel()
	var a acc
	for _, f := range []struct {
		idx    int
		reason string
	}{{1, "length"}, {0, "stop"}, {1, "stop"}, {2, ""}, {3, "tool_calls"}, {0, "content_filter"}} {
		a.finish(f.idx, f.reason)
	}
	if want := []string{"stop", "content_filter", "tool_calls"}; !reflect.DeepEqual(a.r.FinishReasons, want) {
		t.Errorf("FinishReasons = %q, want %q", a.r.FinishReasons, want)
	}
}

package journal

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

// Streams below follow the providers' documented wire formats, trimmed to a
// few content events.

const openAIChatJSON = `{
  "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "gpt-4o-2024-08-06",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "The image shows a wooden boardwalk.", "refusal": null, "annotations": []}, "logprobs": null, "finish_reason": "stop"}],
  "usage": {
    "prompt_tokens": 1117,
    "completion_tokens": 46,
    "total_tokens": 1163,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_fc9f1d7035"
}`

const openAIChatSSE = `data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

`

const openAIResponsesJSON = `{
  "id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41",
  "object": "response",
  "created_at": 1741476777,
  "status": "completed",
  "model": "gpt-4o-2024-08-06",
  "output": [{"type": "message", "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "A wooden boardwalk.", "annotations": []}]}],
  "usage": {
    "input_tokens": 328,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 52,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 380
  }
}`

const openAIResponsesSSE = `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","created_at":1741290958,"status":"in_progress","model":"gpt-4.1-2025-04-14","output":[],"usage":null}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":"Hi"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":5,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"text":"Hi there!"}

event: response.completed
data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","status":"completed","output":[{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there!","annotations":[]}]}],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}

`

const anthropicJSON = `{
  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [{"type": "text", "text": "Hi! My name is Claude."}],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {"input_tokens": 2095, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 503, "service_tier": "standard"}
}`

const anthropicCachedJSON = `{"id":"msg_01","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":50}}`

const anthropicSSE = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

`

const geminiJSON = `{
  "candidates": [{"content": {"parts": [{"text": "Once upon a time"}], "role": "model"}, "finishReason": "STOP", "avgLogprobs": -0.1}],
  "usageMetadata": {
    "promptTokenCount": 10,
    "candidatesTokenCount": 20,
    "totalTokenCount": 130,
    "cachedContentTokenCount": 4,
    "thoughtsTokenCount": 100,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 10}]
  },
  "modelVersion": "gemini-2.5-flash",
  "responseId": "mIvOaMuZJ8eJ1dkPp7mXuQ0"
}`

// Gemini's alt=sse streams separate events with CRLF CRLF.
const geminiSSE = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"The\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 8,\"totalTokenCount\": 8},\"modelVersion\": \"gemini-2.0-flash\"}\r\n\r\n" +
	"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" quick brown fox\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 8,\"candidatesTokenCount\": 12,\"totalTokenCount\": 20},\"modelVersion\": \"gemini-2.0-flash\"}\r\n\r\n" +
	"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" jumps.\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 8,\"candidatesTokenCount\": 30,\"totalTokenCount\": 38,\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 8}],\"candidatesTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 30}]},\"modelVersion\": \"gemini-2.0-flash\",\"responseId\": \"x9i2aKDZBJ2Y1dkP7rqUoQ4\"}\r\n\r\n"

// Without alt=sse, streamGenerateContent returns one JSON array.
const geminiArray = `[{
  "candidates": [{"content": {"parts": [{"text": "The"}], "role": "model"}, "index": 0}],
  "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
  "modelVersion": "gemini-2.0-flash"
}
,
{
  "candidates": [{"content": {"parts": [{"text": " fox jumps."}], "role": "model"}, "finishReason": "STOP", "index": 0}],
  "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 30, "thoughtsTokenCount": 5, "totalTokenCount": 43},
  "modelVersion": "gemini-2.0-flash"
}
]`

type modelUsageCase struct {
	name            string
	contentType     string
	contentEncoding string
	body            string
	want            int64
}

func modelUsageCases(t testing.TB) []modelUsageCase {
	const (
		jsonType = "application/json"
		sseType  = "text/event-stream"
	)
	return []modelUsageCase{
		{name: "openai chat json", contentType: jsonType, body: openAIChatJSON, want: 1163},
		{name: "openai chat sse", contentType: sseType, body: openAIChatSSE, want: 21},
		{name: "openai chat sse without include_usage", contentType: sseType,
			body: "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\ndata: [DONE]\n\n", want: 0},
		{name: "openai responses json", contentType: jsonType, body: openAIResponsesJSON, want: 380},
		{name: "openai responses sse", contentType: sseType, body: openAIResponsesSSE, want: 48},
		{name: "anthropic json", contentType: jsonType, body: anthropicJSON, want: 2095 + 503},
		{name: "anthropic json cache tokens are input", contentType: jsonType, body: anthropicCachedJSON, want: 10 + 100 + 2000 + 50},
		{name: "anthropic sse", contentType: sseType, body: anthropicSSE, want: 25 + 15},
		{name: "gemini json thoughts are output", contentType: jsonType, body: geminiJSON, want: 130},
		{name: "gemini sse crlf", contentType: sseType, body: geminiSSE, want: 38},
		{name: "gemini json array", contentType: jsonType, body: geminiArray, want: 43},
		{name: "total above input plus output", contentType: jsonType,
			body: `{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":50}}`, want: 50},
		{name: "input plus output above total", contentType: jsonType,
			body: `{"usage":{"prompt_tokens":30,"completion_tokens":30,"total_tokens":50}}`, want: 60},
		{name: "content type parameters and case", contentType: "Text/Event-Stream; charset=utf-8", body: anthropicSSE, want: 40},
		{name: "json with charset", contentType: "application/json; charset=UTF-8", body: geminiJSON, want: 130},
		{name: "sse multi-line data", contentType: sseType,
			body: "event: message\ndata: {\"usage\":\ndata: {\"prompt_tokens\": 3,\ndata:\"completion_tokens\": 4}}\n\n", want: 7},
		{name: "sse comments, other fields and lone cr", contentType: sseType,
			body: ": keep-alive\rid: 1\rretry: 100\rdata: {\"usage\":{\"total_tokens\":9}}\r\r", want: 9},
		{name: "sse last event without blank line", contentType: sseType,
			body: `data: {"usage":{"input_tokens":2,"output_tokens":3}}`, want: 5},
		{name: "sse skips done and non-json data", contentType: sseType,
			body: "data: usage\n\ndata: [DONE]\n\ndata: {\"usage\":{\"total_tokens\":4}}\n\ndata: [DONE]\n\n", want: 4},
		{name: "sse array data", contentType: sseType,
			body: "data: [{\"usageMetadata\":{\"totalTokenCount\":6}}, 1, \"x\"]\n\n", want: 6},
		{name: "gzip json", contentType: jsonType, contentEncoding: "gzip", body: gzipString(t, openAIChatJSON), want: 1163},
		{name: "gzip sse", contentType: sseType, contentEncoding: " GZIP ", body: gzipString(t, anthropicSSE), want: 40},
		{name: "identity", contentType: jsonType, contentEncoding: "identity", body: openAIChatJSON, want: 1163},
		{name: "gzip truncated keeps earlier events", contentType: sseType, contentEncoding: "gzip",
			body: truncatedGzip(t, "data: {\"usage\":{\"total_tokens\":8}}\n\n"+strings.Repeat("data: {}\n\n", 1000)), want: 8},
		{name: "bad gzip", contentType: jsonType, contentEncoding: "gzip", body: openAIChatJSON, want: 0},
		{name: "unsupported encoding", contentType: jsonType, contentEncoding: "br", body: openAIChatJSON, want: 0},
		{name: "stacked encodings", contentType: jsonType, contentEncoding: "gzip, br", body: gzipString(t, openAIChatJSON), want: 0},
		{name: "no usage", contentType: jsonType, body: `{"choices":[{"message":{"content":"hi"}}]}`, want: 0},
		{name: "null usage", contentType: jsonType, body: `{"usage":null}`, want: 0},
		{name: "empty body", contentType: jsonType, body: "", want: 0},
		{name: "usage key is case-sensitive", contentType: jsonType, body: `{"Usage":{"total_tokens":5}}`, want: 0},
		{name: "garbage", contentType: jsonType, body: "usage\x00\xff{{[[\"", want: 0},
		{name: "truncated json", contentType: jsonType, body: openAIChatJSON[:len(openAIChatJSON)/2] + "usage", want: 0},
		{name: "usage of wrong type", contentType: jsonType, body: `{"usage":"lots","usageMetadata":[1]}`, want: 0},
		{name: "counts of wrong type skipped alone", contentType: jsonType,
			body: `{"usage":{"prompt_tokens":"12","completion_tokens":5,"total_tokens":true}}`, want: 5},
		{name: "negative and absurd counts ignored", contentType: jsonType,
			body: `{"usage":{"prompt_tokens":-5,"completion_tokens":1e13,"total_tokens":1e400,"input_tokens":7}}`, want: 7},
		{name: "largest believable count", contentType: jsonType, body: `{"usage":{"total_tokens":1e12}}`, want: 1e12},
		{name: "float counts", contentType: jsonType, body: `{"usage":{"prompt_tokens":12.0,"completion_tokens":1.5e1}}`, want: 27},
		{name: "unknown content type still tried as json", contentType: "", body: anthropicJSON, want: 2598},
		{name: "sse body labelled json", contentType: jsonType, body: anthropicSSE, want: 0},
	}
}

// modelUsageLimitCases inflate to more than 8 MiB; they are kept out of the
// fuzz seeds, which they would slow to a crawl.
func modelUsageLimitCases(t testing.TB) []modelUsageCase {
	// padding is a 9 MiB SSE comment: beyond what a gzip body is inflated to.
	padding := ":" + strings.Repeat(" ", 9<<20) + "\n\n"
	event := "data: {\"usage\":{\"total_tokens\":8}}\n\n"
	return []modelUsageCase{
		{name: "gzip usage within limit", contentType: "text/event-stream", contentEncoding: "gzip",
			body: gzipString(t, event+padding), want: 8},
		{name: "gzip usage beyond limit", contentType: "text/event-stream", contentEncoding: "gzip",
			body: gzipString(t, padding+event), want: 0},
	}
}

func TestModelUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range append(modelUsageCases(t), modelUsageLimitCases(t)...) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := modelUsage(tc.contentType, tc.contentEncoding, []byte(tc.body)); got != tc.want {
				t.Errorf("modelUsage(%q, %q, ...) = %d, want %d", tc.contentType, tc.contentEncoding, got, tc.want)
			}
		})
	}
}

func FuzzModelUsage(f *testing.F) {
	for _, tc := range modelUsageCases(f) {
		f.Add(tc.contentType, tc.contentEncoding, []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, contentType, contentEncoding string, body []byte) {
		got := modelUsage(contentType, contentEncoding, body)
		if got < 0 {
			t.Fatalf("modelUsage = %d, want >= 0", got)
		}
		// Compressing an identity body must not change the answer.
		if enc := strings.ToLower(strings.TrimSpace(contentEncoding)); enc == "" || enc == "identity" {
			if zipped := modelUsage(contentType, "gzip", []byte(gzipString(t, string(body)))); zipped != got {
				t.Fatalf("gzip changed usage: %d, want %d", zipped, got)
			}
		}
	})
}

func gzipString(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// truncatedGzip compresses s and drops the end of the stream.
func truncatedGzip(t testing.TB, s string) string {
	t.Helper()
	z := gzipString(t, s)
	return z[:len(z)-20]
}

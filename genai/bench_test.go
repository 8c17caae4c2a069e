package genai

import (
	"fmt"
	"strings"
	"testing"
)

// Realistic traffic for the benchmarks: a chat request with some history,
// an embeddings answer of 1,536 floats, and streams of a few hundred
// content events shaped as each provider sends them.

func chatRequest() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"max_completion_tokens":2048,"messages":[`)
	b.WriteString(`{"role":"system","content":"You are a careful assistant that answers in short, exact sentences."}`)
	for i := range 20 {
		fmt.Fprintf(&b, `,{"role":"user","content":"Question %d: what is the capital of country number %d, and why is it \"the capital\"?"}`, i, i)
		fmt.Fprintf(&b, `,{"role":"assistant","content":"Answer %d: it is the city the government sits in.\nThat is all."}`, i)
	}
	b.WriteString(`],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`)
	return []byte(b.String())
}

func embeddingsAnswer() []byte {
	var b strings.Builder
	b.WriteString(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[`)
	for i := range 1536 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%.9f", float64(i%97)/97-0.5)
	}
	b.WriteString(`]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`)
	return []byte(b.String())
}

// streamOf builds a stream: head, n content events made by content(i), tail.
func streamOf(head string, n int, content func(i int) string, tail string) []byte {
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		b.WriteString(content(i))
	}
	b.WriteString(tail)
	return []byte(b.String())
}

type benchStream struct {
	name        string
	call        Call
	contentType string
	body        []byte
}

func benchStreams() []benchStream {
	const n = 300
	openAIChat := streamOf(
		`data: {"id":"chatcmpl-Bx","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n",
		n, func(i int) string {
			return fmt.Sprintf(`data: {"id":"chatcmpl-Bx","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" word%d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
		},
		`data: {"id":"chatcmpl-Bx","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`+"\n\n"+
			`data: {"id":"chatcmpl-Bx","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":{"prompt_tokens":900,"completion_tokens":301,"total_tokens":1201,"prompt_tokens_details":{"cached_tokens":512,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`+"\n\ndata: [DONE]\n\n")
	responses := streamOf(
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5.4-2026-03-05\",\"output\":[],\"usage\":null}}\n\n",
		n, func(i int) string {
			return fmt.Sprintf("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654\",\"output_index\":0,\"content_index\":0,\"delta\":\" word%d\",\"logprobs\":[]}\n\n", i+1, i)
		},
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":999,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"gpt-5.4-2026-03-05\",\"output\":[],\"usage\":{\"input_tokens\":900,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":301,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":1201}}}\n\n")
	anthropic := streamOf(
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":900,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		n, func(i int) string {
			return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word%d\"}}\n\n", i)
		},
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":301}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	gemini := streamOf("", n, func(i int) string {
		return fmt.Sprintf("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" word%d\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 900,\"candidatesTokenCount\": %d,\"totalTokenCount\": %d},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"x9i2aKDZBJ2Y1dkP7rqUoQ4\"}\r\n\r\n", i, i+1, 901+i)
	}, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 900,\"candidatesTokenCount\": 301,\"totalTokenCount\": 1201},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"x9i2aKDZBJ2Y1dkP7rqUoQ4\"}\r\n\r\n")
	return []benchStream{
		{"openai-chat", chatStreamCall, sseType, openAIChat},
		{"openai-responses", responsesStream, sseType, responses},
		{"anthropic", messagesStream, sseType, anthropic},
		{"gemini", geminiStream, sseType, gemini},
	}
}

func BenchmarkDetect(b *testing.B) {
	body := chatRequest()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Detect(OpenAI, "POST", "/v1/chat/completions", body); !ok {
			b.Fatal("not a call")
		}
	}
}

func BenchmarkParseResponse(b *testing.B) {
	for _, bb := range []struct {
		name string
		call Call
		body []byte
	}{
		{"openai-chat", chatCall, []byte(openAIChatJSON)},
		{"openai-responses", responsesCall, []byte(openAIResponsesJSON)},
		{"openai-embeddings-1536", embeddingsCall, embeddingsAnswer()},
		{"anthropic", messagesCall, []byte(anthropicJSON)},
		{"gemini", geminiCall, []byte(geminiJSON)},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				if r := ParseResponse(bb.call, 200, jsonType, "", bb.body); !r.Usage.Known {
					b.Fatal("usage not known")
				}
			}
		})
	}
}

// BenchmarkStream reads whole streams written in 4 KiB chunks, as a proxy
// passes them, and reports the cost per event.
func BenchmarkStream(b *testing.B) {
	for _, bs := range benchStreams() {
		b.Run(bs.name, func(b *testing.B) {
			var events int
			b.SetBytes(int64(len(bs.body)))
			b.ReportAllocs()
			for b.Loop() {
				s := NewStream(bs.call, 200, bs.contentType, "", nil)
				for i := 0; i < len(bs.body); i += 4096 {
					_, _ = s.Write(bs.body[i:min(i+4096, len(bs.body))])
				}
				_ = s.Close()
				r := s.Result()
				if !r.Usage.Known || !r.Ended {
					b.Fatalf("Result = %+v", r)
				}
				events = r.Events
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}

// TestStreamContentEventAllocs checks that a content event of a stream
// under way costs no allocation.
func TestStreamContentEventAllocs(t *testing.T) {
	for _, bs := range benchStreams() {
		if bs.name == "gemini" {
			continue // every Gemini chunk carries usage, read each time
		}
		s := NewStream(bs.call, 200, bs.contentType, "", nil)
		half := len(bs.body) / 2
		end := strings.LastIndex(string(bs.body[:half]), "\n\n") + 2
		_, _ = s.Write(bs.body[:end])
		start := strings.LastIndex(string(bs.body[:end-2]), "\n\n") + 2
		event := bs.body[start:end]
		if n := testing.AllocsPerRun(100, func() { _, _ = s.Write(event) }); n != 0 {
			t.Errorf("%s: %v allocations per content event", bs.name, n)
		}
	}
}

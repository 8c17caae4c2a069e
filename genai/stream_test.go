package genai

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// streamCase is a streamed answer and what Baton must read of it. token
// is a substring of the first event that carries output, "" when none does.
type streamCase struct {
	name        string
	call        Call
	contentType string
	body        string
	want        StreamResult
	token       string
}

func streamCases() []streamCase {
	return []streamCase{
		{
			name: "openai chat with usage", call: chatStreamCall, contentType: sseType, body: openAIChatSSE, token: `"Hello"`,
			want: StreamResult{Result: Result{ResponseID: "chatcmpl-123", ResponseModel: "gpt-4o-mini-2024-07-18", FinishReasons: []string{"stop"},
				Usage: Usage{Input: 9, Output: 12, Known: true}}, Ended: true, Events: 7},
		},
		{
			name: "openai chat without usage", call: chatStreamCall, contentType: sseType, body: openAIChatSSENoUsage, token: `"Hi"`,
			want: StreamResult{Result: Result{ResponseID: "chatcmpl-9", ResponseModel: "gpt-4.1-2025-04-14", FinishReasons: []string{"stop"}},
				Ended: true, Events: 3},
		},
		{
			name: "azure chat with a tool call", call: azureStreamCall, contentType: "text/event-stream; charset=utf-8", body: azureChatSSE, token: `"tool_calls":[`,
			want: StreamResult{Result: Result{ResponseID: "chatcmpl-AAz", ResponseModel: "gpt-4o-2024-11-20", FinishReasons: []string{"tool_calls"},
				Usage: Usage{Input: 81, Output: 17, Known: true}}, Ended: true, Events: 6},
		},
		{
			name: "openai responses", call: responsesStream, contentType: sseType, body: openAIResponsesSSE, token: `"delta":"Hi"`,
			want: StreamResult{Result: Result{ResponseID: "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654", ResponseModel: "gpt-4.1-2025-04-14",
				FinishReasons: []string{"stop"}, Usage: Usage{Input: 37, Output: 11, Known: true}}, Ended: true, Events: 8},
		},
		{
			name: "openai responses incomplete", call: responsesStream, contentType: sseType, body: openAIResponsesIncomplete, token: `"Thinking"`,
			want: StreamResult{Result: Result{ResponseID: "resp_2", ResponseModel: "o4-mini-2025-04-16", FinishReasons: []string{"max_output_tokens"},
				Usage: Usage{Input: 20, Output: 16, Reasoning: 16, Known: true}}, Ended: true, Events: 3},
		},
		{
			name: "openai responses failed", call: responsesStream, contentType: sseType, body: openAIResponsesFailed,
			want: StreamResult{Result: Result{ResponseID: "resp_3", ResponseModel: "gpt-5", FinishReasons: []string{"error"},
				ErrorType: "server_error", ErrorMessage: "The model failed to generate a response."}, Ended: true, Events: 2},
		},
		{
			name: "anthropic", call: messagesStream, contentType: sseType, body: anthropicSSE, token: `"The user wants`,
			want: StreamResult{Result: Result{ResponseID: "msg_019Q1hrJbZG26Fb9BQhrkHEr", ResponseModel: "claude-opus-4-8", FinishReasons: []string{"tool_use"},
				Usage: Usage{Input: 1577, CachedInput: 1200, Output: 89, Reasoning: 30, Known: true}}, Ended: true, Events: 16},
		},
		{
			name: "anthropic overloaded", call: messagesStream, contentType: sseType, body: anthropicSSEOverloaded, token: `"Hel"`,
			want: StreamResult{Result: Result{ResponseID: "msg_2", ResponseModel: "claude-haiku-4-5-20251001",
				ErrorType: "overloaded_error", ErrorMessage: "Overloaded"}, Ended: true, Events: 4},
		},
		{
			name: "gemini sse", call: geminiStream, contentType: sseType, body: geminiSSE, token: `"The quick`,
			want: StreamResult{Result: Result{ResponseID: "x9i2aKDZBJ2Y1dkP7rqUoQ4", ResponseModel: "gemini-2.5-pro", FinishReasons: []string{"max_tokens"},
				Usage: Usage{Input: 8, Output: 70, Reasoning: 40, Known: true}}, Ended: true, Events: 3},
		},
		{
			name: "gemini json array", call: geminiStream, contentType: "application/json; charset=UTF-8", body: geminiArray, token: `"functionCall"`,
			want: StreamResult{Result: Result{ResponseID: "abc", ResponseModel: "gemini-2.5-flash-lite", FinishReasons: []string{"stop"},
				Usage: Usage{Input: 8, Output: 35, Reasoning: 5, Known: true}}, Ended: true, Events: 2},
		},
		{
			name: "an error answer to a stream request", call: chatStreamCall, contentType: jsonType, body: openAIErrorJSON,
			want: StreamResult{Result: Result{ErrorType: "rate_limit_exceeded",
				ErrorMessage: "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000."},
				Ended: true, Events: 1},
		},
	}
}

// byteClock is a clock that reads how many bytes have been written, so that
// a time says which byte delivered an event.
type byteClock struct{ n atomic.Int64 }

func (c *byteClock) now() time.Time { return time.Unix(0, c.n.Load()) }

// runStream feeds body to a Stream in the given chunk lengths (the rest in
// one), then closes it.
func runStream(tc streamCase, status int, encoding string, body string, chunks []int) StreamResult {
	var clock byteClock
	s := NewStream(tc.call, status, tc.contentType, encoding, clock.now)
	for _, n := range chunks {
		n = min(n, len(body))
		clock.n.Add(int64(n))
		_, _ = s.Write([]byte(body[:n]))
		body = body[n:]
	}
	clock.n.Add(int64(len(body)))
	_, _ = s.Write([]byte(body))
	_ = s.Close()
	return s.Result()
}

// withoutTimes clears a result's times, which the tests check apart.
func withoutTimes(r StreamResult) StreamResult {
	r.FirstChunkAt, r.FirstTokenAt = time.Time{}, time.Time{}
	if len(r.FinishReasons) == 0 {
		r.FinishReasons = nil
	}
	return r
}

// dispatchOffset returns how many bytes have been written when the event
// holding marker is delivered: through the blank line that ends it, or the
// end of its array element.
func dispatchOffset(body, marker string) int {
	i := strings.Index(body, marker)
	if strings.HasPrefix(body, "[") {
		depth := 0
		j := strings.LastIndex(body[:i], "\n{")
		if j < 0 {
			j = strings.IndexByte(body, '{')
		}
		for ; j < len(body); j++ {
			switch body[j] {
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
	}
	lf, crlf := strings.Index(body[i:], "\n\n"), strings.Index(body[i:], "\r\n\r\n")
	if crlf >= 0 && (lf < 0 || crlf < lf) {
		return i + crlf + 3
	}
	return i + lf + 2
}

func TestStream(t *testing.T) {
	t.Parallel()
	for _, tc := range streamCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			whole := runStream(tc, 200, "", tc.body, nil)
			if got := withoutTimes(whole); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Result =\n%+v\nwant\n%+v", got, tc.want)
			}
			if whole.FirstChunkAt.IsZero() {
				t.Error("FirstChunkAt is zero")
			}
			if tc.token == "" && !whole.FirstTokenAt.IsZero() {
				t.Error("FirstTokenAt is set for an answer without tokens")
			}

			// Byte by byte, the first token time is the byte that ends the
			// first event carrying one.
			ones := make([]int, len(tc.body))
			for i := range ones {
				ones[i] = 1
			}
			bytewise := runStream(tc, 200, "", tc.body, ones)
			if got := withoutTimes(bytewise); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("byte by byte, Result =\n%+v\nwant\n%+v", got, tc.want)
			}
			if tc.token != "" {
				want := dispatchOffset(tc.body, tc.token)
				if got := int(bytewise.FirstTokenAt.UnixNano()); got != want {
					t.Errorf("first token at byte %d, want %d", got, want)
				}
			}
		})
	}
}

// TestStreamSplitAnywhere splits each stream in two at every byte, and in
// random pieces: the result must not depend on the split.
func TestStreamSplitAnywhere(t *testing.T) {
	t.Parallel()
	for _, tc := range streamCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for i := 0; i <= len(tc.body); i++ {
				if got := withoutTimes(runStream(tc, 200, "", tc.body, []int{i})); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("split at %d (%q|%q): Result =\n%+v\nwant\n%+v", i, tc.body[max(0, i-10):i], tc.body[i:min(len(tc.body), i+10)], got, tc.want)
				}
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.body))))
			for range 200 {
				var chunks []int
				for n := 0; n < len(tc.body); {
					c := 1 + rng.IntN(64)
					chunks, n = append(chunks, c), n+c
				}
				if got := withoutTimes(runStream(tc, 200, "", tc.body, chunks)); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("chunks %v: Result =\n%+v\nwant\n%+v", chunks, got, tc.want)
				}
			}
		})
	}
}

// TestStreamCompressed feeds compressed streams in small pieces.
func TestStreamCompressed(t *testing.T) {
	t.Parallel()
	for _, tc := range streamCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, enc := range []struct {
				name string
				body []byte
			}{{"gzip", gzipBytes(t, tc.body)}, {"deflate", zlibBytes(t, tc.body)}} {
				chunks := make([]int, len(enc.body)/7)
				for i := range chunks {
					chunks[i] = 7
				}
				if got := withoutTimes(runStream(tc, 200, enc.name, string(enc.body), chunks)); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: Result =\n%+v\nwant\n%+v", enc.name, got, tc.want)
				}
			}
		})
	}
}

func TestStreamCutShort(t *testing.T) {
	t.Parallel()
	for _, tc := range streamCases() {
		if tc.want.ErrorType != "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Cut just before the final usage is complete.
			key := `"usage`
			if tc.call.Endpoint == GenerateContent {
				key = `"usageMetadata`
			}
			cut := strings.LastIndex(tc.body, key) + 10
			got := runStream(tc, 200, "", tc.body[:cut], nil)
			if got.Ended {
				t.Error("a stream cut short Ended")
			}
			if got.Usage.Known {
				t.Errorf("a stream cut before its usage has usage %+v", got.Usage)
			}
		})
	}
}

func TestStreamErrorStatus(t *testing.T) {
	t.Parallel()
	s := NewStream(chatStreamCall, 503, "text/html", "", nil)
	_, _ = s.Write([]byte("<html>upstream down</html>"))
	_ = s.Close()
	if got := s.Result(); got.ErrorType != "503" || got.Usage.Known {
		t.Errorf("Result = %+v", got)
	}
	s = NewStream(chatStreamCall, 200, sseType, "br", nil)
	_, _ = s.Write([]byte(openAIChatSSE))
	_ = s.Close()
	if got := s.Result(); got.Events != 0 || got.Usage.Known {
		t.Errorf("an unreadable encoding read %+v", got)
	}
}

// TestStreamOversized checks that an event larger than MaxEventBytes is not
// kept, and that its usage is still read from its tail.
func TestStreamOversized(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("All work and no play. ", MaxEventBytes/10)
	body := strings.Replace(openAIResponsesSSE, `"text":"Hi there!","annotations":[]}]}],"usage"`, `"text":"`+big+`","annotations":[]}]}],"usage"`, 1)
	body = strings.Replace(body, `"delta":" there!"`, `"delta":"`+big+`"`, 1)
	tc := streamCase{call: responsesStream, contentType: sseType}
	want := StreamResult{Result: Result{ResponseID: "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654", ResponseModel: "gpt-4.1-2025-04-14",
		FinishReasons: []string{"stop"}, Usage: Usage{Input: 37, Output: 11, Known: true}}, Ended: true, Events: 8, Oversized: 2}
	for _, chunk := range []int{1 << 10, 100 << 10, 3 << 20} {
		chunks := make([]int, len(body)/chunk+1)
		for i := range chunks {
			chunks[i] = chunk
		}
		if got := withoutTimes(runStream(tc, 200, "", body, chunks)); !reflect.DeepEqual(got, want) {
			t.Errorf("chunks of %d: Result =\n%+v\nwant\n%+v", chunk, got, want)
		}
	}

	// The same for a whole Anthropic answer and a Gemini chunk.
	msg := strings.Replace(anthropicJSON, "Hi! My name is Claude.", big, 1)
	if got := ParseResponse(messagesCall, 200, jsonType, "", []byte(msg)); got.Usage.Input != 2110 || got.FinishReasons[0] != "end_turn" {
		t.Errorf("whole answer: %+v", got)
	}
	s := NewStream(messagesCall, 200, jsonType, "", nil)
	_, _ = s.Write([]byte(msg))
	_ = s.Close()
	if got := s.Result(); got.Usage.Input != 2110 || got.Oversized != 1 || got.ResponseModel != "claude-sonnet-4-5-20250929" || !got.Ended {
		t.Errorf("streamed whole answer: %+v", got)
	}
	gem := strings.Replace(geminiSSE, "The quick brown fox", big, 1)
	s = NewStream(geminiStream, 200, sseType, "", nil)
	_, _ = s.Write([]byte(gem))
	_ = s.Close()
	if got := s.Result(); got.Usage.Output != 70 || got.Oversized != 1 {
		t.Errorf("gemini: %+v", got)
	}
}

// TestStreamBoundedMemory feeds one endless data line: the stream keeps at
// most MaxEventBytes of it.
func TestStreamBoundedMemory(t *testing.T) {
	t.Parallel()
	s := NewStream(chatStreamCall, 200, sseType, "", nil)
	_, _ = s.Write([]byte("data: {\"x\":\""))
	chunk := []byte(strings.Repeat("y", 64<<10))
	for range 200 { // 12.5 MiB
		_, _ = s.Write(chunk)
		if c := cap(s.ev.buf); c > MaxEventBytes {
			t.Fatalf("event buffer grew to %d", c)
		}
	}
	_, _ = s.Write([]byte("\"}\n\n" + openAIChatSSE))
	_ = s.Close()
	got := s.Result()
	if got.Oversized != 1 || !got.Usage.Known || cap(s.ev.buf) > keepBytes {
		t.Errorf("Result = %+v, buffer %d", got, cap(s.ev.buf))
	}
}

// TestStreamConcurrentResult reads the result while a compressed stream is
// written, for the race detector.
func TestStreamConcurrentResult(t *testing.T) {
	t.Parallel()
	body := gzipBytes(t, strings.Repeat(openAIChatSSE, 20))
	s := NewStream(chatStreamCall, 200, sseType, "gzip", nil)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 100 {
			_ = s.Result()
		}
	})
	for i := 0; i < len(body); i += 50 {
		_, _ = s.Write(body[i:min(i+50, len(body))])
	}
	_ = s.Close()
	wg.Wait()
	if got := s.Result(); got.Events != 140 || !got.Usage.Known {
		t.Errorf("Result = %+v", got)
	}
}

func TestStreamSSEFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       Usage
		ended      bool
	}{
		{"multi-line data", "event: message\ndata: {\"usage\":\ndata: {\"prompt_tokens\": 3,\ndata:\"completion_tokens\": 4}}\n\n", Usage{Input: 3, Output: 4, Known: true}, false},
		{"comments, other fields, lone CR", ": keep-alive\rid: 1\rretry: 100\rdata: {\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":0}}\r\r", Usage{Input: 9, Known: true}, false},
		{"no space after colon", "data:{\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}\n\ndata:[DONE]\n\n", Usage{Input: 2, Output: 1, Known: true}, true},
		{"last event ends with one newline", "data: {\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}\n\ndata: [DONE]\n", Usage{Input: 2, Output: 1, Known: true}, true},
		{"last event cut mid-line", "data: {\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}", Usage{}, false},
		{"field names are exact", "datum: {\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}\n\nDATA: [DONE]\n\ndata\n\n", Usage{}, false},
		{"a data line without colon adds an empty line", "data\ndata: {\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}\n\n", Usage{Input: 2, Output: 1, Known: true}, false},
		{"LF, then lone CR, then CRLF", "data: {\"id\":\"a\"}\n\ndata: {\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6}}\r\rdata: {\"id\":\"b\"}\r\n\r\ndata: [DONE]\n\n", Usage{Input: 5, Output: 6, Known: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Whole, and split at every byte: a chunk with a CR and one
			// without read alike.
			for i := 0; i <= len(tt.body); i++ {
				got := runStream(streamCase{call: chatStreamCall, contentType: sseType}, 200, "", tt.body, []int{i})
				if got.Usage != tt.want || got.Ended != tt.ended {
					t.Fatalf("split at %d: Usage = %+v, Ended = %v; want %+v, %v", i, got.Usage, got.Ended, tt.want, tt.ended)
				}
			}
		})
	}
}

// TestStreamExpect: an answer's length, told or mistold, changes nothing
// read of it, however it is split; told rightly, a whole document is kept
// in one buffer.
func TestStreamExpect(t *testing.T) {
	cases := append(streamCases(), streamCase{name: "openai chat whole", call: chatCall, contentType: jsonType, body: openAIChatJSON,
		want: StreamResult{Result: ParseResponse(chatCall, 200, jsonType, "", []byte(openAIChatJSON)), Ended: true, Events: 1}})
	for _, tc := range cases {
		for _, n := range []int{len(tc.body), len(tc.body) / 2, 2 * len(tc.body), 1} {
			for _, chunk := range []int{7, 100, len(tc.body)} {
				s := NewStream(tc.call, 200, tc.contentType, "", nil)
				s.Expect(int64(n))
				for b := tc.body; len(b) > 0; {
					k := min(chunk, len(b))
					_, _ = s.Write([]byte(b[:k]))
					b = b[k:]
				}
				_ = s.Close()
				if got := withoutTimes(s.Result()); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s, told %d bytes, in chunks of %d: Result =\n%+v\nwant\n%+v", tc.name, n, chunk, got, tc.want)
				}
			}
		}
	}
	body := []byte(openAIChatJSON)
	allocs := func(expect bool, piece int) float64 {
		return testing.AllocsPerRun(50, func() {
			var s Stream
			s.Init(chatCall, 200, jsonType, "", nil)
			if expect {
				s.Expect(int64(len(body)))
			}
			for b := body; len(b) > 0; b = b[min(piece, len(b)):] {
				_, _ = s.Write(b[:min(piece, len(b))])
			}
			_ = s.Close()
		})
	}
	for _, piece := range []int{256, len(body)} {
		if told, untold := allocs(true, piece), allocs(false, piece); told >= untold {
			t.Errorf("a %d-byte answer read in %d-byte pieces: %v allocations told its length, %v untold; want fewer told", len(body), piece, told, untold)
		}
	}
	if inPieces, whole := allocs(true, 256), allocs(true, len(body)); whole >= inPieces {
		t.Errorf("a %d-byte answer told its length: %v allocations read in one piece, %v in pieces; want fewer in one (read in place)", len(body), whole, inPieces)
	}
}

// TestStreamDocumentEnded: an answer that is one document (not an event
// stream nor an array of them) is whole exactly when wholeJSON says so:
// cut anywhere, followed by space or by anything else, or malformed.
func TestStreamDocumentEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		call Call
		body string
	}{{chatCall, openAIChatJSON}, {responsesCall, openAIResponsesJSON}, {messagesCall, anthropicJSON},
		{geminiCall, geminiJSON}, {chatCall, `{"id":"x",}`}, {chatCall, `{"choices":[{"finish_reason":"stop"}}`}} {
		for _, body := range []string{tc.body, tc.body + " \r\n", tc.body + `{"id":"y"}`, tc.body + "]", " " + tc.body} {
			for i := 0; i <= len(body); i++ {
				cut := body[:i]
				s := NewStream(tc.call, 200, jsonType, "", nil)
				_, _ = s.Write([]byte(cut))
				_ = s.Close()
				got, want := s.Result().Ended, wholeJSON([]byte(cut)) && skipSpace([]byte(cut), 0) < len(cut)
				if got != want {
					t.Fatalf("%q: Ended = %v, want %v", cut, got, want)
				}
			}
		}
	}
}

// TestStreamRequestUnread reads each answer for a call known by its path
// only (DetectPath, its body unread): an answer of Server-Sent Events is a
// stream all the same, with the same result and first token as when the
// request said "stream": true.
func TestStreamRequestUnread(t *testing.T) {
	t.Parallel()
	for _, tc := range streamCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := runStream(tc, 200, "", tc.body, nil)
			unread := tc
			unread.call.RequestModel, unread.call.MaxTokens = "", 0
			if unread.call.Endpoint != GenerateContent { // Gemini's path says it streams
				unread.call.Stream = false
			}
			got := runStream(unread, 200, "", tc.body, nil)
			if !reflect.DeepEqual(withoutTimes(got), withoutTimes(want)) || !got.FirstTokenAt.Equal(want.FirstTokenAt) {
				t.Fatalf("request unread: Result =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

package journal

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
)

const (
	// maxUsageInflated caps how much of a gzip body modelUsage decompresses.
	maxUsageInflated = 8 << 20
	// maxUsageTokens is the largest single count believed; larger (or
	// negative) numbers are treated as absent.
	maxUsageTokens = 1e12
)

// modelUsage estimates the model tokens a response stands for, from the
// provider's usage field, or 0 when the body has none.
//
// body is the complete response body. contentType selects the framing:
// "text/event-stream" is read as Server-Sent Events, and each event's data
// (multi-line data joined with "\n"; "[DONE]" and non-JSON data skipped) is
// decoded as JSON; anything else is decoded as one JSON document. A JSON
// array, at the top of the body or of an event, has each element read in
// turn. contentEncoding may be empty, "identity" or "gzip" (at most
// maxUsageInflated bytes are decompressed); any other encoding yields 0.
//
// Each JSON object is searched for these shapes:
//
//   - OpenAI Chat Completions: "usage": {"prompt_tokens",
//     "completion_tokens", "total_tokens"}; when streaming with
//     stream_options.include_usage, only the final chunk carries it.
//   - OpenAI Responses: "usage": {"input_tokens", "output_tokens",
//     "total_tokens"}; when streaming, the response.completed event carries
//     it as "response": {"usage": {...}}.
//   - Anthropic Messages: "usage": {"input_tokens", "output_tokens",
//     "cache_creation_input_tokens", "cache_read_input_tokens"}, the cache
//     counts being billed input on top of input_tokens; when streaming,
//     message_start carries "message": {"usage": {...}} and each
//     message_delta a cumulative top-level "usage": {"output_tokens"}.
//   - Gemini generateContent / streamGenerateContent: "usageMetadata":
//     {"promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
//     "totalTokenCount"}, output being candidates plus thoughts
//     (cachedContentTokenCount is already part of promptTokenCount); every
//     streamed chunk carries it and the last is cumulative.
//
// Across all objects the largest input, output and total seen are kept, and
// the result is the larger of total and input+output. As a cheap exit, a
// (decompressed) body without the bytes "usage" is not decoded at all.
func modelUsage(contentType, contentEncoding string, body []byte) int64 {
	switch strings.ToLower(strings.TrimSpace(contentEncoding)) {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return 0
		}
		// A truncated or corrupt tail still leaves the events before it.
		body, _ = io.ReadAll(io.LimitReader(zr, maxUsageInflated))
	default:
		return 0
	}
	if !bytes.Contains(body, []byte("usage")) {
		return 0
	}

	var t usageTally
	mediaType, _, _ := strings.Cut(contentType, ";")
	if strings.EqualFold(strings.TrimSpace(mediaType), "text/event-stream") {
		eachSSEData(body, t.addJSON)
	} else {
		t.addJSON(body)
	}
	return max(t.total, t.in+t.out)
}

// usageCounts is the usage object of OpenAI and Anthropic responses.
// Counts are float64 so that 12.0 or 1.2e1 decode too; a count of the wrong
// type is left at zero without spoiling the rest of the object.
type usageCounts struct {
	PromptTokens             float64 `json:"prompt_tokens"`
	CompletionTokens         float64 `json:"completion_tokens"`
	InputTokens              float64 `json:"input_tokens"`
	OutputTokens             float64 `json:"output_tokens"`
	CacheCreationInputTokens float64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     float64 `json:"cache_read_input_tokens"`
	TotalTokens              float64 `json:"total_tokens"`
}

// geminiUsage is Gemini's usageMetadata object.
type geminiUsage struct {
	PromptTokenCount     float64 `json:"promptTokenCount"`
	CandidatesTokenCount float64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount   float64 `json:"thoughtsTokenCount"`
	TotalTokenCount      float64 `json:"totalTokenCount"`
}

// usageHolder is an object with a nested usage field: the Responses API
// "response" and the Anthropic "message".
type usageHolder struct {
	Usage *usageCounts `json:"usage"`
}

// usageEnvelope is the part of a response object, or of one streamed event,
// that can carry usage.
type usageEnvelope struct {
	Usage         *usageCounts `json:"usage"`
	UsageMetadata *geminiUsage `json:"usageMetadata"`
	Response      *usageHolder `json:"response"`
	Message       *usageHolder `json:"message"`
}

// usageTally keeps the largest input, output and total counts seen.
type usageTally struct{ in, out, total int64 }

// addJSON adds the usage in a JSON object, or in each object of a JSON
// array. Data that is not JSON adds nothing. Decoding errors are ignored on
// purpose: a syntax error leaves the envelope untouched, and a type mismatch
// leaves just the mismatched field empty.
func (t *usageTally) addJSON(data []byte) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var list []usageEnvelope
		_ = json.Unmarshal(data, &list)
		for _, e := range list {
			t.add(e)
		}
		return
	}
	var e usageEnvelope
	_ = json.Unmarshal(data, &e)
	t.add(e)
}

func (t *usageTally) add(e usageEnvelope) {
	t.addCounts(e.Usage)
	if e.Response != nil {
		t.addCounts(e.Response.Usage)
	}
	if e.Message != nil {
		t.addCounts(e.Message.Usage)
	}
	if g := e.UsageMetadata; g != nil {
		t.in = max(t.in, tokens(g.PromptTokenCount))
		t.out = max(t.out, tokens(g.CandidatesTokenCount)+tokens(g.ThoughtsTokenCount))
		t.total = max(t.total, tokens(g.TotalTokenCount))
	}
}

func (t *usageTally) addCounts(u *usageCounts) {
	if u == nil {
		return
	}
	input := tokens(u.InputTokens) + tokens(u.CacheCreationInputTokens) + tokens(u.CacheReadInputTokens)
	t.in = max(t.in, tokens(u.PromptTokens), input)
	t.out = max(t.out, tokens(u.CompletionTokens), tokens(u.OutputTokens))
	t.total = max(t.total, tokens(u.TotalTokens))
}

// tokens turns a decoded count into an int64, or 0 when it is negative or
// beyond maxUsageTokens.
func tokens(n float64) int64 {
	if !(n >= 0 && n <= maxUsageTokens) {
		return 0
	}
	return int64(n)
}

// eachSSEData calls fn with the data of each event in an SSE stream, as the
// HTML standard defines it: lines end in CRLF, LF or CR; a blank line ends an
// event; "data:" lines (one leading space dropped) are joined with "\n";
// other fields and ":" comments are skipped. An event left open at the end of
// the body is still delivered, since the body is complete. Data that is
// "[DONE]" (OpenAI's end marker) is skipped.
func eachSSEData(stream []byte, fn func([]byte)) {
	var data []byte
	seen := false // whether the current event has a data field
	dispatch := func() {
		if seen && string(bytes.TrimSpace(data)) != "[DONE]" {
			fn(data)
		}
		data, seen = data[:0], false
	}
	for len(stream) > 0 {
		i := bytes.IndexAny(stream, "\r\n")
		line := stream
		if i < 0 {
			stream = nil
		} else {
			line = stream[:i]
			if stream[i] == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
				i++
			}
			stream = stream[i+1:]
		}
		if len(line) == 0 {
			dispatch()
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if seen {
			data = append(data, '\n')
		}
		data, seen = append(data, value...), true
	}
	dispatch()
}

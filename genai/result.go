package genai

import (
	"strconv"
	"sync/atomic"
	"time"
)

// Result is what Baton knows of a model call from its answer.
type Result struct {
	// ResponseID is the answer's id (gen_ai.response.id), ResponseModel the
	// model that answered (gen_ai.response.model): for Azure the model
	// behind the deployment, for Gemini its modelVersion.
	ResponseID, ResponseModel string
	// FinishReasons are why the model stopped, one per choice or candidate
	// (gen_ai.response.finish_reasons): OpenAI's and Anthropic's own values
	// ("stop", "length", "tool_calls", "end_turn", "max_tokens", ...);
	// Gemini's lowercased without the "finish_reason_" prefix ("stop",
	// "max_tokens", "safety"), as OpenTelemetry's Gemini instrumentation
	// records them; for OpenAI's Responses API, "stop" for a completed
	// response, the incomplete_details reason ("max_output_tokens",
	// "content_filter") for an incomplete one, "error" for a failed one.
	FinishReasons []string
	Usage         Usage
	// ErrorType is set when the answer is an error (error.type): the
	// provider's error code or type ("rate_limit_exceeded",
	// "overloaded_error", "RESOURCE_EXHAUSTED"), else the HTTP status; for
	// a Gemini prompt blocked before any candidate, "BLOCKED_" and the
	// block reason. ErrorMessage is the provider's message.
	ErrorType, ErrorMessage string
}

// acc gathers a Result from the objects of one answer: a whole body, or the
// events of a stream.
type acc struct {
	call Call
	now  func() time.Time
	r    Result
	// finishIdx0 is the choice or candidate index of r.FinishReasons[0],
	// finishIdx[i-1] that of r.FinishReasons[i] (finishIndex).
	finishIdx0 int
	finishIdx  []int
	// anth holds Anthropic's streamed counts: message_start's, then each
	// message_delta's over them.
	anth      counts
	anthDelta bool

	// shape recognises the content events of a stream under way; exact
	// turns it and the byte scans off, decoding every event (for tests).
	shape shape
	exact bool

	firstChunk, firstToken time.Time
	ended                  bool
	events, oversized      int
}

// finish records choice idx's finish reason; a stream that repeats a
// choice's reason replaces it.
func (a *acc) finish(idx int, reason string) {
	if reason == "" {
		return
	}
	for i := range a.r.FinishReasons {
		if a.finishIndex(i) == idx {
			a.r.FinishReasons[i] = reason
			return
		}
	}
	if len(a.r.FinishReasons) == 0 {
		a.finishIdx0 = idx
	} else {
		a.finishIdx = append(a.finishIdx, idx)
	}
	a.r.FinishReasons = append(a.r.FinishReasons, reason)
}

// finishIndex is the choice or candidate index of r.FinishReasons[i]: most
// answers have one, which needs no slice.
func (a *acc) finishIndex(i int) int {
	if i == 0 {
		return a.finishIdx0
	}
	return a.finishIdx[i-1]
}

// reasonOf decodes a finish reason, the providers' usual ones without
// allocating.
func reasonOf(v []byte) (string, bool) {
	if raw, ok := rawString(v); ok {
		for _, r := range knownReasons {
			if string(raw) == r {
				return r, true
			}
		}
	}
	return stringOf(v)
}

// knownReasons are the finish reasons the providers send most.
var knownReasons = [...]string{"stop", "length", "tool_calls", "content_filter", "function_call",
	"end_turn", "max_tokens", "tool_use", "stop_sequence", "pause_turn", "refusal"}

// token notes the first token-bearing event of a stream (a whole body,
// read without a clock, has none).
func (a *acc) token() {
	if a.firstToken.IsZero() && a.now != nil {
		a.firstToken = a.now()
	}
}

// setString sets *dst from a string value when *dst is still empty and the
// value is a non-empty string: the first chunk of a stream names the model
// and id, and the others repeat them.
func setString(dst *string, v []byte) {
	if *dst != "" {
		return
	}
	if s, ok := stringOf(v); ok {
		*dst = s
	}
}

// setModel is setString for a model's name. Most answers through a Baton
// name the model the one before named: the name read last is kept, and a
// name equal to it is not allocated again.
func setModel(dst *string, v []byte) {
	if *dst != "" {
		return
	}
	raw, ok := rawString(v)
	if !ok {
		return
	}
	if last := lastModel.Load(); last != nil && *last == string(raw) {
		*dst = *last
		return
	}
	if s, ok := stringOf(v); ok {
		*dst = s
		if s == string(raw) { // kept only as read from the same bytes again
			lastModel.Store(&s)
		}
	}
}

// lastModel is the model's name setModel read last.
var lastModel atomic.Pointer[string]

// errorFrom reads a provider's error object: OpenAI's and Azure's
// {"message","type","param","code"}, Anthropic's {"type","message"},
// Gemini's {"code","message","status"}. The type is the first of Gemini's
// status, a non-empty code and the type.
func (a *acc) errorFrom(v []byte) {
	o, ok := objectOf(v)
	if !ok {
		if s, ok := stringOf(v); ok && s != "" { // {"error": "some text"}
			a.r.ErrorMessage = s
			if a.r.ErrorType == "" {
				a.r.ErrorType = "error"
			}
		}
		return
	}
	var status, code, typ string
	for {
		k, v, ok := o.next()
		if !ok {
			break
		}
		switch string(k) {
		case "message":
			if s, ok := stringOf(v); ok {
				a.r.ErrorMessage = s
			}
		case "status":
			status, _ = stringOf(v)
		case "code":
			if s, ok := stringOf(v); ok {
				code = s
			} else if n, ok := countOf(v); ok {
				code = strconv.FormatInt(n, 10)
			}
		case "type":
			typ, _ = stringOf(v)
		}
	}
	for _, t := range [...]string{status, code, typ, "error"} {
		if t != "" {
			a.r.ErrorType = t
			return
		}
	}
}

// typeOf returns the raw "type" member of an event object, which the
// providers put first; nil when there is none.
func typeOf(data []byte) []byte {
	o, ok := objectOf(data)
	if !ok {
		return nil
	}
	for {
		k, v, ok := o.next()
		if !ok {
			return nil
		}
		if string(k) == "type" {
			t, _ := rawString(v)
			return t
		}
	}
}

// nonEmptyString reports whether v is a string of at least one character.
func nonEmptyString(v []byte) bool {
	s, ok := rawString(v)
	return ok && len(s) > 0
}

// present reports whether v is a value other than null, "", [] and {}.
func present(v []byte) bool {
	switch string(v) {
	case "null", `""`, "[]", "{}":
		return false
	}
	return len(v) > 0
}

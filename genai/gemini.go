package genai

import (
	"strings"
)

// Gemini's shape: the GenerateContentResponse, whole or one streamed chunk
// (every chunk carries the usage so far; the last one's is final).

// geminiObject reads a GenerateContentResponse, and returns where it ends
// (object.end).
func (a *acc) geminiObject(v []byte) int {
	o, ok := objectOf(v)
	if !ok {
		return -1
	}
	candidates := false
	var blocked, skipped []byte
	for {
		k, v, ok := o.next()
		if !ok {
			break
		}
		switch string(k) {
		case "candidates":
			// Once a stream is under way, a chunk's candidates matter only
			// when one finishes.
			if !a.exact && a.call.Stream && !a.firstToken.IsZero() && !anyMember(v, "finishReason", "finish_reason") {
				// Whether it has a candidate matters only for a blocked
				// prompt: looked at only then.
				if skipped != nil {
					candidates = candidates || hasElement(skipped)
				}
				skipped = v
				continue
			}
			candidates = a.geminiCandidates(v) || candidates
		case "usageMetadata", "usage_metadata":
			a.r.Usage = geminiUsage(v)
		case "modelVersion", "model_version":
			setModel(&a.r.ResponseModel, v)
		case "responseId", "response_id":
			setString(&a.r.ResponseID, v)
		case "promptFeedback", "prompt_feedback":
			blocked = memberString(v, "blockReason")
		case "error":
			if !isNull(v) {
				a.errorFrom(v)
				a.ended = a.call.Stream
			}
		}
	}
	if !candidates && len(blocked) > 0 && string(blocked) != "BLOCKED_REASON_UNSPECIFIED" && !hasElement(skipped) {
		a.r.ErrorType = "BLOCKED_" + string(blocked)
	}
	return o.end()
}

// geminiCandidates reads each candidate's finishReason and, until the first
// token, whether its content carries one; it reports whether there was any
// candidate.
func (a *acc) geminiCandidates(v []byte) bool {
	arr, ok := arrayOf(v)
	if !ok {
		return false
	}
	seen := false
	for pos := 0; ; pos++ {
		c, ok := arr.next()
		if !ok {
			return seen
		}
		seen = true
		o, ok := objectOf(c)
		if !ok {
			continue
		}
		idx, reason := pos, ""
		for {
			k, v, ok := o.next()
			if !ok {
				break
			}
			switch string(k) {
			case "index":
				if n, ok := countOf(v); ok {
					idx = int(n)
				}
			case "finishReason", "finish_reason":
				if s, ok := stringOf(v); ok {
					reason = geminiFinish(s)
				}
			case "content":
				if a.call.Stream && a.firstToken.IsZero() && partsHaveToken(memberValue(v, "parts")) {
					a.token()
				}
			}
		}
		if reason != "" {
			a.finish(idx, reason)
			a.ended = a.call.Stream
		}
	}
}

// hasElement reports whether v is an array with an element.
func hasElement(v []byte) bool {
	arr, ok := arrayOf(v)
	if !ok {
		return false
	}
	_, ok = arr.next()
	return ok
}

// geminiFinish normalises a finishReason as OpenTelemetry's Gemini
// instrumentation does: lowercased, without the "finish_reason_" prefix.
func geminiFinish(s string) string {
	return strings.TrimPrefix(strings.ToLower(s), "finish_reason_")
}

// partsHaveToken reports whether content parts carry output: text
// (thoughts included), a function call, inline data or code.
func partsHaveToken(v []byte) bool {
	arr, ok := arrayOf(v)
	if !ok {
		return false
	}
	for {
		p, ok := arr.next()
		if !ok {
			return false
		}
		o, ok := objectOf(p)
		if !ok {
			continue
		}
		for {
			k, v, ok := o.next()
			if !ok {
				break
			}
			switch string(k) {
			case "text":
				if nonEmptyString(v) {
					return true
				}
			case "functionCall", "function_call", "inlineData", "inline_data", "executableCode", "executable_code":
				if present(v) {
					return true
				}
			}
		}
	}
}

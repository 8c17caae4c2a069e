package genai

import (
	"bytes"
)

// An event (or body) larger than MaxEventBytes is not kept whole: only its
// head and tail are. The providers write the bulk of a large answer (the
// output text, images, embeddings) in the middle, the id, model and status
// before it and the usage after it, so the head and tail still tell most of
// what Baton reads. salvage reads them by searching for member names rather
// than parsing, since neither is valid JSON on its own; it is a best effort
// for the rare oversized event, and a count it cannot find stays unknown.

// salvage reads what it can of an oversized event or document.
func (a *acc) salvage(name, head, tail []byte, doc bool) {
	e := a.call.Endpoint
	if a.r.ResponseModel == "" {
		if e == GenerateContent {
			setModel(&a.r.ResponseModel, findMember(tail, "modelVersion", '"', true))
		} else {
			setModel(&a.r.ResponseModel, findMember(head, "model", '"', false))
		}
	}
	if a.r.ResponseID == "" {
		if e == GenerateContent {
			setString(&a.r.ResponseID, findMember(tail, "responseId", '"', true))
		} else {
			setString(&a.r.ResponseID, findMember(head, "id", '"', false))
		}
	}

	typ := name
	if len(typ) == 0 && !doc {
		typ, _ = rawString(findMember(head, "type", '"', false))
	}
	switch e {
	case ChatCompletions, Completions, Embeddings:
		if v := findMember(tail, "usage", '{', true); v != nil {
			a.r.Usage = openAIUsage(v, e != Embeddings)
		}
		if s, ok := reasonOf(findMember(tail, "finish_reason", '"', true)); ok {
			a.finish(0, s)
		}
	case Responses:
		terminal := doc
		switch string(typ) {
		case "response.completed", "response.incomplete", "response.failed":
			terminal, a.ended = true, true
		}
		if !terminal {
			return
		}
		if v := findMember(tail, "usage", '{', true); v != nil {
			a.r.Usage = openAIUsage(v, true)
		}
		status, _ := rawString(findMember(head, "status", '"', false))
		reason, _ := rawString(findMember(head, "reason", '"', false))
		a.responseStatus(status, reason)
	case Messages:
		if !doc && string(typ) != "message_delta" {
			return // message_start and content deltas are small; nothing to save
		}
		if v := findMember(tail, "usage", '{', true); v != nil {
			anthropicCounts(&a.anth, v)
			a.anthDelta = true
			a.r.Usage = anthropicUsage(a.anth)
		}
		if s, ok := reasonOf(findMember(tail, "stop_reason", '"', true)); ok {
			a.finish(0, s)
		}
	case GenerateContent:
		if v := findMember(tail, "usageMetadata", '{', true); v != nil {
			a.r.Usage = geminiUsage(v)
		}
		if s, ok := stringOf(findMember(tail, "finishReason", '"', true)); ok {
			a.finish(0, geminiFinish(s))
			a.ended = a.call.Stream
		}
	}
}

// findMember finds a member named key whose value opens with open ('"' or
// '{') in a fragment of JSON, the first or the last one, and returns its
// value, or nil when there is none or it is cut short.
func findMember(b []byte, key string, open byte, last bool) []byte {
	var found []byte
	for rest, off := b, 0; ; {
		i := bytes.Index(rest, []byte(key))
		if i < 0 {
			return found
		}
		k := off + i
		j := k + len(key)
		rest, off = rest[i+len(key):], j
		if k == 0 || b[k-1] != '"' || j >= len(b) || b[j] != '"' {
			continue
		}
		j = skipSpace(b, j+1)
		if j >= len(b) || b[j] != ':' {
			continue
		}
		j = skipSpace(b, j+1)
		if j >= len(b) || b[j] != open {
			continue
		}
		e := valueEnd(b, j)
		if e < 0 {
			continue
		}
		found = b[j:e]
		if !last {
			return found
		}
	}
}

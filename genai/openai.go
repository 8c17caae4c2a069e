package genai

import (
	"bytes"
)

// OpenAI's shapes: the Chat Completions, Completions and Embeddings object
// (whole, or one streamed chunk), and the Responses object and its stream
// events.

// openAIObject reads a Chat Completions, Completions or Embeddings answer,
// or one chunk of a streamed one, and returns where it ends (object.end).
func (a *acc) openAIObject(v []byte) int {
	o, ok := objectOf(v)
	if !ok {
		return -1
	}
	for {
		k, v, ok := o.next()
		if !ok {
			return o.end()
		}
		switch string(k) {
		case "id":
			setString(&a.r.ResponseID, v)
		case "model":
			setModel(&a.r.ResponseModel, v)
		case "choices":
			a.openAIChoices(v)
		case "usage":
			if !isNull(v) {
				a.r.Usage = openAIUsage(v, a.call.Endpoint != Embeddings)
			}
		case "error":
			if !isNull(v) {
				a.errorFrom(v)
				a.ended = a.call.Stream
			}
		}
	}
}

// openAIChoices reads each choice's finish_reason and, until the first
// token, whether a streamed delta carries one.
func (a *acc) openAIChoices(v []byte) {
	arr, ok := arrayOf(v)
	if !ok {
		return
	}
	for pos := 0; ; pos++ {
		ch, ok := arr.next()
		if !ok {
			return
		}
		o, ok := objectOf(ch)
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
			case "finish_reason":
				if !isNull(v) {
					reason, _ = reasonOf(v)
				}
			case "delta":
				if a.call.Stream && a.firstToken.IsZero() && deltaHasToken(v) {
					a.token()
				}
			case "text": // legacy completions
				if a.call.Stream && nonEmptyString(v) {
					a.token()
				}
			}
		}
		a.finish(idx, reason)
	}
}

// deltaHasToken reports whether a streamed Chat Completions delta carries
// output: text, a refusal, reasoning (as OpenAI-compatible servers stream
// it), a tool call or audio. The first delta of a stream names the role
// with empty content and carries none.
func deltaHasToken(v []byte) bool {
	o, ok := objectOf(v)
	if !ok {
		return false
	}
	for {
		k, v, ok := o.next()
		if !ok {
			return false
		}
		switch string(k) {
		case "content", "refusal", "reasoning_content", "reasoning":
			if nonEmptyString(v) {
				return true
			}
		case "tool_calls", "function_call", "audio":
			if present(v) {
				return true
			}
		}
	}
}

// openAIChunk reads one Chat Completions or Completions stream event.
// Most events are content deltas of a stream under way, which can carry
// nothing Baton still needs once it knows the model, the id and the first
// token: those are recognised by their shape or a byte scan and not
// decoded.
func (a *acc) openAIChunk(data []byte) {
	if (len(data) == 0 || data[0] != '{') && string(bytes.TrimSpace(data)) == "[DONE]" {
		a.ended = true
		return
	}
	if !a.exact && !a.firstToken.IsZero() && a.r.ResponseModel != "" && a.r.ResponseID != "" {
		if a.shape.match(data) {
			return
		}
		if !anyMember(data, "finish_reason", "usage", "error") {
			a.shape.learn(data)
			return
		}
	}
	a.openAIObject(data)
}

// anyMember reports whether JSON text has a member, at any depth, named one
// of keys and whose value is not null. It looks only at the colons: in
// valid JSON, a quote inside a string is escaped, so a quoted key followed
// by a colon is a member name wherever it appears. A false positive only
// costs a full decoding; a value is null only when the decoding would take
// it for null, so that a false negative costs nothing.
func anyMember(data []byte, keys ...string) bool {
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], ':')
		if j < 0 {
			return false
		}
		c := i + j
		i = c + 1
		k := c
		for k > 0 && isSpace(data[k-1]) {
			k--
		}
		if k < 3 || data[k-1] != '"' {
			continue
		}
		for _, key := range keys {
			s := k - 1 - len(key)
			if data[k-2] == key[len(key)-1] && s >= 1 && data[s-1] == '"' && string(data[s:k-1]) == key && !nullAt(data, c+1) {
				return true
			}
		}
	}
}

// nullAt reports whether the value after b[i] (and any space) is null, as
// the decoding reads it.
func nullAt(b []byte, i int) bool {
	i = skipSpace(b, i)
	if len(b)-i < 4 || string(b[i:i+4]) != "null" {
		return false
	}
	i += 4
	return i == len(b) || isSpace(b[i]) || b[i] == ',' || b[i] == '}' || b[i] == ']'
}

// responseObject reads a Responses API response object: the whole answer,
// or the "response" of a stream event. terminal is set for a finished
// response, whose status gives its finish reason. It returns where the
// object ends (object.end).
func (a *acc) responseObject(v []byte, terminal bool) int {
	o, ok := objectOf(v)
	if !ok {
		return -1
	}
	var status, reason []byte
	for {
		k, v, ok := o.next()
		if !ok {
			break
		}
		switch string(k) {
		case "id":
			setString(&a.r.ResponseID, v)
		case "model":
			setModel(&a.r.ResponseModel, v)
		case "status":
			status, _ = rawString(v)
		case "incomplete_details":
			reason = memberString(v, "reason")
		case "error":
			if !isNull(v) {
				a.errorFrom(v)
			}
		case "usage":
			if !isNull(v) {
				a.r.Usage = openAIUsage(v, true)
			}
		}
	}
	if terminal {
		a.responseStatus(status, reason)
	}
	return o.end()
}

// responseStatus turns a finished response's status into a finish reason.
func (a *acc) responseStatus(status, reason []byte) {
	switch string(status) {
	case "completed":
		a.finish(0, "stop")
	case "incomplete":
		a.finish(0, string(reason))
	case "failed":
		a.finish(0, "error")
	case "cancelled":
		a.finish(0, "cancelled")
	}
}

// memberString returns the raw string value of member key of object v.
func memberString(v []byte, key string) []byte {
	o, ok := objectOf(v)
	if !ok {
		return nil
	}
	for {
		k, v, ok := o.next()
		if !ok {
			return nil
		}
		if string(k) == key {
			s, _ := rawString(v)
			return s
		}
	}
}

// responsesEvent reads one Responses API stream event, named by its SSE
// event field or, failing that, its "type". Only the events that open and
// close the response, errors, and the first delta are decoded.
func (a *acc) responsesEvent(name, data []byte) {
	typ := name
	if len(typ) == 0 {
		typ = typeOf(data)
	}
	switch t := string(typ); t {
	case "response.created", "response.in_progress", "response.queued":
		if a.r.ResponseModel == "" || a.r.ResponseID == "" {
			a.responseMember(data, false)
		}
	case "response.completed", "response.incomplete", "response.failed":
		a.responseMember(data, true)
		a.ended = true
	case "error":
		a.flatError(data)
		a.ended = true
	default:
		if a.firstToken.IsZero() && bytes.HasSuffix(typ, []byte(".delta")) && present(memberValue(data, "delta")) {
			a.token()
		}
	}
}

// responseMember reads the "response" of a Responses stream event.
func (a *acc) responseMember(data []byte, terminal bool) {
	if v := memberValue(data, "response"); v != nil {
		a.responseObject(v, terminal)
	}
}

// flatError reads an error event, whose code and message are members of the
// event itself ({"type":"error","code":...,"message":...}) or of its
// "error".
func (a *acc) flatError(data []byte) {
	if v := memberValue(data, "error"); v != nil && !isNull(v) {
		a.errorFrom(v)
		return
	}
	a.errorFrom(data)
}

// memberValue returns the value of member key of object v, or nil.
func memberValue(v []byte, key string) []byte {
	o, ok := objectOf(v)
	if !ok {
		return nil
	}
	for {
		k, v, ok := o.next()
		if !ok {
			return nil
		}
		if string(k) == key {
			return v
		}
	}
}

package genai

// Anthropic's shapes: the Messages answer, and its stream of events
// (message_start, content_block_*, message_delta, message_stop, ping,
// error).

// anthropicMessage reads a Messages answer, or the "message" of a
// message_start event. Only a whole answer's usage is final: a stream's
// message_start carries a placeholder output count. It returns where the
// object ends (object.end).
func (a *acc) anthropicMessage(v []byte, whole bool) int {
	o, ok := objectOf(v)
	if !ok {
		return -1
	}
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
		case "stop_reason":
			if s, ok := reasonOf(v); ok {
				a.finish(0, s)
			}
		case "usage":
			if !isNull(v) {
				anthropicCounts(&a.anth, v)
			}
		case "error": // {"type":"error","error":{...}}
			if !isNull(v) {
				a.errorFrom(v)
			}
		}
	}
	if whole {
		a.r.Usage = anthropicUsage(a.anth)
	}
	return o.end()
}

// anthropicEvent reads one Messages stream event, named by its SSE event
// field or, failing that, its "type". Content deltas are decoded only until
// the first token.
func (a *acc) anthropicEvent(name, data []byte) {
	typ := name
	if len(typ) == 0 {
		typ = typeOf(data)
	}
	switch string(typ) {
	case "content_block_delta":
		if a.firstToken.IsZero() && deltaHasContent(memberValue(data, "delta")) {
			a.token()
		}
	case "message_start":
		a.anthropicMessage(memberValue(data, "message"), false)
	case "message_delta":
		a.anthropicDelta(data)
	case "message_stop":
		a.ended = true
	case "error":
		if v := memberValue(data, "error"); v != nil {
			a.errorFrom(v)
		}
		a.ended = true
	}
}

// anthropicDelta reads a message_delta: the stop reason, and usage counts
// that are cumulative and final once the message stops.
func (a *acc) anthropicDelta(data []byte) {
	o, ok := objectOf(data)
	if !ok {
		return
	}
	for {
		k, v, ok := o.next()
		if !ok {
			break
		}
		switch string(k) {
		case "delta":
			if s, ok := reasonOf(memberValue(v, "stop_reason")); ok {
				a.finish(0, s)
			}
		case "usage":
			if !isNull(v) {
				anthropicCounts(&a.anth, v)
				a.anthDelta = true
			}
		}
	}
	if a.anthDelta {
		a.r.Usage = anthropicUsage(a.anth)
	}
}

// deltaHasContent reports whether a content_block_delta's delta carries
// output: text, tool input, or thinking.
func deltaHasContent(v []byte) bool {
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
		case "text", "partial_json", "thinking":
			if nonEmptyString(v) {
				return true
			}
		}
	}
}

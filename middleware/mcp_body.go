package middleware

// The bytes of MCP messages: the check that Baton and the server read the
// same message (ambiguousKeys), and the rewrite that carries trace context
// in params._meta (withTraceMeta). Both use encoding/json plainly.

import (
	"bytes"
	"encoding/json"
	"strings"
)

// readKeys are the keys Baton reads of a JSON-RPC message (and its params)
// to decide what it is: two of them that differ only in case would let
// Baton and the server read different messages.
var readKeys = [...]string{`"jsonrpc"`, `"id"`, `"method"`, `"params"`, `"name"`, `"arguments"`, `"_meta"`, `"message"`}

// ambiguousKeys reports whether a message (or a batch's) holds two keys
// that are equal but for case, at its top or in its params. encoding/json
// matches keys without regard to case and keeps the last, while MCP
// servers match them exactly: {"name":"delete_all","NAME":"search"} must
// not read as search to Baton and as delete_all to the server. Keys deeper
// down (a tool's arguments) are the tool's to read, and Baton passes them
// as they are.
func ambiguousKeys(body []byte) bool {
	lower := bytes.ToLower(body)
	suspect := false
	for _, k := range readKeys {
		if bytes.Count(lower, []byte(k)) > bytes.Count(body, []byte(k)) || bytes.Count(body, []byte(k)) > 1 {
			suspect = true
			break
		}
	}
	if !suspect {
		return false // each key Baton reads appears once, as written
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var msgs []json.RawMessage
		if json.Unmarshal(trimmed, &msgs) != nil {
			return false
		}
		for _, m := range msgs {
			if messageAmbiguous(m) {
				return true
			}
		}
		return false
	}
	return messageAmbiguous(trimmed)
}

// messageAmbiguous checks one message's keys and its params' keys.
func messageAmbiguous(msg []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return false
	}
	if foldedTwice(msg) {
		return true
	}
	for k, v := range m {
		if strings.EqualFold(k, "params") && foldedTwice(v) {
			return true
		}
	}
	return false
}

// foldedTwice reports whether the JSON object obj has two keys equal but
// for case (encoding/json keeps one entry for exact duplicates, so the
// keys are read with a decoder).
func foldedTwice(obj []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		k, _ := t.(string)
		if seen[strings.ToLower(k)] {
			return true
		}
		seen[strings.ToLower(k)] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}

// withTraceMeta sets params._meta.traceparent (and tracestate) of every
// request and notification in body to tp (and ts), so that a server that
// reads trace context only from _meta joins the trace. It reports false
// when body was left as it was.
func withTraceMeta(body []byte, tp, ts string) ([]byte, bool) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var msgs []json.RawMessage
		if json.Unmarshal(body, &msgs) != nil {
			return body, false
		}
		changed := false
		for i, m := range msgs {
			if out, ok := messageWithMeta(m, tp, ts); ok {
				msgs[i], changed = out, true
			}
		}
		if !changed {
			return body, false
		}
		out, err := json.Marshal(msgs)
		return out, err == nil
	}
	return messageWithMeta(body, tp, ts)
}

func messageWithMeta(msg []byte, tp, ts string) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil || m["method"] == nil {
		return msg, false
	}
	var params, meta map[string]json.RawMessage
	if raw := m["params"]; raw != nil && json.Unmarshal(raw, &params) != nil {
		return msg, false // params not an object: leave the message to its server
	}
	if params == nil { // absent, or null
		params = map[string]json.RawMessage{}
	}
	if raw := params["_meta"]; raw != nil && json.Unmarshal(raw, &meta) != nil {
		return msg, false
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta["traceparent"], _ = json.Marshal(tp)
	delete(meta, "tracestate")
	if ts != "" {
		meta["tracestate"], _ = json.Marshal(ts)
	}
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return msg, false
	}
	if m["params"], err = json.Marshal(params); err != nil {
		return msg, false
	}
	out, err := json.Marshal(m)
	return out, err == nil
}

package middleware

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// The untrusted-content middleware rewrites a body only when it carries
// labels, a rare path: the body is decoded into generic values (numbers kept
// as written), changed at JSON pointers, and encoded again. Members come out
// sorted, which JSON does not distinguish, and the same input always gives
// the same bytes, so a retried handoff still matches the receiver's window.

// decodeJSON decodes body, keeping numbers as written.
func decodeJSON(body []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// encodeJSON encodes v without HTML escaping and without a trailing newline.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// pointerTokens splits an RFC 6901 pointer into its unescaped tokens.
func pointerTokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(ptr[1:], "/")
	for i, t := range toks {
		if strings.Contains(t, "~") {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
	}
	return toks
}

// escapeToken escapes one pointer token.
func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// lookup returns the value at ptr in doc.
func lookup(doc any, ptr string) (any, bool) {
	cur := doc
	for _, t := range pointerTokens(ptr) {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// replace sets the value at ptr (which must exist; "" replaces the
// document) and returns the new document.
func replace(doc any, ptr string, v any) (any, bool) {
	toks := pointerTokens(ptr)
	if len(toks) == 0 {
		return v, true
	}
	parent, ok := lookup(doc, joinPointer(toks[:len(toks)-1]))
	if !ok {
		return doc, false
	}
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		if _, ok := p[last]; !ok {
			return doc, false
		}
		p[last] = v
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(p) {
			return doc, false
		}
		p[i] = v
	default:
		return doc, false
	}
	return doc, true
}

func joinPointer(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

// enclosing returns the pointer of the innermost element of a list named
// list (".../artifacts/3" for list "artifacts") that contains ptr.
func enclosing(ptr, list string) (string, bool) {
	toks := pointerTokens(ptr)
	for i := len(toks) - 2; i >= 0; i-- {
		if toks[i] != list {
			continue
		}
		if _, err := strconv.Atoi(toks[i+1]); err == nil {
			return joinPointer(toks[:i+2]), true
		}
	}
	return "", false
}

// forStrings calls fn for every string value at or under ptr in doc, with
// its pointer.
func forStrings(doc any, ptr string, fn func(ptr, s string)) {
	v, ok := lookup(doc, ptr)
	if !ok {
		return
	}
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch c := v.(type) {
		case string:
			fn(ptr, c)
		case map[string]any:
			for k, x := range c {
				walk(x, ptr+"/"+escapeToken(k))
			}
		case []any:
			for i, x := range c {
				walk(x, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(v, ptr)
}

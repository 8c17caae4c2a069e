package handoff

import (
	"cmp"
	"slices"
)

// Trimming to a token budget (docs/context.md) drops detail by the
// envelope's own priorities: first the reasons of rejected paths (the
// path itself stays, so it is not retried), then the evidence of completed
// items (their summary and verification stay); passing artifacts by
// reference comes next and is the middleware's, since it needs the store.
// The task, the constraints and the rest are never trimmed.

// OmittedText replaces a trimmed required string (a rejected path's why).
const OmittedText = "[omitted]"

// Count counts the tokens of a text.
type Count func(text []byte) int

// Trimmed is the outcome of TrimDetail.
type Trimmed struct {
	Body     []byte
	Pointers []string // what was trimmed, as body pointers
	Tokens   int      // of the text after trimming
}

// TrimDetail trims the envelope's detail, by priority and each class
// largest first, until the text (see Text) counts at most max tokens, or
// nothing is left to trim. tokens is the text's count before trimming.
func TrimDetail(contentType string, body []byte, max, tokens int, count Count) Trimmed {
	out := Trimmed{Body: body, Tokens: tokens}
	for _, class := range []struct {
		list, member string
		drop         bool // drop the member; else replace it with OmittedText
	}{
		{"rejected_paths", "why", false},
		{"completed", "evidence", true},
	} {
		if out.Tokens <= max {
			break
		}
		x := findText(contentType, out.Body)
		if x.env < 0 {
			break
		}
		type cand struct {
			node   int
			ptr    string
			tokens int
		}
		var cands []cand
		for _, m := range matches(&x.t, x.env, []string{class.list, "*", class.member}) {
			s := x.t.span(m.value)
			if !class.drop && string(out.Body[s.s:s.e]) == `"`+OmittedText+`"` {
				continue
			}
			cands = append(cands, cand{m.node, x.envPtr + pointerOf(m.path), count(out.Body[s.s:s.e])})
		}
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.tokens, a.tokens) })
		w := newRewrite(&x.t)
		left := out.Tokens
		var replacement []byte
		if !class.drop {
			replacement = appendString(append(appendString(nil, class.member), ':'), OmittedText)
		}
		for _, c := range cands {
			if left <= max {
				break
			}
			if class.drop {
				w.drop(c.node)
			} else {
				w.replace(c.node, replacement)
			}
			left -= c.tokens
			out.Pointers = append(out.Pointers, c.ptr)
		}
		if w.empty() {
			continue
		}
		out.Body = w.bytes()
		out.Tokens = countText(contentType, out.Body, count)
	}
	return out
}

// countText counts the text of body (see Text), or all of body.
func countText(contentType string, body []byte, count Count) int {
	if t := Text(contentType, body); t != nil {
		return count(t)
	}
	return count(body)
}

// CountText counts the tokens of body's text: its A2A message, its
// envelope, or all of it.
func CountText(contentType string, body []byte, count Count) int {
	return countText(contentType, body, count)
}

// Note sets the envelope's omitted member to pointers, telling the
// receiving agent what was left out. A body without an envelope is
// returned as it is.
func Note(contentType string, body []byte, pointers []string) []byte {
	x := findText(contentType, body)
	if x.env < 0 || len(pointers) == 0 {
		return body
	}
	list := []byte{'['}
	for i, p := range pointers {
		if i > 0 {
			list = append(list, ',')
		}
		list = appendString(list, p)
	}
	list = append(list, ']')
	member := append(append(appendString(nil, OmittedKey), ':'), list...)
	w := newRewrite(&x.t)
	if k := memberName(&x.t, x.env, OmittedKey); k >= 0 {
		w.replace(k, member)
	} else {
		w.add(x.env, member)
	}
	return w.bytes()
}

// memberName returns the name node of object's last member called name, or
// -1.
func memberName(t *tape, obj int, name string) int {
	if v := t.member(obj, name); v >= 0 {
		return v - 1
	}
	return -1
}

// FieldSize is a member of a handoff's text with its tokens.
type FieldSize struct {
	Pointer string `json:"pointer"`
	Tokens  int    `json:"tokens"`
}

// FieldSizes returns the largest members of body's text, most tokens
// first, at most n: the envelope's members, and an A2A message's other
// members and parts.
func FieldSizes(contentType string, body []byte, count Count, n int) []FieldSize {
	x := findText(contentType, body)
	var out []FieldSize
	add := func(root int, prefix string) {
		eachChild(&x.t, root, func(tok string, node, value int) {
			if value == x.env || (tok == "metadata" && x.env >= 0 && root == x.msg) {
				return // the envelope is listed member by member
			}
			s := x.t.span(value)
			out = append(out, FieldSize{prefix + "/" + escapeToken(tok), count(body[s.s:s.e])})
		})
	}
	if x.msg >= 0 {
		add(x.msg, "/params/message")
		if parts := x.t.member(x.msg, "parts"); x.t.isArray(parts) {
			add(parts, "/params/message/parts")
		}
	}
	if x.env >= 0 {
		add(x.env, x.envPtr)
		for _, list := range []string{"artifacts", "completed", "rejected_paths"} {
			if v := x.t.member(x.env, list); x.t.isArray(v) {
				add(v, x.envPtr+"/"+list)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b FieldSize) int { return cmp.Compare(b.Tokens, a.Tokens) })
	return out[:min(n, len(out))]
}

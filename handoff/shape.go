package handoff

import (
	"slices"
	"strconv"
	"strings"
)

// Shaping a handoff's text for its edge (docs/context.md): a field policy
// keeps or drops members of the envelope and of an A2A message, and a token
// budget trims the envelope's detail by its own priorities. Pointers the
// policy names are relative to the envelope or the message; the pointers
// Shape reports are relative to the request body, as violations are.

// Protected members are never dropped nor trimmed: without them a handoff
// is not one (the task, its constraints, the contract version), or not an
// A2A message (its role, id, kind and parts; the envelope, which has its own
// policy).
var (
	protectedEnvelope = []protect{{[]string{"schema_version"}, true}, {[]string{"task"}, true}, {[]string{"constraints"}, true}}
	protectedMessage  = []protect{{[]string{"role"}, true}, {[]string{"messageId"}, true}, {[]string{"kind"}, true},
		{[]string{"parts"}, false}, {[]string{"metadata", MetadataKey}, true}}
)

// protect is a protected member: with everything under it (subtree), or
// only itself (an A2A message's parts, of which single parts may go).
type protect struct {
	path    []string
	subtree bool
}

// OmittedKey is the envelope member in which Baton tells the receiving
// agent what it left out: the body pointers it dropped or trimmed.
const OmittedKey = "omitted"

// FieldPolicy keeps only, or drops, the members its JSON pointers name (RFC
// 6901, a * token matching every member or element at its level).
type FieldPolicy struct {
	Keep, Drop []string
}

func (p FieldPolicy) empty() bool { return len(p.Keep) == 0 && len(p.Drop) == 0 }

// text is where a body's text is: its envelope and, for an A2A send
// request, its message.
type text struct {
	t        tape
	where    Where
	env, msg int    // nodes, -1 when absent
	envPtr   string // the envelope's pointer in the body
}

// findText parses body for its envelope and A2A message. An A2A send
// request counts as one without an envelope too.
func findText(contentType string, body []byte) *text {
	x := &text{env: -1, msg: -1}
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	switch {
	case strings.EqualFold(mt, MediaType):
		if x.t.parse(body) && x.t.isObject(0) {
			x.where, x.env = Body, 0
		}
		return x
	case !strings.EqualFold(mt, "application/json") && !(len(mt) > 5 && strings.EqualFold(mt[len(mt)-5:], "+json")):
		return x
	}
	if i := skipWS(body, 0); i >= len(body) || body[i] != '{' || !x.t.parsePath(body, a2aPath[:2]) || !x.t.isObject(0) || !isA2ASend(&x.t) {
		return x
	}
	params := x.t.member(0, "params")
	if !x.t.isObject(params) {
		return x
	}
	if x.msg = x.t.member(params, "message"); !x.t.isObject(x.msg) {
		x.msg = -1
		return x
	}
	x.where = A2A
	if md := x.t.member(x.msg, "metadata"); x.t.isObject(md) {
		if env := x.t.member(md, MetadataKey); x.t.isObject(env) {
			x.env, x.envPtr = env, A2APointer
		}
	}
	return x
}

// isA2ASend reports whether the parsed document is a JSON-RPC 2.0 request
// for a method that sends a message.
func isA2ASend(t *tape) bool {
	version, method := false, false
	for k, end := t.first(0); k < end; k = t.after(k + 1) {
		switch {
		case t.is(k, "jsonrpc"):
			version = t.is(k+1, "2.0")
		case t.is(k, "method"):
			method = false
			for _, a := range a2aMethods {
				method = method || t.is(k+1, a)
			}
		}
	}
	return version && method
}

// Text returns the part of body a budget counts: the A2A message (its
// envelope included), the envelope of a handoff body, or nil when body is
// neither (its whole is then the text).
func Text(contentType string, body []byte) []byte {
	x := findText(contentType, body)
	switch {
	case x.msg >= 0:
		s := x.t.span(x.msg)
		return body[s.s:s.e]
	case x.env >= 0:
		s := x.t.span(x.env)
		return body[s.s:s.e]
	}
	return nil
}

// EnvelopeOf returns the envelope body carries, or nil.
func EnvelopeOf(contentType string, body []byte) []byte {
	if x := findText(contentType, body); x.env >= 0 {
		s := x.t.span(x.env)
		return body[s.s:s.e]
	}
	return nil
}

// ApplyFields applies the envelope's and the message's field policies to
// body. It returns the body unchanged (and no pointers) when nothing
// matched.
func ApplyFields(contentType string, body []byte, envelope, message FieldPolicy) ([]byte, []string) {
	if envelope.empty() && message.empty() {
		return body, nil
	}
	x := findText(contentType, body)
	w := newRewrite(&x.t)
	var dropped []string
	if x.env >= 0 && !envelope.empty() {
		dropped = applyPolicy(w, &x.t, x.env, x.envPtr, envelope, protectedEnvelope, dropped)
	}
	if x.msg >= 0 && !message.empty() {
		dropped = applyPolicy(w, &x.t, x.msg, "/params/message", message, protectedMessage, dropped)
	}
	if w.empty() {
		return body, nil
	}
	return w.bytes(), uniq(dropped) // a member named twice is dropped twice, said once
}

// uniq keeps the first of each string, in order.
func uniq(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func applyPolicy(w *rewrite, t *tape, root int, prefix string, p FieldPolicy, protected []protect, dropped []string) []string {
	if len(p.Keep) > 0 {
		keep := parsePointers(p.Keep)
		for _, pr := range protected {
			keep = append(keep, pr.path)
		}
		return keepOnly(w, t, root, prefix, nil, keep, dropped)
	}
	for _, ptr := range parsePointers(p.Drop) {
		for _, m := range matches(t, root, ptr) {
			if isProtected(m.path, protected) || holdsProtected(m.path, protected) {
				continue // a member that holds a protected one stays (drop inside it instead)
			}
			w.drop(m.node)
			dropped = append(dropped, prefix+pointerOf(m.path))
		}
	}
	return dropped
}

// keepOnly drops every member or element under value at (whose path is
// path) that no keep pointer names, is under, or leads to.
func keepOnly(w *rewrite, t *tape, at int, prefix string, path []string, keep [][]string, dropped []string) []string {
	eachChild(t, at, func(tok string, node, value int) {
		p := append(slices.Clip(path), tok)
		whole, inside := false, false
		for _, k := range keep {
			switch {
			case len(k) <= len(p) && tokensMatch(k, p[:len(k)]):
				whole = true
			case len(k) > len(p) && tokensMatch(k[:len(p)], p):
				inside = true
			}
		}
		switch {
		case whole:
		case inside && (t.isObject(value) || t.isArray(value)):
			dropped = keepOnly(w, t, value, prefix, p, keep, dropped)
		default:
			w.drop(node)
			dropped = append(dropped, prefix+pointerOf(p))
		}
	})
	return dropped
}

// eachChild calls fn for each member of object at (its name's node and its
// value) or each element of array at (its node twice), with its reference
// token.
func eachChild(t *tape, at int, fn func(tok string, node, value int)) {
	if t.isObject(at) {
		for k, end := t.first(at); k < end; k = t.after(k + 1) {
			name, _ := t.str(k)
			fn(name, k, k+1)
		}
		return
	}
	if t.isArray(at) {
		i := 0
		for k, end := t.first(at); k < end; k = t.after(k) {
			fn(strconv.Itoa(i), k, k)
			i++
		}
	}
}

// match is a member or element a pointer names: the node to drop or
// replace (a member's name, an element), its value, and its path.
type match struct {
	node, value int
	path        []string
}

// matches returns every member or element under root that ptr names.
func matches(t *tape, root int, ptr []string) []match {
	var out []match
	var walk func(at int, path []string)
	walk = func(at int, path []string) {
		depth := len(path)
		eachChild(t, at, func(tok string, node, value int) {
			if ptr[depth] != "*" && ptr[depth] != tok {
				return
			}
			p := append(slices.Clip(path), tok)
			if depth+1 == len(ptr) {
				out = append(out, match{node: node, value: value, path: p})
				return
			}
			if node != value && t.member(at, tok) != value {
				return // a member named again later: only the last copy counts
			}
			walk(value, p)
		})
	}
	if len(ptr) > 0 {
		walk(root, nil)
	}
	return out
}

func isProtected(path []string, protected []protect) bool {
	for _, p := range protected {
		if p.subtree && len(p.path) <= len(path) && tokensMatch(p.path, path[:len(p.path)]) || tokensMatch(p.path, path) {
			return true
		}
	}
	return false
}

// holdsProtected reports whether path leads to a protected member (the
// message's /metadata holds the envelope).
func holdsProtected(path []string, protected []protect) bool {
	for _, p := range protected {
		if len(path) < len(p.path) && tokensMatch(path, p.path[:len(path)]) {
			return true
		}
	}
	return false
}

// tokensMatch reports whether pattern (which may hold * tokens) names path.
func tokensMatch(pattern, path []string) bool {
	if len(pattern) != len(path) {
		return false
	}
	for i := range pattern {
		if pattern[i] != "*" && pattern[i] != path[i] {
			return false
		}
	}
	return true
}

// parsePointers splits JSON pointers into their unescaped tokens; "" and
// ill-formed pointers are left out (config validation refuses them).
func parsePointers(ptrs []string) [][]string {
	out := make([][]string, 0, len(ptrs))
	for _, p := range ptrs {
		if p == "" || p[0] != '/' {
			continue
		}
		toks := strings.Split(p[1:], "/")
		for i, tok := range toks {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		}
		out = append(out, toks)
	}
	return out
}

func pointerOf(path []string) string {
	var b strings.Builder
	for _, tok := range path {
		b.WriteByte('/')
		b.WriteString(escapeToken(tok))
	}
	return b.String()
}

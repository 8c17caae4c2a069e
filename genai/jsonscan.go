package genai

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// A tolerant JSON reader for the few fields Baton reads from model traffic.
//
// Bodies are large (prompts, embeddings, long answers) and most of their
// bytes are of no interest, so values are not decoded but skipped by
// scanning: strings by their quotes and escapes, objects and arrays by their
// brackets, without recursion. Only the values asked for are decoded. The
// reader checks structure, not every rule of the grammar: a malformed value
// that is skipped may go unnoticed, but a value that is read is read
// exactly, and nothing panics or reads out of bounds on any input.

// structural marks the bytes that matter while skipping an object or array.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// isSpace reports JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the index of the first non-space byte of b at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// valueEnd returns the index just past the value that starts at b[i], or -1
// when there is none or it is cut short.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		return compositeEnd(b, i)
	default:
		if !(c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n') {
			return -1
		}
		j := i + 1
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		return j
	}
}

// stringEnd returns the index just past the string whose opening quote is
// b[i], or -1 when it is not closed.
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// compositeEnd returns the index just past the object or array that opens
// at b[i], or -1 when it is not closed.
func compositeEnd(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		if !structural[b[j]] {
			continue
		}
		switch b[j] {
		case '"':
			e := stringEnd(b, j)
			if e < 0 {
				return -1
			}
			j = e - 1
		case '{', '[':
			depth++
		default:
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// object iterates the members of a JSON object.
type object struct {
	b      []byte
	i      int
	first  bool
	bad    bool // the object is malformed or cut short
	closed bool // next found its closing brace, at b[i]
}

// end returns the index just past the object once next has found its
// closing brace, -1 before or when it is malformed.
func (o *object) end() int {
	if !o.closed || o.bad {
		return -1
	}
	return o.i + 1
}

// objectOf starts iterating v, which must be an object; ok is false when it
// is not.
func objectOf(v []byte) (object, bool) {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return object{}, false
	}
	return object{b: v, i: i + 1, first: true}, true
}

// next returns the next member: its raw key (escapes left as they are) and
// its value's bytes. ok is false at the end of the object, or at the first
// malformed member (then o.bad is set).
func (o *object) next() (key, val []byte, ok bool) {
	b := o.b
	i := skipSpace(b, o.i)
	if i >= len(b) || o.bad {
		o.bad = true
		return nil, nil, false
	}
	if b[i] == '}' {
		o.i, o.closed = i, true
		return nil, nil, false
	}
	if !o.first {
		if b[i] != ',' {
			o.bad = true
			return nil, nil, false
		}
		i = skipSpace(b, i+1)
	}
	o.first = false
	if i >= len(b) || b[i] != '"' {
		o.bad = true
		return nil, nil, false
	}
	ke := stringEnd(b, i)
	if ke < 0 {
		o.bad = true
		return nil, nil, false
	}
	key = b[i+1 : ke-1]
	i = skipSpace(b, ke)
	if i >= len(b) || b[i] != ':' {
		o.bad = true
		return nil, nil, false
	}
	i = skipSpace(b, i+1)
	ve := valueEnd(b, i)
	if ve < 0 {
		o.bad = true
		return nil, nil, false
	}
	o.i = ve
	return key, b[i:ve], true
}

// array iterates the elements of a JSON array.
type array struct {
	b      []byte
	i      int
	first  bool
	bad    bool
	closed bool // next found its closing bracket, at b[i]
}

// end returns the index just past the array once next has found its
// closing bracket, -1 before or when it is malformed.
func (a *array) end() int {
	if !a.closed || a.bad {
		return -1
	}
	return a.i + 1
}

// arrayOf starts iterating v, which must be an array.
func arrayOf(v []byte) (array, bool) {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '[' {
		return array{}, false
	}
	return array{b: v, i: i + 1, first: true}, true
}

// next returns the next element's bytes; ok is false at the end of the
// array or at the first malformed element (then a.bad is set).
func (a *array) next() (val []byte, ok bool) {
	b := a.b
	i := skipSpace(b, a.i)
	if i >= len(b) || a.bad {
		a.bad = true
		return nil, false
	}
	if b[i] == ']' {
		a.i, a.closed = i, true
		return nil, false
	}
	if !a.first {
		if b[i] != ',' {
			a.bad = true
			return nil, false
		}
		i = skipSpace(b, i+1)
	}
	a.first = false
	ve := valueEnd(b, i)
	if ve < 0 {
		a.bad = true
		return nil, false
	}
	a.i = ve
	return b[i:ve], true
}

// isNull reports whether v is JSON null.
func isNull(v []byte) bool { return string(v) == "null" }

// stringOf decodes a JSON string value; ok is false for any other value.
func stringOf(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	raw := v[1 : len(v)-1]
	for _, c := range raw {
		if c == '\\' || c < 0x20 {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return "", false
			}
			return s, true
		}
	}
	return string(raw), true
}

// rawString returns the bytes of a string value without its quotes, escapes
// left as they are: enough to compare it with a known ASCII word without
// allocating. ok is false for any other value.
func rawString(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// maxTokens is the largest token count believed; a larger one is garbage.
const maxTokens = 1_000_000_000_000

// countOf decodes a token count: a JSON number that is a whole number from 0
// to maxTokens (12, 12.0 or 1.2e1). ok is false for anything else.
func countOf(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 32 {
		return 0, false
	}
	var n int64
	plain := len(v) <= 13
	for _, c := range v {
		if c < '0' || c > '9' {
			plain = false
			break
		}
		n = n*10 + int64(c-'0')
	}
	if plain {
		return n, n <= maxTokens
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, false // strconv would take "Inf", "NaN" and hex
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 || f > maxTokens || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// floatOf decodes a JSON number.
func floatOf(v []byte) (float64, bool) {
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

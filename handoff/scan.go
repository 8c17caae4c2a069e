package handoff

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"unicode/utf8"
)

// This file is a small, strict JSON parser that records where each value is
// rather than decoding it (a tape of offsets). Baton needs the byte offsets of
// a few members (to find the envelope inside an A2A request, and to splice
// provenance without re-encoding anything else), and walking the tape instead
// of a decoded tree keeps a check of a valid envelope to a dozen allocations.
// It accepts exactly what encoding/json accepts (FuzzFastPath compares them),
// so a document it reads is one every standard decoder reads the same way.

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// span is the byte range [s, e) of one JSON value.
type span struct{ s, e int }

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// String flags reported by scanString.
const (
	strEscaped  = 1 << iota // holds a backslash escape
	strNonASCII             // holds a byte >= 0x80
)

// scanString scans the string that starts at the quote b[i] and returns the
// offset after its closing quote (-1 when malformed) and its flags.
func scanString(b []byte, i int) (int, int) {
	flags := 0
	for i++; i < len(b); i++ {
		// Eight bytes at a time while none is a quote, a backslash or a
		// control character.
		for ; len(b)-i >= 8; i += 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			if hasLess(x, 0x20)|hasZero(x^(ones*'"'))|hasZero(x^(ones*'\\')) != 0 {
				break
			}
			if x&(ones*0x80) != 0 {
				flags |= strNonASCII
			}
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, flags
		case c == '\\':
			flags |= strEscaped
			if i+1 >= len(b) {
				return -1, 0
			}
			i++
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i < 5 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1, 0
				}
				i += 4
			default:
				return -1, 0
			}
		case c < 0x20:
			return -1, 0
		case c >= utf8.RuneSelf:
			flags |= strNonASCII
		}
	}
	return -1, 0
}

// ones has 1 in every byte: ones*c repeats the byte c.
const ones = 0x0101010101010101

// hasZero is non-zero when a byte of x is 0; hasLess when a byte of x is
// below n (n <= 128). Both are exact about whether such a byte exists.
func hasZero(x uint64) uint64    { return (x - ones) & ^x & (ones * 0x80) }
func hasLess(x, n uint64) uint64 { return (x - ones*n) & ^x & (ones * 0x80) }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber scans a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i
}

// node is one JSON value of a parsed document, or one member name.
type node struct {
	s, e  int32 // the bytes [s, e), quotes included for strings and names
	next  int32 // index of the node after this value and everything inside it
	flags uint8 // of a string or name: strEscaped, strNonASCII
}

// tape is a document parsed once into its values in document order: an
// object's node is followed by its members, each a name node and the value's
// nodes; an array's by its elements. Every walk over the document then skips
// a value by following next, without reading its bytes again.
type tape struct {
	b []byte
	n []node
}

// parse parses b, which must hold exactly one JSON value (and whitespace), as
// strictly as encoding/json. The root is node 0.
func (t *tape) parse(b []byte) bool { return t.parsePath(b, nil) }

// parsePath parses b like parse but records only the values along path (a
// member name per level) and their siblings, not what those siblings hold;
// the value at the end of path is recorded whole. The rest is checked and
// skipped, so a large body costs nodes only for the part Baton reads.
func (t *tape) parsePath(b []byte, path []string) bool {
	t.b, t.n = b, t.n[:0]
	if len(b) > math.MaxInt32 {
		return false
	}
	m := deep
	if len(path) > 0 {
		m = onPath
	}
	end := t.value(skipWS(b, 0), 0, m, path)
	return end >= 0 && skipWS(b, end) == len(b)
}

// recording says which nodes value appends for what it parses.
type recording uint8

const (
	skip    recording = iota // none
	shallow                  // the value's node, not its contents
	deep                     // the value's node and all its contents
	onPath                   // the node and its members shallowly, but the member named path[0] onPath with path[1:] (deep at the end)
)

// value parses the value at b[i] and returns the offset after it, or -1.
func (t *tape) value(i, depth int, m recording, path []string) int {
	b := t.b
	if i >= len(b) {
		return -1
	}
	idx := len(t.n)
	if m != skip {
		t.n = append(t.n, node{s: int32(i)})
	}
	flags := 0
	switch c := b[i]; c {
	case '"':
		i, flags = scanString(b, i)
	case '{', '[':
		if depth >= maxDepth {
			return -1
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == closer {
			i++
			break
		}
		for {
			child := skip
			if m == deep {
				child = deep
			}
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return -1
				}
				end, kflags := scanString(b, i)
				if end < 0 {
					return -1
				}
				if m == deep || m == onPath {
					t.n = append(t.n, node{s: int32(i), e: int32(end), next: int32(len(t.n) + 1), flags: uint8(kflags)})
				}
				if m == onPath {
					child = shallow
					if name := b[i+1 : end-1]; kflags&strEscaped == 0 && string(name) == path[0] || kflags&strEscaped != 0 && unquoted(name, path[0]) {
						child = onPath
						if len(path) == 1 {
							child = deep
						}
					}
				}
				if i = skipWS(b, end); i >= len(b) || b[i] != ':' {
					return -1
				}
				i = skipWS(b, i+1)
			}
			if i = t.value(i, depth+1, child, path[min(1, len(path)):]); i < 0 {
				return -1
			}
			if i = skipWS(b, i); i >= len(b) {
				return -1
			}
			if b[i] == closer {
				i++
				break
			}
			if b[i] != ',' {
				return -1
			}
			i = skipWS(b, i+1)
		}
	case 't':
		i = literal(b, i, "true")
	case 'f':
		i = literal(b, i, "false")
	case 'n':
		i = literal(b, i, "null")
	default:
		i = scanNumber(b, i)
	}
	if i < 0 {
		return -1
	}
	if m != skip {
		t.n[idx].e, t.n[idx].next, t.n[idx].flags = int32(i), int32(len(t.n)), uint8(flags)
	}
	return i
}

func unquoted(raw []byte, want string) bool {
	s, ok := unquote(raw)
	return ok && s == want
}

func (t *tape) span(i int) span { return span{int(t.n[i].s), int(t.n[i].e)} }

// kind is the first byte of value i: '{', '[', '"', 't', 'f', 'n' or a
// number's first byte.
func (t *tape) kind(i int) byte { return t.b[t.n[i].s] }

func (t *tape) isObject(i int) bool { return i >= 0 && t.kind(i) == '{' }
func (t *tape) isArray(i int) bool  { return i >= 0 && t.kind(i) == '[' }

// first returns the first member name of object i, or the first element of
// array i; end is where its children end. The next name after name k is
// t.after(k+1); the next element after element k is t.after(k).
func (t *tape) first(i int) (child, end int) { return i + 1, int(t.n[i].next) }

func (t *tape) after(i int) int { return int(t.n[i].next) }

// raw returns the bytes of a string or name between its quotes.
func (t *tape) raw(i int) []byte { return t.b[t.n[i].s+1 : t.n[i].e-1] }

// exact reports whether string i reads as its raw bytes: no escapes and valid
// UTF-8 (encoding/json replaces invalid bytes).
func (t *tape) exact(i int) bool {
	f := t.n[i].flags
	return f&strEscaped == 0 && (f&strNonASCII == 0 || utf8.Valid(t.raw(i)))
}

// is reports whether string or name i is want.
func (t *tape) is(i int, want string) bool {
	if i < 0 || t.kind(i) != '"' {
		return false
	}
	if raw := t.raw(i); t.exact(i) {
		return string(raw) == want
	}
	s, ok := unquote(t.raw(i))
	return ok && s == want
}

// str decodes string i; ok is false when i is not a string.
func (t *tape) str(i int) (string, bool) {
	if i < 0 || t.kind(i) != '"' {
		return "", false
	}
	if t.exact(i) {
		return string(t.raw(i)), true
	}
	return unquote(t.raw(i))
}

// member returns the value of the last member of object i named name, or -1.
func (t *tape) member(i int, name string) int {
	v := -1
	for k, end := t.first(i); k < end; k = t.after(k + 1) {
		if t.is(k, name) {
			v = k + 1
		}
	}
	return v
}

// count returns the number of elements of array i.
func (t *tape) count(i int) int {
	n := 0
	for k, end := t.first(i); k < end; k = t.after(k) {
		n++
	}
	return n
}

// unquote decodes the contents of a JSON string (without its quotes) exactly
// as encoding/json does.
func unquote(raw []byte) (string, bool) {
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var s string
	if json.Unmarshal(q, &s) != nil {
		return "", false
	}
	return s, true
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

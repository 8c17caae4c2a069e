package handoff

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// This file is a small, strict JSON scanner over raw bytes. Baton needs the
// byte offsets of a few members (to find the envelope inside an A2A request
// and to splice provenance without re-encoding anything else), and walking
// the bytes directly keeps a check of a valid envelope nearly free of
// allocations. It accepts only what encoding/json accepts, so a document it
// calls valid is one every standard decoder reads the same way.

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// span is the byte range [s, e) of one JSON value; e == 0 means absent.
type span struct{ s, e int }

func (v span) ok() bool { return v.e > v.s }

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

// skipValue returns the end of the JSON value that starts at b[i], or -1 when
// the bytes there are not one valid JSON value.
func skipValue(b []byte, i int) int { return skipValueDepth(b, i, 0) }

func skipValueDepth(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		end, _ := scanString(b, i)
		return end
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
			return i + 1
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return -1
				}
				if i, _ = scanString(b, i); i < 0 {
					return -1
				}
				if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
					return -1
				}
				i = skipWS(b, i+1)
			}
			if i = skipValueDepth(b, i, depth+1); i < 0 {
				return -1
			}
			if i = skipWS(b, i); i >= len(b) {
				return -1
			}
			if b[i] == closer {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = skipWS(b, i+1)
		}
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		return scanNumber(b, i)
	}
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

// skipValid returns the end of the value at b[i], which must be known to be
// valid JSON (see document): it only matches brackets and skips strings.
func skipValid(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipValidString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipValidString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// skipValidString returns the offset after the string that starts at b[i].
func skipValidString(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

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

// document returns the span of the single JSON value that b holds (with
// optional surrounding whitespace), or false when b is not one valid JSON
// value.
func document(b []byte) (span, bool) {
	s := skipWS(b, 0)
	e := skipValue(b, s)
	if e < 0 || skipWS(b, e) != len(b) {
		return span{}, false
	}
	return span{s, e}, true
}

// members iterates over the members of the JSON object that starts at b[i].
// The object must already be known to be valid JSON (see document).
type members struct {
	b []byte
	i int
}

func objectAt(b []byte, i int) members { return members{b: b, i: i + 1} }

// member is one member of an object: key is the raw key between its quotes.
type member struct {
	key     []byte
	keySpan span // including the quotes
	escaped bool // the key holds escapes: compare it with keyString
	val     span
}

// next returns the next member, or false at the end of the object.
func (m *members) next() (member, bool) {
	i := skipWS(m.b, m.i)
	if i < len(m.b) && m.b[i] == ',' {
		i = skipWS(m.b, i+1)
	}
	if i >= len(m.b) || m.b[i] != '"' {
		return member{}, false
	}
	ke := skipValidString(m.b, i)
	if ke < 0 {
		return member{}, false
	}
	escaped := bytes.IndexByte(m.b[i:ke], '\\') >= 0
	vs := skipWS(m.b, skipWS(m.b, ke)+1) // past the colon
	ve := skipValid(m.b, vs)
	if ve < 0 {
		return member{}, false
	}
	m.i = ve
	return member{
		key:     m.b[i+1 : ke-1],
		keySpan: span{i, ke},
		escaped: escaped,
		val:     span{vs, ve},
	}, true
}

// is reports whether the member's key is name.
func (mb member) is(name string) bool {
	if !mb.escaped {
		return string(mb.key) == name
	}
	k, ok := unquote(mb.key)
	return ok && k == name
}

// name returns the decoded key.
func (mb member) name() string {
	if !mb.escaped {
		return string(mb.key)
	}
	k, _ := unquote(mb.key)
	return k
}

// elements iterates over the values of the JSON array that starts at b[i],
// which must already be known to be valid JSON.
type elements struct {
	b []byte
	i int
}

func arrayAt(b []byte, i int) elements { return elements{b: b, i: i + 1} }

func (a *elements) next() (span, bool) {
	i := skipWS(a.b, a.i)
	if i < len(a.b) && a.b[i] == ',' {
		i = skipWS(a.b, i+1)
	}
	if i >= len(a.b) || a.b[i] == ']' {
		return span{}, false
	}
	e := skipValid(a.b, i)
	if e < 0 {
		return span{}, false
	}
	a.i = e
	return span{i, e}, true
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

// stringValue decodes the JSON string at v; ok is false when v is not a
// string.
func stringValue(b []byte, v span) (string, bool) {
	if !v.ok() || b[v.s] != '"' {
		return "", false
	}
	raw := b[v.s+1 : v.e-1]
	_, flags := scanString(b, v.s)
	if flags&strEscaped == 0 && (flags&strNonASCII == 0 || utf8.Valid(raw)) {
		return string(raw), true
	}
	return unquote(raw)
}

// isString reports whether the value at v is the JSON string want.
func isString(b []byte, v span, want string) bool {
	if !v.ok() || b[v.s] != '"' {
		return false
	}
	raw := b[v.s+1 : v.e-1]
	if len(raw) == len(want) && string(raw) == want {
		return true
	}
	s, ok := stringValue(b, v)
	return ok && s == want
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

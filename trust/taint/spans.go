package taint

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Span is one string value of a body with its RFC 6901 JSON pointer: "" for
// a whole text body, or for a JSON body that is a single string.
type Span struct {
	Pointer string
	Text    []byte
}

// MaxDepth is the deepest nesting of objects and arrays Spans accepts.
const MaxDepth = 256

// ErrDepth is returned (wrapped) by Spans for a body nested deeper than
// MaxDepth.
var ErrDepth = errors.New("taint: json nested deeper than 256 levels")

// SyntaxError is Spans' error for a body that is not valid JSON.
type SyntaxError struct {
	Offset int // the byte offset at which the body stopped being JSON
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("taint: invalid json at offset %d: %s", e.Offset, e.Msg)
}

// Spans calls fn for every JSON string value of body whose text, unescaped,
// is at least minLen bytes, with the value's JSON pointer. Objects and arrays
// are walked in document order; object keys are not spans, and a key that
// occurs twice in an object is walked twice. Strings are unescaped as
// encoding/json does: \uXXXX escapes, surrogate pairs joined, a lone
// surrogate or an invalid UTF-8 byte becomes U+FFFD.
//
// text is only valid during the call to fn (it may point into body or into a
// reused buffer); copy it to keep it. Spans returns a *SyntaxError for a body
// that is not exactly one JSON value (surrounding whitespace allowed), and an
// error wrapping ErrDepth for one nested deeper than MaxDepth; in both cases
// fn may already have been called for spans before the fault.
//
// Spans does not allocate for a string without escapes, nor for one with
// escapes once its buffers have grown; it allocates each pointer string it
// passes to fn.
func Spans(body []byte, minLen int, fn func(pointer string, text []byte)) error {
	s := scannerPool.Get().(*spanScanner)
	s.body, s.pos, s.minLen, s.fn = body, 0, minLen, fn
	s.ptr = s.ptr[:0]
	s.skipSpace()
	err := s.value(0)
	if err == nil {
		s.skipSpace()
		if s.pos < len(s.body) {
			err = s.fail("unexpected data after the top-level value")
		}
	}
	s.body, s.fn = nil, nil
	scannerPool.Put(s)
	return err
}

var scannerPool = sync.Pool{New: func() any { return new(spanScanner) }}

// spanScanner is a recursive-descent JSON scanner. Its buffers are reused
// through scannerPool.
type spanScanner struct {
	body   []byte
	pos    int
	minLen int
	fn     func(string, []byte)
	ptr    []byte // the pointer of the current value
	text   []byte // unescaped string values
	key    []byte // unescaped object keys
}

func (s *spanScanner) fail(msg string) error {
	return &SyntaxError{Offset: s.pos, Msg: msg}
}

func (s *spanScanner) failEOF() error {
	return &SyntaxError{Offset: len(s.body), Msg: "unexpected end of input"}
}

func (s *spanScanner) skipSpace() {
	for s.pos < len(s.body) {
		switch s.body[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans the value at s.pos; depth is the nesting of its container.
func (s *spanScanner) value(depth int) error {
	if s.pos >= len(s.body) {
		return s.failEOF()
	}
	switch c := s.body[s.pos]; c {
	case '{':
		return s.object(depth + 1)
	case '[':
		return s.array(depth + 1)
	case '"':
		text, err := s.str(&s.text)
		if err != nil {
			return err
		}
		if len(text) >= s.minLen {
			s.fn(string(s.ptr), text)
		}
		return nil
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return s.number()
		}
		return s.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (s *spanScanner) object(depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("at offset %d: %w", s.pos, ErrDepth)
	}
	s.pos++ // {
	s.skipSpace()
	if s.pos < len(s.body) && s.body[s.pos] == '}' {
		s.pos++
		return nil
	}
	base := len(s.ptr)
	for {
		if s.pos >= len(s.body) {
			return s.failEOF()
		}
		if s.body[s.pos] != '"' {
			return s.fail("expected a string object key")
		}
		key, err := s.str(&s.key)
		if err != nil {
			return err
		}
		s.ptr = appendPointerToken(append(s.ptr[:base], '/'), key)
		s.skipSpace()
		if s.pos >= len(s.body) {
			return s.failEOF()
		}
		if s.body[s.pos] != ':' {
			return s.fail("expected ':' after an object key")
		}
		s.pos++
		s.skipSpace()
		if err := s.value(depth); err != nil {
			return err
		}
		s.ptr = s.ptr[:base]
		s.skipSpace()
		if s.pos >= len(s.body) {
			return s.failEOF()
		}
		switch s.body[s.pos] {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or '}' in an object")
		}
	}
}

func (s *spanScanner) array(depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("at offset %d: %w", s.pos, ErrDepth)
	}
	s.pos++ // [
	s.skipSpace()
	if s.pos < len(s.body) && s.body[s.pos] == ']' {
		s.pos++
		return nil
	}
	base := len(s.ptr)
	for i := 0; ; i++ {
		s.ptr = strconv.AppendInt(append(s.ptr[:base], '/'), int64(i), 10)
		if err := s.value(depth); err != nil {
			return err
		}
		s.ptr = s.ptr[:base]
		s.skipSpace()
		if s.pos >= len(s.body) {
			return s.failEOF()
		}
		switch s.body[s.pos] {
		case ',':
			s.pos++
			s.skipSpace()
		case ']':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or ']' in an array")
		}
	}
}

// appendPointerToken appends key escaped per RFC 6901: ~ as ~0, / as ~1.
func appendPointerToken(dst, key []byte) []byte {
	for _, c := range key {
		switch c {
		case '~':
			dst = append(dst, '~', '0')
		case '/':
			dst = append(dst, '~', '1')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func (s *spanScanner) literal(word string) error {
	if len(s.body)-s.pos < len(word) {
		if string(s.body[s.pos:]) == word[:len(s.body)-s.pos] {
			return s.failEOF()
		}
		return s.fail("invalid literal")
	}
	if string(s.body[s.pos:s.pos+len(word)]) != word {
		return s.fail("invalid literal")
	}
	s.pos += len(word)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *spanScanner) number() error {
	b := s.body
	i := s.pos
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		s.pos = i
		return s.failEOF()
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		s.pos = i
		return s.fail("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) {
			s.pos = i
			return s.failEOF()
		}
		if !isDigit(b[i]) {
			s.pos = i
			return s.fail("invalid number: no digit after '.'")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) {
			s.pos = i
			return s.failEOF()
		}
		if !isDigit(b[i]) {
			s.pos = i
			return s.fail("invalid number: no digit in exponent")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.pos = i
	return nil
}

// str scans the string at s.pos and returns its text: a slice of the body
// when the string has no escapes and is valid UTF-8, else the string
// unescaped into *buf.
func (s *spanScanner) str(buf *[]byte) ([]byte, error) {
	b := s.body
	start := s.pos + 1
	i := start
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return b[start:i], nil
		case c == '\\':
			return s.unescape(buf, start, i)
		case c < 0x20:
			s.pos = i
			return nil, s.fail("control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return s.unescape(buf, start, i)
			}
			i += n
		}
	}
	return nil, s.failEOF()
}

// unescape decodes the string that starts at start (after its quote) into
// *buf; b[start:i] is known to need no decoding.
func (s *spanScanner) unescape(buf *[]byte, start, i int) ([]byte, error) {
	b := s.body
	out := append((*buf)[:0], b[start:i]...)
	defer func() { *buf = out[:0] }()
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return out, nil
		case c == '\\':
			if i+1 >= len(b) {
				return nil, s.failEOF()
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
				i += 2
			case 'b':
				out = append(out, '\b')
				i += 2
			case 'f':
				out = append(out, '\f')
				i += 2
			case 'n':
				out = append(out, '\n')
				i += 2
			case 'r':
				out = append(out, '\r')
				i += 2
			case 't':
				out = append(out, '\t')
				i += 2
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok {
					s.pos = i
					if len(b)-i < 6 && validHexPrefix(b[i+2:]) {
						return nil, s.failEOF()
					}
					return nil, s.fail("invalid \\u escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// Join a surrogate pair; anything else, a lone
					// surrogate, is U+FFFD and the next escape stands alone.
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						if r2, ok := hex4(b, i+2); ok {
							if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
								out = utf8.AppendRune(out, d)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				s.pos = i
				return nil, s.fail(fmt.Sprintf("invalid escape \\%c", e))
			}
		case c < 0x20:
			s.pos = i
			return nil, s.fail("control character in string")
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			out = utf8.AppendRune(out, r) // an invalid byte is U+FFFD
			i += n
		}
	}
	return nil, s.failEOF()
}

// hex4 decodes the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func validHexPrefix(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

package genai

import "bytes"

// Most events of a stream under way are content deltas that repeat one
// shape: the same members, in the same order, with the same values, but for
// one or two strings (the text, and OpenAI's obfuscation padding). Once an
// event has been found to carry nothing Baton still needs, the next one that
// repeats its bytes outside those strings carries nothing either, and is
// recognised by comparing bytes rather than by looking at each member.

const (
	// maxShapeBytes bounds the event a shape is kept of.
	maxShapeBytes = 1 << 10
	// maxShapeGaps bounds the strings in which events of one shape may differ.
	maxShapeGaps = 4
)

// shape is the last event found to carry nothing, and the strings in which
// it differed from the one found before it.
type shape struct {
	b    []byte
	gaps [maxShapeGaps]struct{ open, close int32 } // a varying string's quotes in b (within maxShapeBytes)
	n    int                                       // gaps in use
	ok   bool                                      // b and gaps make a shape
}

// match reports whether data repeats the shape: the bytes of the shape's
// event, but for the contents of its varying strings, each ending where a
// JSON string ends.
func (s *shape) match(data []byte) bool {
	if !s.ok {
		return false
	}
	pos, from := 0, 0
	for _, g := range s.gaps[:s.n] {
		seg := s.b[from : int(g.open)+1]
		if !bytes.HasPrefix(data[pos:], seg) {
			return false
		}
		end := stringEnd(data, pos+len(seg)-1)
		if end < 0 {
			return false
		}
		pos, from = end-1, int(g.close)
	}
	return bytes.Equal(data[pos:], s.b[from:])
}

// learn takes an event found to carry nothing: with the one learnt before
// it, it makes the shape, when the two differ only in the contents of a few
// strings that are values, not member names.
func (s *shape) learn(data []byte) {
	if len(data) > maxShapeBytes {
		s.ok, s.b = false, s.b[:0]
		return
	}
	s.ok = len(s.b) > 0 && s.diff(s.b, data)
	s.b = append(s.b[:0], data...)
}

// diff finds the strings in which b differs from a, setting s.gaps to their
// quotes in b; it reports whether b differs from a in such strings only.
func (s *shape) diff(a, b []byte) bool {
	s.n = 0
	i, j := 0, 0 // in a, in b: both at the same point of the same bytes
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return bytes.Equal(a[i:], b[j:])
		}
		// The bytes up to the string, and its opening quote, are the same.
		if len(a)-i <= k || !bytes.Equal(a[i:i+k+1], b[j:j+k+1]) {
			return false
		}
		ea, eb := stringEnd(a, i+k), stringEnd(b, j+k)
		if ea < 0 || eb < 0 {
			return false
		}
		if !bytes.Equal(a[i+k:ea], b[j+k:eb]) {
			if s.n == maxShapeGaps || !wholeValue(b, j+k, eb) {
				return false
			}
			s.gaps[s.n].open, s.gaps[s.n].close = int32(j+k), int32(eb-1)
			s.n++
		}
		i, j = ea, eb
	}
}

// wholeValue reports whether the string from b[open] to just before b[end]
// is a value of its own: a member's, or an array's element, not a member's
// name nor part of something else. a and b have the same bytes around it.
func wholeValue(b []byte, open, end int) bool {
	i := open - 1
	for i >= 0 && isSpace(b[i]) {
		i--
	}
	if i < 0 || b[i] != ':' && b[i] != '[' && b[i] != ',' {
		return false
	}
	end = skipSpace(b, end)
	return end < len(b) && (b[end] == ',' || b[end] == '}' || b[end] == ']')
}

package genai

import "bytes"

// How a streamed answer's bytes split into events: Server-Sent Events, a
// JSON array of objects (Gemini's streamGenerateContent without alt=sse),
// or one JSON document. Each reader is a state machine fed chunks split
// anywhere: inside a line, a CRLF, a string or a UTF-8 sequence.

// Server-Sent Events, as the HTML standard parses them: lines end in CRLF,
// LF or CR; a blank line dispatches the event; "data" lines are joined with
// "\n"; one space after the colon is dropped; comments and other fields are
// ignored.
const (
	lineStart = iota
	inField
	valueStart
	inValue
)

const (
	fieldOther = iota
	fieldData
	fieldEvent
)

// sseReader is the state between chunks of an SSE stream.
type sseReader struct {
	state   uint8
	kind    uint8
	cr      bool // the last line ended in CR: a following LF belongs to it
	hasData bool // the event has a data field
	field   [5]byte
	flen    int // may exceed len(field): then it is no field Baton reads
	name    [64]byte
	nlen    int  // may exceed len(name): then it is no event name Baton knows
	noCR    bool // the chunk being read holds no CR
}

// sseFeed parses a chunk of an SSE stream.
func (s *Stream) sseFeed(p []byte) {
	r := &s.sse
	// A chunk with no CR (as most are) ends its lines at LF only: one scan
	// of the chunk spares each line its own scan for a CR.
	r.noCR = bytes.IndexByte(p, '\r') < 0
	for i := 0; i < len(p); {
		if r.cr {
			r.cr = false
			if p[i] == '\n' {
				i++
				continue
			}
		}
		switch r.state {
		case lineStart:
			if !r.hasData {
				if n := s.sseWhole(p[i:]); n > 0 {
					i += n
					continue
				}
			}
			if c := p[i]; c == '\r' || c == '\n' {
				r.cr = c == '\r'
				i++
				s.sseDispatch()
				continue
			}
			r.state, r.flen = inField, 0
		case inField:
			j := i
			for j < len(p) && p[j] != ':' && p[j] != '\r' && p[j] != '\n' {
				if r.flen < len(r.field) {
					r.field[r.flen] = p[j]
				}
				r.flen++
				j++
			}
			if j == len(p) {
				i = j
				continue
			}
			r.kind = fieldOther
			switch string(r.field[:min(r.flen, len(r.field))]) {
			case "data":
				if r.flen == 4 {
					r.kind = fieldData
				}
			case "event":
				if r.flen == 5 {
					r.kind = fieldEvent
				}
			}
			if p[j] == ':' {
				i, r.state = j+1, valueStart
				continue
			}
			// A line without a colon is a field with an empty value.
			s.sseBeginValue()
			r.cr, i, r.state = p[j] == '\r', j+1, lineStart
		case valueStart:
			s.sseBeginValue()
			if p[i] == ' ' {
				i++
			}
			r.state = inValue
		case inValue:
			j := r.lineEnd(p[i:])
			if j < 0 {
				s.sseValue(p[i:])
				i = len(p)
				continue
			}
			s.sseValue(p[i : i+j])
			r.cr, i, r.state = p[i+j] == '\r', i+j+1, lineStart
		}
	}
}

// sseWhole delivers an event of one data line that q holds whole, as most
// are, from q itself, and returns the bytes it took; 0 when q does not start
// with such an event, which is then read line by line.
func (s *Stream) sseWhole(q []byte) int {
	if len(q) < 8 || string(q[:5]) != "data:" {
		return 0
	}
	v := 5
	if q[v] == ' ' {
		v++
	}
	n := s.sse.lineEnd(q[v:])
	if n <= 0 || n > MaxEventBytes {
		return 0
	}
	end := v + n
	switch rest := q[end:]; {
	case len(rest) >= 2 && rest[0] == '\n' && rest[1] == '\n':
		end += 2
	case len(rest) >= 4 && string(rest[:4]) == "\r\n\r\n":
		end += 4
	default:
		return 0
	}
	s.deliver(s.sse.eventName(), q[v:v+n])
	s.sse.nlen = 0
	return end
}

// lineEnd returns the index of the first CR or LF in p, a piece of the
// chunk being read, or -1.
func (r *sseReader) lineEnd(p []byte) int {
	n := bytes.IndexByte(p, '\n')
	if r.noCR {
		return n
	}
	q := p
	if n >= 0 {
		q = p[:n]
	}
	if c := bytes.IndexByte(q, '\r'); c >= 0 {
		return c
	}
	return n
}

// sseBeginValue starts a field's value.
func (s *Stream) sseBeginValue() {
	r := &s.sse
	switch r.kind {
	case fieldData:
		if r.hasData {
			s.ev.write([]byte{'\n'})
		}
		r.hasData = true
	case fieldEvent:
		r.nlen = 0
	}
}

// sseValue adds to a field's value.
func (s *Stream) sseValue(v []byte) {
	r := &s.sse
	switch r.kind {
	case fieldData:
		s.ev.write(v)
	case fieldEvent:
		if r.nlen+len(v) <= len(r.name) {
			copy(r.name[r.nlen:], v)
		}
		r.nlen += len(v)
	}
}

// eventName is the event's name, nil when it was too long to keep.
func (r *sseReader) eventName() []byte {
	if r.nlen <= len(r.name) {
		return r.name[:r.nlen]
	}
	return nil
}

// sseDispatch ends an event at a blank line.
func (s *Stream) sseDispatch() {
	r := &s.sse
	if r.hasData {
		s.emit(r.eventName(), false)
	}
	r.hasData, r.nlen = false, 0
}

// sseClose ends the stream. The standard drops an event left open at the
// end; one whose last line is complete is delivered all the same, for
// servers that end with a single newline.
func (s *Stream) sseClose() {
	if s.sse.state == lineStart {
		s.sseDispatch()
	}
}

// A JSON array stream: "[", objects separated by commas and whitespace, "]".
const (
	arrBefore = iota
	arrBetween
	arrIn
	arrDone
)

// arrReader is the state between chunks of a JSON array stream.
type arrReader struct {
	state     uint8
	depth     int
	inStr     bool
	esc       bool
	composite bool
}

// arrayFeed parses a chunk of a JSON array stream; each element is one
// event.
func (s *Stream) arrayFeed(p []byte) {
	r := &s.arr
	for i := 0; i < len(p); {
		switch r.state {
		case arrBefore:
			c := p[i]
			i++
			if isSpace(c) {
				continue
			}
			r.state = arrBetween
			if c != '[' {
				r.state = arrDone
			}
		case arrBetween:
			c := p[i]
			if isSpace(c) || c == ',' {
				i++
				continue
			}
			if c == ']' {
				r.state = arrDone
				i++
				continue
			}
			r.state, r.depth, r.inStr, r.esc = arrIn, 0, false, false
			r.composite = c == '{' || c == '['
		case arrIn:
			start, end := i, -1
			for ; i < len(p) && end < 0; i++ {
				c := p[i]
				if r.inStr {
					switch {
					case r.esc:
						r.esc = false
					case c == '\\':
						r.esc = true
					case c == '"':
						r.inStr = false
					}
					continue
				}
				switch c {
				case '"':
					r.inStr = true
				case '{', '[':
					r.depth++
				case '}', ']':
					r.depth--
					if r.depth <= 0 && r.composite {
						end = i + 1
					}
				}
				if !r.composite && (c == ',' || c == ']' || isSpace(c)) {
					end = i
				}
			}
			if end < 0 {
				s.ev.write(p[start:])
				continue
			}
			s.ev.write(p[start:end])
			i = end
			s.emit(nil, true)
			r.state = arrBetween
		case arrDone:
			return
		}
	}
}

// docFeed keeps a single JSON document, delivered when the stream closes;
// one that comes whole in one piece, as Expect said, is read at once.
func (s *Stream) docFeed(p []byte) {
	if s.expect > 0 && len(s.ev.buf) == 0 && !s.ev.over { // the answer's first bytes
		if len(p) == s.expect {
			// The whole answer in one piece, as its length said: read in
			// place, and not kept.
			s.ev.buf = p
			s.emit(nil, true)
			s.ev.buf = nil
			return
		}
		if cap(s.ev.buf) == 0 {
			s.ev.buf = make([]byte, 0, s.expect)
		}
	}
	s.ev.write(p)
}

package genai

// Limits on what a stream keeps of one event (or of one whole body, or one
// element of a JSON array stream).
const (
	// MaxEventBytes is the largest event kept whole. A larger one keeps
	// only its first headBytes and last tailBytes, enough to find the usage
	// and status that the providers write before and after the bulk.
	MaxEventBytes = 1 << 20
	headBytes     = 16 << 10
	tailBytes     = 64 << 10
	// keepBytes is the buffer capacity kept between events; a larger
	// buffer, grown for one large event, is let go.
	keepBytes = 64 << 10
)

// eventBuf collects one event's bytes, whole up to MaxEventBytes, else its
// head and its tail.
type eventBuf struct {
	buf  []byte // the event, or its head once over
	over bool
	ring []byte // the tail once over: a ring of tailBytes
	pos  int    // next write position in ring
	full bool   // ring has wrapped
	flat []byte // scratch for the tail in order
}

// write appends p to the event.
func (e *eventBuf) write(p []byte) {
	if !e.over {
		if need := len(e.buf) + len(p); need <= MaxEventBytes {
			if need > cap(e.buf) { // grow as append would, but never past the limit
				nb := make([]byte, len(e.buf), min(max(need, 2*cap(e.buf), 512), MaxEventBytes))
				copy(nb, e.buf)
				e.buf = nb
			}
			e.buf = append(e.buf, p...)
			return
		}
		e.over = true
		if e.ring == nil {
			e.ring = make([]byte, tailBytes)
		}
		e.pos, e.full = 0, false
		if n := headBytes - len(e.buf); n > 0 {
			n = min(n, len(p))
			e.buf, p = append(e.buf, p[:n]...), p[n:]
		} else {
			e.ringWrite(e.buf[headBytes:])
			e.buf = e.buf[:headBytes]
		}
	}
	e.ringWrite(p)
}

// ringWrite appends p to the tail ring.
func (e *eventBuf) ringWrite(p []byte) {
	if len(p) >= tailBytes {
		copy(e.ring, p[len(p)-tailBytes:])
		e.pos, e.full = 0, true
		return
	}
	n := copy(e.ring[e.pos:], p)
	if n < len(p) {
		copy(e.ring, p[n:])
		e.full = true
	}
	e.pos = (e.pos + len(p)) % tailBytes
	if e.pos == 0 && len(p) > 0 {
		e.full = true
	}
}

// tail returns the kept tail in order; valid until the next reset.
func (e *eventBuf) tail() []byte {
	if !e.full {
		return e.ring[:e.pos]
	}
	e.flat = append(append(e.flat[:0], e.ring[e.pos:]...), e.ring[:e.pos]...)
	return e.flat
}

// reset empties the buffer for the next event, letting go of memory grown
// for a large one.
func (e *eventBuf) reset() {
	if cap(e.buf) > keepBytes {
		e.buf = nil
	}
	e.buf = e.buf[:0]
	if e.over {
		e.ring, e.flat = nil, nil
	}
	e.over, e.pos, e.full = false, 0, false
}

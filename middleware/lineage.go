package middleware

// Lineage: which request an agent's call serves, by what the agent read
// (docs/resume.md#lineage-several-requests-at-once-no-instrumentation). An agent that serves several requests at once
// and forwards no trace context leaves Baton no header to tie its calls by;
// but an LLM agent's calls quote what it read while handling the request:
// its first model call quotes the task it received, its next handoff the
// arguments the model wrote into a tool call, the model call after that the
// tool's result. So, once two handlings have been in flight at once, each
// keeps what the agent read within it: the inbound body delivered to the
// agent, and the answers to its calls already tied to it, as they arrive
// (the agent may act on an answer before its end). A call that carries no
// context and quotes what the agent read within exactly one in-flight
// handling belongs to that handling; each tie then feeds the next.
//
// Safety first: only phrases distinctive of one handling count (a phrase
// that two in-flight handlings read, JSON's own keys, a shared system
// prompt, two identical requests, count for neither), and a call whose
// distinctive phrases point at two handlings ties nothing. A missed tie
// costs a re-run (the call gets a key from its content, as before); a
// wrong one would answer one request with another's dedupe answer or
// journal entry, never. A phrase is three words of the text, words being
// runs of letters and digits (any byte above 0x7f counts as a letter, so
// that UTF-8 text forms words), JSON string escapes being separators.
//
// What an answer says that its call said too is not what the agent read
// but what it wrote: a model's answer names the model it was asked for,
// echoes its instructions and tools. An agent's every call carries such
// text, so a phrase of it read within one handling only would make every
// other handling's calls look as if they quoted that one. Each answer is
// kept with the head of the call that fetched it, as the agent wrote it
// (before Baton's trust marks re-encoded it), and an answer's phrases that
// the call carried count as none of its handling's.
//
// Bounds: a handling keeps at most maxLineageBytes of what the agent read
// and of the calls that fetched it (the inbound body's head, then answers'
// heads each with its call's), and the phrases of it (8 bytes each) are
// hashed once, when a lookup first needs them; all of it is let go when the
// agent answers. Only the inbound body is kept (as it is, when it is small)
// until the agent has had two requests in flight at once; nothing is hashed
// while one handling at most is in flight.

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/batonproxy/baton/handoff/record"
)

// Bounds of lineage.
const (
	// maxLineageBytes bounds what one handling keeps of what its agent
	// read; MaxLineageRead what one answer adds to it.
	maxLineageBytes = 64 << 10
	MaxLineageRead  = 16 << 10
	// maxLineagePeek bounds what of a call's body is read for its
	// phrases: its head.
	maxLineagePeek = 32 << 10
	// minLineageEvidence is the distinctive phrases a tie needs.
	minLineageEvidence = 2
	// maxLineageReads bounds the texts a handling keeps: a phrase names
	// its read in 8 bits.
	maxLineageReads = 255
)

// lineageSeed keys the hash of words: one per process, so that every
// handling's phrases and every call's compare, and text cannot be written
// to collide with another's.
var lineageSeed = rand.Uint64() | 1

// lineage is what the agent read within one handling.
type lineage struct {
	mu      sync.Mutex
	reads   []lineageRead
	size    int
	phrases []phrase       // sorted; nil until hashed, or after a read
	dropped bool           // the agent answered: nothing more is kept
	first   [1]lineageRead // the first read (its task) needs no allocation
}

// lineageRead is one text the agent read, and what it was; for an answer,
// call is the head of the call that fetched it.
type lineageRead struct {
	src  string
	text []byte
	call []byte
}

// phrase is one phrase's hash (its high 56 bits) and the read it came
// from (its low 8): 8 bytes a phrase.
type phrase uint64

const readBits = 0xff

func (p phrase) key() uint64 { return uint64(p) &^ readBits }
func (p phrase) read() int   { return int(p & readBits) }

// read adds what the agent read (src says what: "its task", "the answer of
// api.openai.com:443"), its head up to the bounds, and for an answer the
// head of the call that fetched it. own says text may be kept as it is (the
// caller does not reuse it); otherwise it is copied. call is copied.
func (l *lineage) read(src string, text, call []byte, own bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(len(text), MaxLineageRead, maxLineageBytes-l.size)
	if n <= 0 || l.dropped || len(l.reads) >= maxLineageReads {
		return
	}
	t := text[:n]
	if !own {
		t = append([]byte(nil), t...)
	}
	if l.reads == nil {
		l.reads = l.first[:0]
	}
	var c []byte
	if k := min(len(call), MaxLineageRead, maxLineageBytes-l.size-n); k > 0 {
		c = append([]byte(nil), call[:k]...)
	}
	l.reads = append(l.reads, lineageRead{src: src, text: t, call: c})
	l.size += n + len(c)
	l.phrases = nil
}

// begin adds an answer the agent is about to read (src says what it is),
// with the head of the call that fetched it, and returns its index for
// grow; -1 when the handling keeps no more.
func (l *lineage) begin(src string, call []byte) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped || l.size >= maxLineageBytes || len(l.reads) >= maxLineageReads {
		return -1
	}
	var c []byte
	if k := min(len(call), MaxLineageRead, maxLineageBytes-l.size); k > 0 {
		c = append([]byte(nil), call[:k]...)
	}
	l.reads = append(l.reads, lineageRead{src: src, call: c})
	l.size += len(c)
	return len(l.reads) - 1
}

// grow sets what the agent has read so far of answer i (from begin): the
// head of text, up to the bounds. text is kept as it is: the caller may
// append to it, never change what it holds.
func (l *lineage) grow(i int, text []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped || i < 0 || i >= len(l.reads) {
		return
	}
	r := &l.reads[i]
	n := min(len(text), MaxLineageRead, len(r.text)+maxLineageBytes-l.size)
	if n <= len(r.text) {
		return
	}
	l.size += n - len(r.text)
	r.text = text[:n]
	l.phrases = nil
}

// hashed returns the handling's phrases, sorted, hashing what is new: a
// phrase's first read names it. Called with mu held.
func (l *lineage) hashed() []phrase {
	if l.phrases != nil || len(l.reads) == 0 {
		return l.phrases
	}
	ps := make([]phrase, 0, l.size/6)
	var wrote []uint64
	for i, r := range l.reads {
		wrote = wrote[:0]
		eachPhrase(r.call, func(h uint64) { wrote = append(wrote, h&^readBits) })
		slices.Sort(wrote)
		eachPhrase(r.text, func(h uint64) {
			if _, echoed := slices.BinarySearch(wrote, h&^readBits); !echoed {
				ps = append(ps, phrase(h&^readBits|uint64(i)))
			}
		})
	}
	slices.Sort(ps) // by hash, then read
	l.phrases = slices.CompactFunc(ps, func(a, b phrase) bool { return a.key() == b.key() })
	return l.phrases
}

// drop lets go of what the agent read: its handling was answered.
func (l *lineage) drop() {
	l.mu.Lock()
	l.reads, l.phrases, l.size, l.dropped, l.first = nil, nil, 0, true, [1]lineageRead{}
	l.mu.Unlock()
}

// eachPhrase calls fn with the hash of each phrase of text: three words in
// a row. A word's hash is FNV-1a of its bytes, lowercased, from a basis
// keyed by lineageSeed; a phrase's mixes its three words' in order.
func eachPhrase(text []byte, fn func(uint64)) {
	const prime = 0x100000001b3
	var w0, w1, h uint64 // the two words before, the word being read
	n, in := 0, false
	emit := func() {
		if n++; n >= 3 {
			fn(mixPhrase(w0, w1, h))
		}
		w0, w1, in = w1, h, false
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\\':
			if in {
				emit()
			}
			if i+1 < len(text) && text[i+1] == 'u' {
				i += 5 // \uXXXX
			} else {
				i++ // \n, \", ...
			}
		case wordByte(c):
			if !in {
				h, in = lineageSeed, true
			}
			h = (h ^ uint64(lowerASCII(c))) * prime
		default:
			if in {
				emit()
			}
		}
	}
	if in {
		emit()
	}
}

// mixPhrase is the hash of three words in order (murmur3's finalizer over
// the words' hashes, each weighed by its place).
func mixPhrase(a, b, c uint64) uint64 {
	x := a*0x9e3779b97f4a7c15 ^ bits.RotateLeft64(b, 21)*0xc2b2ae3d27d4eb4f ^ bits.RotateLeft64(c, 42)*0x165667b19e3779f9
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lineageMatch is the handling a call's phrases tie it to, with the
// evidence.
type lineageMatch struct {
	h        *Handling
	phrases  int
	evidence string
}

// matchLineage returns the one handling among cands whose distinctive
// phrases (read within it and within no other of cands) the call's text
// holds, at least minLineageEvidence of them; nil when none does, or when
// another handling's distinctive phrases are in the call too.
func matchLineage(cands []*Handling, call []byte) lineageMatch {
	if len(cands) < 2 || len(cands) > math.MaxInt16 {
		return lineageMatch{}
	}
	sets := make([][]phrase, len(cands))
	for i, h := range cands {
		h.lineage.mu.Lock()
		sets[i] = h.lineage.hashed() // immutable once hashed: a new read makes a new slice
		h.lineage.mu.Unlock()
	}
	var seen []uint64
	eachPhrase(call, func(ph uint64) { seen = append(seen, ph&^readBits) })
	slices.Sort(seen)
	seen = slices.Compact(seen)
	// Walk the call's phrases beside each handling's, both sorted: owner
	// is the handling that read each (-2: two did), from which read.
	owner := make([]int16, len(seen))
	from := make([]uint8, len(seen))
	for i := range owner {
		owner[i] = -1
	}
	for c, set := range sets {
		j := 0
		for k := 0; j < len(seen) && k < len(set); {
			switch key := set[k].key(); {
			case seen[j] < key:
				j++
			case seen[j] > key:
				k++
			default:
				if owner[j] == -1 {
					owner[j], from[j] = int16(c), uint8(set[k].read())
				} else {
					owner[j] = -2 // read within two handlings: not distinctive
				}
				j++
				k++
			}
		}
	}
	hits := make([]int, len(cands))
	for _, o := range owner {
		if o >= 0 {
			hits[o]++
		}
	}
	pick := -1
	for i, n := range hits {
		if n == 0 {
			continue
		}
		if pick >= 0 {
			return lineageMatch{} // two handlings' phrases: ambiguous
		}
		pick = i
	}
	if pick < 0 || hits[pick] < minLineageEvidence {
		return lineageMatch{}
	}
	h := cands[pick]
	var bySrc [maxLineageReads + 1]int
	best := 0
	for j, o := range owner {
		if int(o) != pick {
			continue
		}
		r := int(from[j])
		if bySrc[r]++; bySrc[r] > bySrc[best] || bySrc[r] == bySrc[best] && r < best {
			best = r
		}
	}
	h.lineage.mu.Lock()
	src := "what it read"
	if best < len(h.lineage.reads) {
		src = h.lineage.reads[best].src
	}
	h.lineage.mu.Unlock()
	return lineageMatch{h: h, phrases: hits[pick],
		evidence: strconv.Itoa(hits[pick]) + " phrase(s) only handling " + h.ID + " read, most from " + src}
}

// tieByLineage ties a call that carried no context to the one in-flight
// handling whose distinctive phrases its body's head quotes, when several
// are in flight; it reports whether it did. It reads the head of the body
// and puts it back in front of the rest.
func tieByLineage(hs Handlings, in *Info, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return false
	}
	cands := hs.Working(nil) // nil, and no allocation, unless several are in flight
	if len(cands) < 2 {
		return false
	}
	head := peekBody(r, maxLineagePeek)
	in.callHead = head
	m := matchLineage(cands, head)
	if m.h == nil {
		return false
	}
	in.tie(m.h, record.CorrelatedByLineage)
	in.CorrelationEvidence = m.evidence
	return true
}

// CallHead returns what Baton read of the call's body as the agent wrote
// it: the head lineage read, else the body as buffered before Baton
// rewrote it (its trust marks, its stamp), else nil. An answer lineage
// keeps is kept with it (Handling.Reading).
func (in *Info) CallHead() []byte {
	switch {
	case in.callHead != nil:
		return in.callHead
	case in.wrote != nil:
		return in.wrote
	case in.Buffered:
		return in.Body
	}
	return nil
}

// peekBody reads up to n bytes of r's body and leaves the body whole: what
// was read, then the rest (or the read's error).
func peekBody(r *http.Request, n int) []byte {
	if r.ContentLength >= 0 && r.ContentLength < int64(n) {
		n = int(r.ContentLength)
	}
	head := make([]byte, n)
	k, err := io.ReadFull(r.Body, head)
	head = head[:k]
	rest := r.Body
	switch {
	case err == nil:
		r.Body = readCloser{io.MultiReader(bytes.NewReader(head), rest), rest}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		r.Body = readCloser{bytes.NewReader(head), rest}
	default:
		r.Body = readCloser{io.MultiReader(bytes.NewReader(head), errReader{err}), rest}
	}
	return head
}

type readCloser struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

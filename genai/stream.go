package genai

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"strconv"
	"sync"
	"time"
)

// StreamResult is what Baton knows of a model call from an answer read as
// it passed.
type StreamResult struct {
	Result
	// FirstChunkAt is when the first event arrived
	// (gen_ai.response.time_to_first_chunk is measured to it), FirstTokenAt
	// when the first event carrying output arrived: text, reasoning, a
	// tool call. Both are zero when no such event came.
	FirstChunkAt, FirstTokenAt time.Time
	// Ended is whether the answer came to the end its protocol marks,
	// rather than being cut off: OpenAI's [DONE], a Responses terminal
	// event, Anthropic's message_stop, a Gemini finishReason, or an error
	// event (then ErrorType says so). A non-streamed body ends when it
	// parses whole.
	Ended bool
	// Events counts the events read; Oversized those larger than
	// MaxEventBytes, of which only the head and tail were read.
	Events, Oversized int
}

// Stream reads a model answer as it passes, in chunks split anywhere, with
// bounded memory: an event is kept only until it is read, and at most
// MaxEventBytes of it. It reads Server-Sent Events (text/event-stream), a
// JSON array of objects (Gemini's streamGenerateContent without alt=sse),
// and a single JSON document (a non-streamed answer, or an error), told
// apart by the content type and the first byte. A gzip or deflate body is
// inflated as it comes.
//
// Write and Close are called from one goroutine, Result from any. Close
// must be called, even for an answer cut short: a compressed stream holds a
// goroutine until then.
type Stream struct {
	mu      sync.Mutex
	acc     acc
	framing uint8
	sse     sseReader
	arr     arrReader
	ev      eventBuf
	closed  bool
	status  int
	expect  int // the answer's length, when told (Expect)

	// pw feeds the inflating goroutine of a compressed stream; done closes
	// when it has read everything.
	pw   *io.PipeWriter
	done chan struct{}
}

const (
	frameUnknown = iota
	frameSSE
	frameArray
	frameDoc
	frameNone // an encoding Baton cannot read
)

// NewStream returns a Stream for the answer to call c, with the answer's
// status, Content-Type and Content-Encoding. now is the clock for
// FirstChunkAt and FirstTokenAt, time.Now when nil; for a compressed answer
// it is called from the goroutine that inflates it.
func NewStream(c Call, status int, contentType, contentEncoding string, now func() time.Time) *Stream {
	s := new(Stream)
	s.Init(c, status, contentType, contentEncoding, now)
	return s
}

// Init makes a zero s what NewStream returns, so that a Stream can live
// inside what owns it. A Stream is inited once.
func (s *Stream) Init(c Call, status int, contentType, contentEncoding string, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	s.acc, s.status = acc{call: c, now: now}, status
	if isEventStream(contentType) {
		s.sseFraming()
	}
	switch contentCoding(contentEncoding) {
	case codingIdentity:
	case codingGzip, codingDeflate:
		pr, pw := io.Pipe()
		s.pw, s.done = pw, make(chan struct{})
		go s.inflate(pr, contentCoding(contentEncoding))
	default:
		s.framing = frameNone
	}
}

// Expect tells s the answer's length, when its head gave one
// (Content-Length): an answer that is one document is kept in one buffer
// of that size rather than grown as it comes, or, when it comes in one
// piece, read where it is.
func (s *Stream) Expect(n int64) {
	if n > 0 && n <= MaxEventBytes {
		s.expect = int(n)
	}
}

// Write reads p. It never fails: what Baton cannot read, it skips.
func (s *Stream) Write(p []byte) (int, error) {
	if s.pw != nil {
		_, _ = s.pw.Write(p)
		return len(p), nil
	}
	s.mu.Lock()
	s.feed(p)
	s.mu.Unlock()
	return len(p), nil
}

// Close marks the end of the answer and delivers an event or document it
// completes.
func (s *Stream) Close() error {
	if s.pw != nil {
		_ = s.pw.Close()
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	switch s.framing {
	case frameSSE:
		s.sseClose()
	case frameDoc:
		s.emit(nil, true)
	}
	return nil
}

// Result returns what the answer told so far; after Close, all it told.
// After Close its FinishReasons are the Stream's own: read them, do not
// change them.
func (s *Stream) Result() StreamResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.acc
	r := StreamResult{
		Result:       a.r,
		FirstChunkAt: a.firstChunk,
		FirstTokenAt: a.firstToken,
		Ended:        a.ended,
		Events:       a.events,
		Oversized:    a.oversized,
	}
	if !s.closed {
		// The stream may still add to them: the caller gets its own.
		r.FinishReasons = append([]string(nil), a.r.FinishReasons...)
	}
	if !a.ended && (a.call.Endpoint == Messages || a.call.Endpoint == GenerateContent) {
		// Anthropic's and Gemini's counts grow as the answer streams: only
		// the end makes them final.
		r.Usage = Usage{}
	}
	if s.status >= 400 && r.ErrorType == "" {
		r.ErrorType = strconv.Itoa(s.status)
	}
	return r
}

// feed parses p, choosing the framing at the first byte when the content
// type did not.
func (s *Stream) feed(p []byte) {
	if s.closed {
		return
	}
	if s.framing == frameUnknown {
		i := skipSpace(p, 0)
		if i == len(p) {
			return
		}
		switch p[i] {
		case '[':
			s.framing = frameArray
		case '{':
			s.framing = frameDoc
		default:
			s.sseFraming()
		}
	}
	switch s.framing {
	case frameSSE:
		s.sseFeed(p)
	case frameArray:
		s.arrayFeed(p)
	case frameDoc:
		s.docFeed(p)
	}
}

// sseFraming reads the answer as Server-Sent Events: a stream, whether or
// not the request was read to say so.
func (s *Stream) sseFraming() {
	s.framing = frameSSE
	s.acc.call.Stream = true
}

// inflate decompresses a compressed answer into feed. After a corrupt
// stretch it drains the pipe, so that Write never blocks.
func (s *Stream) inflate(pr *io.PipeReader, coding int) {
	defer close(s.done)
	defer func() { _, _ = io.Copy(io.Discard, pr) }()
	var zr io.Reader
	var err error
	if coding == codingGzip {
		zr, err = gzip.NewReader(pr)
	} else {
		zr, err = zlib.NewReader(pr)
	}
	if err != nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := zr.Read(buf)
		if n > 0 {
			s.mu.Lock()
			s.feed(buf[:n])
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// emit delivers the event (or document, or array element) in s.ev.
func (s *Stream) emit(name []byte, doc bool) {
	a := &s.acc
	if len(s.ev.buf) == 0 && !s.ev.over {
		return
	}
	a.counted()
	switch {
	case s.ev.over:
		a.oversized++
		tail := s.ev.tail()
		a.salvage(name, s.ev.buf, tail, doc)
		if s.framing == frameDoc {
			t := bytes.TrimRight(tail, " \t\r\n")
			a.ended = len(t) > 0 && (t[len(t)-1] == '}' || t[len(t)-1] == ']')
		}
	case doc:
		end := a.document(s.ev.buf)
		if s.framing == frameDoc {
			// Read to its closing bracket, the document is whole when
			// nothing but space follows; read otherwise, it is checked
			// whole.
			if end >= 0 {
				a.ended = skipSpace(s.ev.buf, end) == len(s.ev.buf)
			} else {
				a.ended = wholeJSON(s.ev.buf)
			}
		}
	default:
		a.event(name, s.ev.buf)
	}
	s.ev.reset()
}

// deliver reads an SSE event whose data is whole in data, not in s.ev.
func (s *Stream) deliver(name, data []byte) {
	s.acc.counted()
	s.acc.event(name, data)
}

// counted counts an event and notes when the first came.
func (a *acc) counted() {
	a.events++
	if a.firstChunk.IsZero() {
		a.firstChunk = a.now()
	}
}

// document reads a whole answer body, or one element of an array stream,
// and returns where it ends: just past its closing bracket, -1 when it was
// not read to one.
func (a *acc) document(b []byte) int {
	switch a.call.Endpoint {
	case ChatCompletions, Completions, Embeddings:
		return a.openAIObject(b)
	case Responses:
		return a.responseObject(b, true)
	case Messages:
		return a.anthropicMessage(b, true)
	case GenerateContent:
		arr, ok := arrayOf(b)
		if !ok {
			return a.geminiObject(b)
		}
		for {
			v, ok := arr.next()
			if !ok {
				return arr.end()
			}
			a.geminiObject(v)
		}
	}
	return -1
}

// event reads one SSE event.
func (a *acc) event(name, data []byte) {
	switch a.call.Endpoint {
	case ChatCompletions, Completions, Embeddings:
		a.openAIChunk(data)
	case Responses:
		a.responsesEvent(name, data)
	case Messages:
		a.anthropicEvent(name, data)
	case GenerateContent:
		a.geminiObject(data)
	}
}

package genai

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"strconv"
	"strings"
)

// maxInflated caps how much of a compressed body ParseResponse inflates.
const maxInflated = 16 << 20

// ParseResponse reads the answer to call c: its status, Content-Type,
// Content-Encoding and whole body. A text/event-stream body is read as the
// stream it was; a JSON body as the endpoint's answer or error. The body
// may be anything, gzip- or deflate-compressed (at most 16 MiB inflated; a
// corrupt tail keeps what came before it); what is not understood is left
// out of the Result, and usage Baton cannot trust is not Known. A status
// of 400 or more with no error the body explains has the status as its
// ErrorType.
func ParseResponse(c Call, status int, contentType, contentEncoding string, body []byte) Result {
	var r Result
	switch contentCoding(contentEncoding) {
	case codingIdentity:
		r = parseBody(c, contentType, body)
	case codingGzip, codingDeflate:
		r = parseBody(c, contentType, inflate(body, contentCoding(contentEncoding)))
	}
	if status >= 400 && r.ErrorType == "" {
		r.ErrorType = strconv.Itoa(status)
	}
	return r
}

func parseBody(c Call, contentType string, body []byte) Result {
	i := skipSpace(body, 0)
	if isEventStream(contentType) || i < len(body) && body[i] != '{' && body[i] != '[' {
		s := NewStream(c, 0, "text/event-stream", "", nil)
		s.feed(body)
		_ = s.Close()
		return s.Result().Result
	}
	a := acc{call: c}
	if i < len(body) && body[i] == '[' && c.Endpoint != GenerateContent {
		return a.r // only Gemini answers with an array
	}
	a.document(body)
	return a.r
}

// inflate decompresses body, keeping what inflates before an error.
func inflate(body []byte, coding int) []byte {
	var zr io.Reader
	var err error
	if coding == codingGzip {
		zr, err = gzip.NewReader(bytes.NewReader(body))
	} else {
		zr, err = zlib.NewReader(bytes.NewReader(body))
	}
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(io.LimitReader(zr, maxInflated))
	return out
}

// Content codings.
const (
	codingIdentity = iota
	codingGzip
	codingDeflate
	codingOther
)

// contentCoding reads a Content-Encoding header: one coding, in any case.
func contentCoding(v string) int {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "identity":
		return codingIdentity
	case "gzip", "x-gzip":
		return codingGzip
	case "deflate":
		return codingDeflate
	}
	return codingOther
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	switch contentType {
	case "text/event-stream":
		return true
	case "application/json":
		return false
	}
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// wholeJSON reports whether b is one complete JSON value, with nothing but
// whitespace around it.
func wholeJSON(b []byte) bool {
	i := skipSpace(b, 0)
	e := valueEnd(b, i)
	return e > 0 && skipSpace(b, e) == len(b)
}

package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/batonproxy/baton/middleware"
)

// maxPeek bounds what is read ahead of an A2A answer to judge it: a larger
// answer is taken as it comes.
const maxPeek = 1 << 20

// a2aFailedAnswer reports an answer to an A2A send (method names the
// request's JSON-RPC method) that says, inside a 2xx, that the agent failed
// (middleware.A2AFailed). Only a whole JSON answer is read, ahead of the
// agent and put back for it; a stream is passed on as it comes and judged
// by its status alone.
func a2aFailedAnswer(method string, resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	if !middleware.A2ASendMethod(method) || resp.StatusCode < 200 || resp.StatusCode >= 300 ||
		!strings.Contains(ct, "json") || resp.ContentLength > maxPeek {
		return false
	}
	body, ok := peekBody(resp, maxPeek)
	return ok && middleware.A2AFailed(body, ct)
}

// peekBody reads up to limit bytes of resp's body and puts them back in
// front of the rest. It reports whether that was the whole body.
func peekBody(resp *http.Response, limit int64) ([]byte, bool) {
	buf, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
	return buf, err == nil && int64(len(buf)) <= limit
}

// peekedBody is a body whose first bytes were read ahead.
type peekedBody struct {
	io.Reader
	io.Closer
}

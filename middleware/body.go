package middleware

import (
	"bytes"
	"io"
	"net/http"
)

// BufferBody reads the request's whole body into in.Body, for the layers
// that read it (the journal's digest, a model call's model), and leaves
// the request a copy to send that GetBody opens again. A body already
// buffered is kept; one that streams (no declared length) or declares more
// than max bytes is left to stream: whole is false and in.Body stays unset.
func BufferBody(r *http.Request, in *Info, max int64) (whole bool, err error) {
	if in.Buffered {
		return true, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		in.Body, in.Buffered = nil, true
		return true, nil
	}
	if r.ContentLength < 0 || r.ContentLength > max {
		return false, nil
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return false, err
	}
	_ = r.Body.Close()
	in.Body, in.Buffered = body, true
	replay(r, body)
	return true, nil
}

// replay makes body the request's Body, and GetBody open it again: one
// object for both.
func replay(r *http.Request, body []byte) {
	if len(body) == 0 {
		r.Body, r.GetBody = http.NoBody, noBody
		return
	}
	rb := &replayBody{body: body}
	rb.Reset(body)
	r.Body, r.GetBody = rb, rb.reopen
}

// replayBody is a buffered request body: the request's Body, which its
// GetBody opens again from the start.
type replayBody struct {
	bytes.Reader
	body []byte
}

func (b *replayBody) Close() error { return nil }

// reopen is the request's GetBody: the body again, from the start.
func (b *replayBody) reopen() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.body)), nil
}

// noBody is the GetBody of a request whose body is empty.
func noBody() (io.ReadCloser, error) { return http.NoBody, nil }

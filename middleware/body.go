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
	in.replay.of(r, body)
	return true, nil
}

// replayBody is a buffered request body as the request carries it: its
// Body, an in-memory reader that net/http writes with the request's head in
// one write, and its GetBody, which opens the body again from the start.
// It lives in the request's Info, so that buffering a body costs the body,
// the Body's interface and GetBody's function value, and the first send of
// the request (FirstSend) no copy of either.
type replayBody struct {
	rd bytes.Reader
	// rc is the request's Body (io.NopCloser(&rd)) until its first send
	// takes it; nil after.
	rc io.ReadCloser
}

// of makes body the request's Body, and GetBody open it again.
func (b *replayBody) of(r *http.Request, body []byte) {
	if len(body) == 0 {
		r.Body, r.GetBody = http.NoBody, noBody
		return
	}
	b.rd.Reset(body)
	b.rc = io.NopCloser(&b.rd)
	r.Body = b.rc
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}

// FirstSend reports whether r carries, unread, the in-memory body that
// buffering the request gave it, and takes it: the caller may send r as it
// is, once. Every later send (a retry, a replay) needs a body of its own:
// the one sent first may still be read by the connection it went out on.
func (in *Info) FirstSend(r *http.Request) bool {
	if in.replay.rc == nil || r.Body != in.replay.rc {
		return false
	}
	in.replay.rc = nil
	return true
}

// ProxyBody gives out, a reverse proxy's copy of the request inbound, the
// request's buffered body itself in place of the proxy's wrapper around
// it (which net/http does not know to be in memory), so that the first
// send of out (FirstSend) needs no copy of it. A body something replaced
// after buffering is left as the proxy wrapped it.
func (in *Info) ProxyBody(out, inbound *http.Request) {
	if in.replay.rc != nil && out.Body != nil && inbound.Body == in.replay.rc {
		out.Body = in.replay.rc
	}
}

// noBody is the GetBody of a request whose body is empty.
func noBody() (io.ReadCloser, error) { return http.NoBody, nil }

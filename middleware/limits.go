package middleware

// Limit refuses request bodies larger than the configured limit: at once
// with 413 when Content-Length says so, and otherwise by capping the body
// reader so that a chunked body that grows past the limit fails the read (the
// proxy's error handler turns that into 413 when nothing has been sent yet).
// Either way it then reads and discards the rest of the body for a while
// (lingering close) so that the client reads the 413. It sits before
// anything that reads the body. It cannot fail open.

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/batonproxy/baton/problem"
)

// Lingering close, as nginx does it: after refusing a body as too large,
// Baton reads and discards the rest of it, up to lingerBytes and for at
// most lingerTime, before the connection closes. A client that writes its
// whole body before reading (most do) then reads the 413; closed at once,
// its write would meet a reset, which can discard the answer unread.
const (
	lingerBytes = 64 << 20
	lingerTime  = 5 * time.Second
)

// Limit returns the body-size middleware.
func Limit(maxBody int64) func(http.Handler) http.Handler {
	detail := "request body exceeds the limit of " + strconv.FormatInt(maxBody, 10) + " bytes"
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := r.Body
			if r.ContentLength > maxBody {
				problem.New(r, problem.BodyTooLarge, detail).With("limit_bytes", maxBody).Write(w)
				linger(w, body)
				return
			}
			// A body of declared length within the limit needs no cap: the
			// server reads no further than the length (HTTP/1.1), or
			// refuses a stream that sends more (HTTP/2).
			if body == nil || body == http.NoBody || r.ContentLength >= 0 {
				next.ServeHTTP(w, r)
				return
			}
			capped := &cappedBody{ReadCloser: http.MaxBytesReader(w, body, maxBody)}
			r.Body = capped
			next.ServeHTTP(w, r)
			if capped.over {
				linger(w, body)
			}
		})
	}
}

// cappedBody notes that the body outgrew the limit.
type cappedBody struct {
	io.ReadCloser
	over bool
}

// Close leaves a body that outgrew the limit open, for linger to discard
// the rest (the server closes it after the handler).
func (c *cappedBody) Close() error {
	if c.over {
		return nil
	}
	return c.ReadCloser.Close()
}

func (c *cappedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		// Declared here, as errors.As moves it to the heap: not on every
		// read.
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			c.over = true
		}
	}
	return n, err
}

// linger discards what is left of a refused body, within its bounds.
func linger(w http.ResponseWriter, body io.ReadCloser) {
	if body == nil || body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush() // the answer first: the client may read it while it writes
	if rc.SetReadDeadline(time.Now().Add(lingerTime)) != nil {
		return // no way to bound the wait: close at once
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(body, lingerBytes))
}

// BodyTooLarge writes the 413 problem for a body that outgrew limit while
// being read.
func BodyTooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	problem.New(r, problem.BodyTooLarge, "request body exceeds the limit of "+
		strconv.FormatInt(limit, 10)+" bytes").With("limit_bytes", limit).Write(w)
}

package middleware

// Limit refuses request bodies larger than the configured limit: at once
// with 413 when Content-Length says so, and otherwise by capping the body
// reader so that a chunked body that grows past the limit fails the read (the
// proxy's error handler turns that into 413 when nothing has been sent yet).
// It sits before anything that reads the body. It cannot fail open.

import (
	"net/http"
	"strconv"

	"github.com/batonproxy/baton/problem"
)

// Limit returns the body-size middleware.
func Limit(maxBody int64) func(http.Handler) http.Handler {
	detail := "request body exceeds the limit of " + strconv.FormatInt(maxBody, 10) + " bytes"
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > maxBody {
				problem.New(r, problem.BodyTooLarge, detail).With("limit_bytes", maxBody).Write(w)
				return
			}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// BodyTooLarge writes the 413 problem for a body that outgrew limit while
// being read.
func BodyTooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	problem.New(r, problem.BodyTooLarge, "request body exceeds the limit of "+
		strconv.FormatInt(limit, 10)+" bytes").With("limit_bytes", limit).Write(w)
}

package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust"
)

// classify maps a transport error to the problem class Baton answers with.
// It is the one place where errors become statuses.
func classify(err error) problem.Class {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return problem.BodyTooLarge
	case errors.Is(err, trust.ErrDeniedAddress):
		return problem.DeniedAddress
	case errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return problem.UpstreamTimeout
	}
	return problem.UpstreamUnavailable
}

// errorHandler is the reverse proxy's ErrorHandler for both sides.
func errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	in := middleware.InfoFromContext(r.Context())
	if in != nil {
		in.Err = err
	}
	// The client went away: nobody is left to answer.
	if errors.Is(r.Context().Err(), context.Canceled) {
		return
	}
	c := classify(err)
	var detail, dest string
	switch {
	case in == nil:
	case in.Side == middleware.Ingress:
		dest = "the local agent"
	case in.Handoff():
		dest = "peer " + in.To + "'s Baton"
	default:
		dest = "external host " + in.External
	}
	switch c {
	case problem.BodyTooLarge:
		var tooBig *http.MaxBytesError
		errors.As(err, &tooBig)
		middleware.BodyTooLarge(w, r, tooBig.Limit)
		return
	case problem.DeniedAddress:
		detail = err.Error()
	case problem.UpstreamTimeout:
		detail = dest + " did not answer in time"
	default:
		detail = dest + " could not be reached: " + reason(err)
	}
	problem.Write(w, r, c, detail)
}

// reason names the cause of a connection failure without leaking internals.
func reason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		if op.Op == "dial" {
			return "connection refused or unreachable"
		}
		return "connection failed (" + op.Op + ")"
	}
	if errors.Is(err, net.ErrClosed) {
		return "connection closed"
	}
	return "connection lost before a response"
}

package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strconv"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust"
	"github.com/batonproxy/baton/trust/mtls"
)

// classify maps a transport error to the problem class Baton answers with
// (in: the request's, or nil). It is the one place where errors become
// statuses.
func classify(err error, in *middleware.Info) problem.Class {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return problem.BodyTooLarge
	case errors.Is(err, trust.ErrDeniedAddress):
		return problem.DeniedAddress
	case in != nil && in.External != "" && certificateRefused(err):
		return problem.UpstreamCertificate
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
	if in != nil && in.Side == middleware.Egress {
		echoKey(w.Header(), r.Header) // the agent learns the key its handoff carried
	}
	var dl *DeadLetterError
	if errors.As(err, &dl) {
		deadLettered(w, r, in, dl)
		return
	}
	c := classify(err, in)
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
		if in != nil {
			in.PolicyDenial = middleware.DenialDeniedAddress
		}
		detail = err.Error()
	case problem.UpstreamTimeout:
		detail = dest + " did not answer in time"
	case problem.UpstreamCertificate:
		problem.New(r, c, dest+" presented a certificate Baton does not trust: "+reason(err)).
			With("destination", in.External).Write(w) // classify saw in.External
		return
	default:
		detail = dest + " could not be reached: " + reason(err)
	}
	if in != nil && in.Side == middleware.Ingress && notSent(err) {
		// The agent was never reached: the sender may try again.
		middleware.MarkRefused(w, c)
	}
	problem.Write(w, r, c, detail)
}

// deadLettered answers a handoff that was dead-lettered: 503 when the
// peer's breaker was open, 504 after timeouts, 502 otherwise, each with the
// record id to inspect or replay it by.
func deadLettered(w http.ResponseWriter, r *http.Request, in *middleware.Info, dl *DeadLetterError) {
	peer := "the peer"
	if in != nil {
		peer = "peer " + in.To
	}
	var d *problem.Details
	switch {
	case dl.Breaker:
		d = problem.New(r, problem.CircuitOpen, "the circuit breaker for "+peer+" is open; the handoff was dead-lettered")
	case dl.Timeout:
		d = problem.New(r, problem.UpstreamTimeout, peer+" did not answer in time; the handoff was dead-lettered")
	case dl.Status != 0:
		d = problem.New(r, problem.UpstreamUnavailable, peer+" kept answering "+strconv.Itoa(dl.Status)+
			"; the handoff was dead-lettered").With("upstream_status", dl.Status)
	default:
		d = problem.New(r, problem.UpstreamUnavailable, peer+" could not be reached: "+reason(dl.Err)+
			"; the handoff was dead-lettered")
	}
	d.With("record_id", dl.RecordID).Write(w)
}

// certificateRefused reports whether err is a server certificate this
// Baton's verification refused.
func certificateRefused(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var hn x509.HostnameError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &ci) || errors.As(err, &hn)
}

// reason names the cause of a connection failure without leaking internals.
// A refused TLS handshake is named with why: it is a configuration to fix.
func reason(err error) string {
	var ve *mtls.VerifyError
	if errors.As(err, &ve) {
		return "the TLS handshake failed: " + ve.Err.Error()
	}
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return "the TLS handshake failed: " + cv.Err.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) {
		if op.Op == "dial" {
			return "connection refused or unreachable"
		}
		if op.Op == "remote error" { // a TLS alert: the peer refused this Baton's certificate
			return "the TLS handshake failed: the peer answered " + op.Err.Error()
		}
		return "connection failed (" + op.Op + ")"
	}
	if errors.Is(err, net.ErrClosed) {
		return "connection closed"
	}
	return "connection lost before a response"
}

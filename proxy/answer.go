package proxy

import (
	"net/http"

	"github.com/batonproxy/baton/middleware"
)

// egressAnswer is the egress proxy's ModifyResponse: the agent learns the
// key its handoff carried, derived or its own (Idempotency-Key on the
// answer), so that it can re-send the same handoff with it to resume a
// chain that failed.
func egressAnswer(resp *http.Response) error {
	if resp.Request != nil {
		echoKey(resp.Header, resp.Request.Header)
	}
	return nil
}

// echoKey copies the Idempotency-Key of a handoff's request onto its
// answer (a problem Baton writes too: see errorHandler).
func echoKey(answer, request http.Header) {
	if v := request[middleware.HeaderIdempotencyKey]; len(v) == 1 {
		answer[middleware.HeaderIdempotencyKey] = v
	}
}

// ingressAnswer is the ingress proxy's ModifyResponse. Only a Baton says
// where a chain stopped: the agent's own Baton-Dead-Letter is removed, and
// when the agent answers 5xx after one of its handoffs was dead-lettered
// (or answered with a chain stopped below it), the answer names that dead
// letter, so that the Batons above do not retry it (retry pushback). A
// caller without a Baton (the chain's entry) learns the key the handling
// ran under, so that it can resume the chain by re-sending with it.
func ingressAnswer(resp *http.Response) error {
	resp.Header.Del(HeaderDeadLetter)
	if resp.Request == nil {
		return nil
	}
	in := middleware.InfoFromContext(resp.Request.Context())
	if in == nil || in.Handling == nil {
		return nil
	}
	if resp.StatusCode >= 500 {
		if dl := in.Handling.StoppedAt(); dl != "" {
			resp.Header.Set(HeaderDeadLetter, dl)
			in.StoppedAt = dl
		}
	}
	if in.SenderRunsNoBaton() && in.Key != "" {
		resp.Header.Set(middleware.HeaderIdempotencyKey, middleware.QuoteKey(in.Key))
	}
	return nil
}

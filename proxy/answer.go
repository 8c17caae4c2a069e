package proxy

import (
	"io"
	"net/http"

	"github.com/batonproxy/baton/middleware"
)

// egressAnswer is the egress proxy's ModifyResponse: the agent learns the
// key its handoff carried, derived or its own (Idempotency-Key on the
// answer), so that it can re-send the same handoff with it to resume a
// chain that failed.
func egressAnswer(hs *handlings) func(*http.Response) error {
	return func(resp *http.Response) error {
		if resp.Request == nil {
			return nil
		}
		echoKey(resp.Header, resp.Request.Header)
		if in := middleware.InfoFromContext(resp.Request.Context()); in != nil && in.Handling != nil &&
			resp.Body != nil && resp.Body != http.NoBody && hs.overlapping() {
			// The agent serves several requests at once: its next calls
			// for this one may quote this answer (lineage). What the call
			// said, the answer may repeat: it is kept beside it.
			resp.Body = &lineageTee{ReadCloser: resp.Body, r: in.Handling.Reading(answerOf(in), in.CallHead())}
		}
		return nil
	}
}

// answerOf names the answer of a call, as lineage's evidence says it.
func answerOf(in *middleware.Info) string {
	switch {
	case in.Handoff():
		return "the answer of " + in.To
	case in.Route != "":
		return "the answer of " + in.Route
	}
	return "the answer of " + in.External
}

// lineageTee passes an answer to the agent and gives its handling the
// head of it (what the agent read) as it passes: the agent may act on an
// answer before Baton reads its end.
type lineageTee struct {
	io.ReadCloser
	r    middleware.Reading
	head []byte
}

func (t *lineageTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if room := middleware.MaxLineageRead - len(t.head); n > 0 && room > 0 {
		t.head = append(t.head, p[:min(n, room)]...)
		t.r.Read(t.head)
	}
	return n, err
}

// echoKey copies the Idempotency-Key of a handoff's request onto its
// answer (a problem Baton writes too: see errorHandler).
func echoKey(answer, request http.Header) {
	if v := request[middleware.HeaderIdempotencyKey]; len(v) == 1 {
		answer[middleware.HeaderIdempotencyKey] = v
	}
}

// ingressAnswer is the ingress proxy's ModifyResponse. Only a Baton says
// where a chain stopped, or that its agent never saw a request: the agent's
// own Baton-Dead-Letter and Baton-Refused are removed, and when the agent
// answers 5xx (or, to an A2A message, a failed task) after one of its
// handoffs was dead-lettered (or answered with a chain stopped below it),
// the answer names that dead letter, so that the Batons above do not
// dead-letter it again (retry pushback). An A2A failed task is noted for
// the receipt (Info.AgentFailed), which then says the agent failed. A
// caller without a Baton (the chain's entry) learns the key the handling
// ran under, so that it can resume the chain by re-sending with it.
func ingressAnswer(resp *http.Response) error {
	resp.Header.Del(middleware.HeaderDeadLetter)
	resp.Header.Del(middleware.HeaderRefused)
	if resp.Request == nil {
		return nil
	}
	in := middleware.InfoFromContext(resp.Request.Context())
	if in == nil {
		return nil
	}
	// The receipt says whether the agent failed inside a 2xx.
	in.AgentFailed = in.RPC != nil && in.RPC.MCP == nil && a2aFailedAnswer(in.RPC.Method, resp)
	if in.Handling == nil {
		return nil
	}
	if dl := in.Handling.StoppedAt(); dl != "" && (resp.StatusCode >= 500 || in.AgentFailed) {
		resp.Header.Set(middleware.HeaderDeadLetter, dl)
		in.StoppedAt = dl
	}
	if in.SenderRunsNoBaton() && in.Key != "" {
		resp.Header.Set(middleware.HeaderIdempotencyKey, middleware.QuoteKey(in.Key))
	}
	return nil
}

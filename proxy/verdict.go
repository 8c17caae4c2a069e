package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// verdict is what the result of one try means for a handoff. judge is the
// one place that decides it; send acts on retried, conclude on the rest.
//
// A Baton never runs an agent twice by retrying: it retries only what
// surely did not reach the receiving agent (a connection never opened, the
// receiving Baton's own refusal before its agent saw anything: Baton-Refused)
// and, where the edge opts in (retry.agent_retry_after), an answer the agent
// itself marks as safe to try again. An agent's own failure (any other 5xx,
// a timeout once the request was sent, an A2A failed task) is final at
// every hop: a dead letter where it happened.
type verdict uint8

const (
	// answered: the peer's answer is final (1xx to 4xx, but 429 and a 409
	// with Retry-After); it goes to the agent untouched.
	answered verdict = iota + 1
	// retried: the try did not reach the receiving agent (or the agent asked
	// for another, where the edge lets it), and the edge's retries, budget
	// and deadline allow one.
	retried
	// dead: the handoff failed (any 5xx, 429, a timeout, a refused
	// connection, an open breaker, an A2A failed task) and will not be tried
	// again: it becomes a dead letter, and the peer's answer, if any, goes
	// to the agent.
	dead
	// pushedBack: the peer's Baton answered a failure naming the dead letter
	// where the chain below it stopped (Baton-Dead-Letter). That failure was
	// dead-lettered where it happened; trying or dead-lettering it again
	// from here would only multiply it, so the answer is final and the
	// handoff is no dead letter.
	pushedBack
	// stillRunning: the receiver is still running a handoff with this key
	// (409 request-in-flight, after the retries). Not a failure of the
	// handoff: the answer goes to the agent and nothing is dead-lettered.
	stillRunning
	// callerGone: the agent's side failed (its body outgrew the limit, or it
	// went away): nothing that is the peer's fault.
	callerGone
)

// attempt is one try's result, or, once send returns, what the tries came
// to.
type attempt struct {
	verdict  verdict
	resp     *http.Response // the peer's answer, when it gave one
	err      error          // the try's failure, when it had one
	timedOut bool
	// agentFailed: the answer is a 2xx in which the agent says it failed
	// (an A2A failed task: a2a_answer.go).
	agentFailed bool
}

// judge decides what a try's result means.
func (e *edge) judge(req *http.Request, rec *record.Record, try int, a attempt, deadline time.Time) verdict {
	switch {
	case a.err != nil && callerFault(req, a.err):
		return callerGone
	case a.resp != nil && stoppedBelow(a.resp, a.agentFailed):
		return pushedBack
	case a.resp != nil && !failureStatus(a.resp) && !a.agentFailed:
		return answered
	case e.mayRetry(rec, try, a, deadline):
		return retried
	case a.resp != nil && inFlight(a.resp) && rec.State != record.Replayed:
		// A replay's 409 is the original still running: the dead letter
		// stays one, to be replayed once that has ended.
		return stillRunning
	}
	return dead
}

// mayRetry decides whether a failed try is tried again.
func (e *edge) mayRetry(rec *record.Record, try int, a attempt, deadline time.Time) bool {
	if !e.retryable(rec.Method, a) || try >= *e.retry.Attempts || !rec.Replayable {
		return false
	}
	if !deadline.IsZero() && time.Now().After(deadline) {
		return false
	}
	return e.budget.allowRetry()
}

// retryable tells the failures another try cannot turn into a second run
// of the receiving agent: a connection that was never opened (Go's
// transport itself sends again a request on a kept-alive connection the
// peer closed before reading it), the receiving Baton's own refusal before
// its agent saw the handoff (Baton-Refused: its store down, the same key
// still in flight, its agent unreachable), and, where the edge opts in, a
// 429 or 503 with Retry-After from the agent. A safe method (GET, HEAD,
// OPTIONS, TRACE), which by HTTP's contract has no side effect, is tried
// again after a timeout or a lost connection too. Not an open breaker: it
// says not to send.
func (e *edge) retryable(method string, a attempt) bool {
	if a.resp == nil {
		return notSent(a.err) || (safeMethod(method) && !breakerOpen(a.err))
	}
	if a.agentFailed || a.resp.StatusCode < 300 {
		return false
	}
	if a.resp.Header.Get(middleware.HeaderRefused) != "" {
		return true
	}
	switch a.resp.StatusCode {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return *e.retry.AgentRetryAfter && a.resp.Header.Get("Retry-After") != ""
	}
	return false
}

// failureStatus tells the answers that are not final: any 5xx, 429, and a
// 409 with Retry-After (the receiver's dedupe window saying the same
// handoff is still in flight: once it completes, a later try gets its
// answer).
func failureStatus(resp *http.Response) bool {
	return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || inFlight(resp)
}

func inFlight(resp *http.Response) bool {
	return resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") != ""
}

// stoppedBelow reports a failure answer from the peer's Baton that names
// the dead letter where the chain below the peer stopped: a 5xx, or a 2xx
// in which the agent failed (agentFailed).
func stoppedBelow(resp *http.Response, agentFailed bool) bool {
	return (resp.StatusCode >= 500 || agentFailed) && resp.Header.Get(middleware.HeaderDeadLetter) != ""
}

// breakerFailure tells the answers that count against a peer: those of an
// unreachable, overloaded or timed-out peer, but not a chain that stopped
// below it (the peer answered).
func breakerFailure(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return !stoppedBelow(resp, false)
	}
	return false
}

// callerFault reports a failure on the agent's side of the proxy.
func callerFault(req *http.Request, err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig) || errors.Is(req.Context().Err(), context.Canceled)
}

// notSent reports a failure to open the connection: the request was never
// written.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func breakerOpen(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// safeMethod reports the methods RFC 9110 calls safe: a client asks for no
// side effect with them.
func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

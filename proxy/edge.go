package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/trust"
)

// edge is the outbound path to one peer. A handoff, top to bottom:
//
//  1. RoundTrip writes its record, with the checkpoint, before anything
//     leaves the pod;
//  2. send makes the tries: each through the peer's circuit breaker
//     (breaker.go, try.go), judged by judge (verdict.go), and retried with
//     exponential backoff and full jitter within the edge's retry budget
//     and timeouts;
//  3. conclude records what the tries came to, tells the handling the
//     handoff was made for (its position, and where a chain stopped), and
//     returns what the agent gets.
//
// Retries happen before any response byte reaches the agent: the response
// returned is the one the agent gets.
type edge struct {
	from, to   string
	next       http.RoundTripper
	breaker    *breaker
	retry      config.Retry
	budget     *budget
	book       *record.Book
	checkpoint int64 // body bytes kept with a checkpoint
	log        *slog.Logger
	signer     *trust.Signer // nil: handoffs go unsigned
	obs        *edgeObs      // metrics and span detail (edge_metrics.go); nil: none
	// What the capabilities plugged in (plugins.go); nil: none.
	answered func(rec *record.Record, resp *http.Response)
	letters  DeadLetters
	unstored *unstored // dead letters the store refused, stored later

	deadLetters atomic.Int64 // dead letters written (or logged when the store refused)
}

// DeadLetterError is returned to the reverse proxy when a handoff was
// dead-lettered without an answer from the peer; the error handler answers
// the agent with its record id.
type DeadLetterError struct {
	RecordID string
	Breaker  bool // the peer's breaker was open
	Timeout  bool
	Status   int // the peer's last status, when it answered
	Err      error
}

func (e *DeadLetterError) Error() string {
	switch {
	case e.Breaker:
		return "dead-lettered as " + e.RecordID + ": circuit breaker open"
	case e.Status != 0:
		return "dead-lettered as " + e.RecordID + ": peer answered " + strconv.Itoa(e.Status)
	}
	return "dead-lettered as " + e.RecordID + ": " + e.Err.Error()
}

func (e *DeadLetterError) Unwrap() error { return e.Err }

func newEdge(c *config.Config, to string, next http.RoundTripper, book *record.Book, log *slog.Logger, onClose func()) *edge {
	bc := c.BreakerFor(to)
	e := &edge{from: c.Agent, to: to, next: next, retry: c.RetryFor(to), book: book,
		checkpoint: c.Records.MaxBodyBytes, log: log}
	e.budget = newBudget(*e.retry.Budget, e.retry.BudgetWindow.D())
	e.breaker = newBreaker(to, bc, func(from, to gobreaker.State, open time.Duration) {
		attrs := []any{"peer", e.to, "from", from.String(), "to", to.String()}
		if to == gobreaker.StateOpen {
			after := "a failed probe"
			if from == gobreaker.StateClosed {
				after = strconv.Itoa(bc.Failures) + " consecutive failure(s)"
			}
			attrs = append(attrs, "open_for", open.Round(time.Millisecond).String(), "after", after)
		}
		log.Warn("circuit breaker", attrs...)
		e.obs.transition(int(to))
		if to == gobreaker.StateClosed && onClose != nil {
			onClose()
		}
	})
	if p, ok := c.Peers[to]; ok && p.ParsedURL != nil {
		e.breaker.reach = func(ctx context.Context) error { return ping(ctx, next, p.ParsedURL) }
		e.breaker.reached = func() { log.Info("circuit breaker: peer reachable again; the next handoff probes it", "peer", e.to) }
	}
	return e
}

// ping asks the peer's Baton `OPTIONS *`, which its HTTP server answers
// itself, its agent never seeing it: any answer says the peer is reachable
// again, through whatever lies between.
func ping(ctx context.Context, next http.RoundTripper, peer *url.URL) error {
	u := *peer
	u.Path, u.RawPath, u.Opaque = "", "", "*"
	req, err := http.NewRequestWithContext(ctx, http.MethodOptions, u.String(), nil)
	if err != nil {
		return err
	}
	req.URL = &u
	resp, err := next.RoundTrip(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

type recordKey struct{}

// withRecord marks a request as the replay of rec.
func withRecord(ctx context.Context, rec *record.Record) context.Context {
	return context.WithValue(ctx, recordKey{}, rec)
}

// gatedEdge is an edge behind a confirmation gate (Plugins.Gate): a
// handoff the gate answers (held, refused, or met with an earlier decision)
// is not sent. Replays and approved handoffs go to the edge itself.
type gatedEdge struct {
	gate Gate
	e    *edge
}

func (g gatedEdge) RoundTrip(req *http.Request) (*http.Response, error) {
	in := middleware.InfoFromContext(req.Context())
	resp, err := g.gate.Hold(g.e.to, req, in, func() *record.Record { return g.e.newRecord(req, in) })
	if resp != nil || err != nil {
		return resp, err
	}
	return g.e.RoundTrip(req)
}

// RoundTrip sends one handoff, or the replay of a dead letter.
func (e *edge) RoundTrip(req *http.Request) (*http.Response, error) {
	in := middleware.InfoFromContext(req.Context())
	rec, replay := req.Context().Value(recordKey{}).(*record.Record)
	body := []byte(nil)
	if replay {
		body = rec.Request.Body
	} else {
		rec, body = e.newRecord(req, in), in.Body
		// The checkpoint is written before anything leaves: a crash from here
		// on leaves a record to resume from. A store that refuses it does not
		// stop the handoff (the book logs and counts the loss).
		_ = e.book.Write(req.Context(), rec)
	}
	start, before := time.Now(), rec.Attempts
	a := e.send(req, rec, body)
	resp, err := e.conclude(in, rec, a, start)
	e.obs.handoff(req.Context(), rec, rec.Attempts-before-1)
	return resp, err
}

func (e *edge) newRecord(req *http.Request, in *middleware.Info) *record.Record {
	now := time.Now()
	rec := &record.Record{
		ID: record.NewID(in.TraceID), TraceID: in.TraceID, ParentID: in.ParentRecord, Side: record.Egress,
		From: e.from, To: e.to, Hop: in.Hop, Key: in.Key, Method: req.Method, Target: req.URL.RequestURI(), Call: in.RPC.Describe(),
		KeySource: in.KeySource, Correlation: in.Correlation, CorrelationEvidence: in.CorrelationEvidence, State: record.Sent, Created: now, Updated: now,
	}
	if in.Call != nil {
		rec.Position = in.Call.Position()
	}
	if h := in.Handling; h != nil && h.Parent != "" && h.TraceID == in.TraceID {
		rec.FollowsPeer(h.From) // the trace's chain has the peer's entries
	}
	if sc := trace.SpanContextFromContext(req.Context()); sc.IsValid() {
		rec.SpanID = sc.SpanID().String()
	}
	in.RecordID = rec.ID
	if !e.book.Enabled() {
		// Nothing will be stored: only what retries need.
		rec.Replayable = in.Buffered && int64(len(in.Body)) <= e.checkpoint
		rec.Request = &record.Request{Body: in.Body}
		return rec
	}
	rec.Envelope = middleware.EnvelopeSummary(in)
	rec.Shaping = in.Shaping
	if c := in.Compensation; c != nil {
		rec.Compensates, c.RecordID = c.Of, rec.ID
	}
	rec.Grant = in.GrantOut
	if in.Uncorrelated {
		rec.Trust = append(rec.Trust, "uncorrelated")
	}
	rec.Trust = middleware.AppendTrustLabels(rec.Trust, in)
	req.Header.Set(middleware.HeaderRecord, rec.ID)
	// The book encodes the checkpoint when it is given the record, before
	// anything is sent: the header map need not be copied for it.
	cp := &record.Request{Method: req.Method, URL: req.URL.String(), Header: req.Header, BodyBytes: req.ContentLength}
	if in.Buffered && int64(len(in.Body)) <= e.checkpoint {
		cp.Body, cp.BodyBytes = in.Body, int64(len(in.Body))
		rec.RequestDigest = middleware.ContentDigest(in.Body)
		rec.Replayable = true
	} else {
		cp.Truncated = true
	}
	rec.Request = cp
	return rec
}

// send makes the tries of one handoff until one is not to be retried, and
// returns it judged. body is the whole request body when it was buffered
// (nil when it streams).
func (e *edge) send(req *http.Request, rec *record.Record, body []byte) attempt {
	ctx := req.Context()
	var deadline time.Time
	if t := e.retry.Timeout.D(); t > 0 {
		deadline = time.Now().Add(t)
	}
	if d, ok := middleware.DeadlineFromContext(ctx); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d // set by what sent it, such as a broadcast (middleware.WithDeadline)
	}
	e.budget.request()
	for try := 0; ; try++ {
		if try > 0 {
			req = retryRequest(req, body)
		}
		rec.Attempts++
		if e.signer != nil {
			// Each try carries its own signature: a fresh nonce, as the
			// receiver refuses a nonce it has seen.
			if err := e.signer.Sign(trust.RequestMessage(req, body), time.Now()); err != nil {
				return attempt{verdict: dead, err: fmt.Errorf("signing: %w", err)}
			}
		}
		resp, timedOut, err := e.try(req, body, deadline)
		a := attempt{resp: resp, err: err, timedOut: timedOut}
		if resp != nil {
			a.agentFailed = a2aFailedAnswer(rec.Call, resp)
		}
		if a.verdict = e.judge(req, rec, try, a, deadline); a.verdict != retried {
			return a
		}
		wait := e.backoff(try, resp)
		if resp != nil {
			drain(resp)
		}
		rec.State, rec.Error, rec.Updated = record.Failed, describe(resp, err), time.Now()
		e.book.WriteLater(rec)
		if !sleep(ctx, wait, deadline) {
			// The deadline would pass, or the caller left, while waiting.
			err = context.Cause(ctx)
			if err == nil {
				err = context.DeadlineExceeded
			}
			return attempt{verdict: dead, err: err, timedOut: true}
		}
	}
}

// conclude records what the tries of a handoff came to, tells the handling
// it was made for, and returns what the agent gets. in is nil for the replay
// of a dead letter.
func (e *edge) conclude(in *middleware.Info, rec *record.Record, a attempt, start time.Time) (*http.Response, error) {
	replay := rec.State == record.Replayed
	outcome, stopped := middleware.CallFailed, ""
	switch a.verdict {
	case answered:
		rec.State, rec.Status, rec.Error = record.Delivered, a.resp.StatusCode, ""
		rec.Outcome = answeredOutcome(a.resp, replay)
		outcome = middleware.CallAnswered
	case stillRunning:
		rec.State, rec.Status, rec.Error = record.Delivered, a.resp.StatusCode, ""
		rec.Outcome = "answered 409: the receiver is still running a handoff with this key (not a dead letter)"
	case pushedBack:
		rec.State, rec.Status, rec.Error = record.Delivered, a.resp.StatusCode, ""
		rec.StoppedAt = a.resp.Header.Get(middleware.HeaderDeadLetter)
		stopped = rec.StoppedAt
		rec.Outcome = "answered " + strconv.Itoa(a.resp.StatusCode) + ": the chain stopped below, at a dead letter (not retried here)"
	case callerGone:
		rec.State, rec.Error, rec.Outcome = record.Failed, a.err.Error(), "not delivered: the caller's request failed"
	case dead:
		stopped = rec.ID
	}
	rec.Updated = time.Now()
	rec.Latency = float64(rec.Updated.Sub(start).Microseconds()) / 1000
	if a.resp != nil && e.answered != nil {
		e.answered(rec, a.resp)
	}
	if in != nil {
		in.Call.Settle(outcome)
		if in.Handling != nil {
			// Before the answer reaches the agent: its own answer upstream
			// must find the chain stopped.
			in.Handling.Stop(stopped)
		}
	}
	if a.verdict != dead {
		e.book.WriteLater(rec)
		if outcome == middleware.CallAnswered && e.letters != nil {
			e.letters.Delivered(rec)
		}
		if a.verdict == callerGone {
			return nil, a.err
		}
		return a.resp, nil
	}
	dl := e.deadLetter(rec, a)
	if a.resp != nil {
		// The peer answered: its answer passes through untouched, marked
		// with the dead letter it became.
		a.resp.Header.Set(middleware.HeaderDeadLetter, rec.ID)
		return a.resp, nil
	}
	return nil, dl
}

// answeredOutcome says how a final answer came.
// It is written into one buffer the size of the longest: the string is
// then its only allocation.
func answeredOutcome(resp *http.Response, replay bool) string {
	b := make([]byte, 0, 128)
	b = append(b, "delivered with status "...)
	b = strconv.AppendInt(b, int64(resp.StatusCode), 10)
	if replay {
		b = append(b, " on replay"...)
	}
	if resp.Header.Get(middleware.HeaderReplayed) == "true" {
		b = append(b, " from the receiver's dedupe window"...)
		if resp.Header.Get(middleware.HeaderKeyMismatch) != "" {
			b = append(b, " (the position's first request had another body)"...)
		}
	}
	return string(b)
}

// deadLetter moves the record to dead, stores and indexes it, and returns
// the error the agent's answer is made from when the peer gave none.
func (e *edge) deadLetter(rec *record.Record, a attempt) error {
	open := breakerOpen(a.err)
	dl := &DeadLetterError{RecordID: rec.ID, Breaker: open, Timeout: a.timedOut || isTimeout(a.err), Err: a.err}
	if a.resp != nil {
		dl.Status = a.resp.StatusCode
	}
	rec.State, rec.Status = record.Dead, dl.Status
	rec.Error = describe(a.resp, a.err)
	switch {
	case open:
		rec.Error = "circuit breaker open for peer " + e.to
	case a.agentFailed:
		rec.Error = "the agent answered " + strconv.Itoa(dl.Status) + " with a failed A2A task"
	}
	rec.Outcome = "dead-lettered after " + strconv.Itoa(rec.Attempts) + " attempt(s)"
	e.deadLetters.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch err := e.book.DeadLetter(ctx, rec); {
	case err == nil:
		if e.letters != nil {
			e.letters.Dead(rec)
		}
	case e.unstored != nil && e.unstored.keep(rec):
		e.log.Warn("dead letter not stored yet: kept, to be stored when the store answers", "record_id", rec.ID,
			"edge", rec.Edge(), "error", err.Error())
	default:
		e.log.Error("dead letter not stored: the failure is in this log only", "record_id", rec.ID,
			"edge", rec.Edge(), "request_digest", rec.RequestDigest, "idempotency_key", rec.Key, "error", err.Error())
	}
	return dl
}

package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
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

// edge is the outbound path to one peer: it records the handoff with its
// checkpoint before the first try, then sends it through the peer's circuit
// breaker with retries (exponential backoff with full jitter, Retry-After
// honoured, bounded by the edge's retry budget and timeouts), and
// dead-letters what exhausts its retries or meets an open breaker. Retries
// happen before any response byte reaches the agent: the response returned
// is the one the agent gets.
type edge struct {
	from, to   string
	next       http.RoundTripper
	breaker    *gobreaker.CircuitBreaker[*http.Response]
	retry      config.Retry
	budget     *budget
	book       *record.Book
	checkpoint int64 // body bytes kept with a checkpoint
	log        *slog.Logger
	signer     *trust.Signer // nil: handoffs go unsigned
	obs        *edgeObs      // metrics and span detail (edge_metrics.go); nil: none

	deadLetters atomic.Int64 // dead letters written (or logged when the store refused)
}

// DeadLetterError is returned to the reverse proxy when a handoff was
// dead-lettered; the error handler answers the agent with its record id.
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

// errPeerStatus marks a response the breaker counts as a failure, and
// errCallerGone a try the caller abandoned, which it does not count.
var (
	errPeerStatus = errors.New("peer failure status")
	errCallerGone = errors.New("the caller went away")
)

func newEdge(c *config.Config, to string, next http.RoundTripper, book *record.Book, log *slog.Logger,
	onClose func()) *edge {
	bc := c.BreakerFor(to)
	e := &edge{from: c.Agent, to: to, next: next, retry: c.RetryFor(to), book: book,
		checkpoint: c.Records.MaxBodyBytes, log: log}
	e.budget = newBudget(*e.retry.Budget, e.retry.BudgetWindow.D())
	e.breaker = gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:        to,
		MaxRequests: uint32(bc.HalfOpenRequests),
		Timeout:     bc.OpenFor.D(),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(bc.Failures) },
		// A try the caller abandoned says nothing about the peer.
		IsSuccessful: func(err error) bool { return err == nil || errors.Is(err, errCallerGone) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			log.Warn("circuit breaker", "peer", name, "from", from.String(), "to", to.String())
			e.obs.transition(int(to))
			if to == gobreaker.StateClosed && onClose != nil {
				onClose()
			}
		},
	})
	return e
}

type recordKey struct{}

// withRecord marks a request as the replay of rec.
func withRecord(ctx context.Context, rec *record.Record) context.Context {
	return context.WithValue(ctx, recordKey{}, rec)
}

// RoundTrip sends one handoff.
func (e *edge) RoundTrip(req *http.Request) (*http.Response, error) {
	rec, replay := req.Context().Value(recordKey{}).(*record.Record)
	if !replay {
		in := middleware.InfoFromContext(req.Context())
		rec = e.newRecord(req, in)
		// The checkpoint is written before anything leaves: a crash from here
		// on leaves a record to resume from. A store that refuses it does not
		// stop the handoff (the book logs and counts the loss).
		_ = e.book.Write(req.Context(), rec)
		return e.measured(req, rec, in.Body)
	}
	return e.measured(req, rec, rec.Request.Body)
}

func (e *edge) newRecord(req *http.Request, in *middleware.Info) *record.Record {
	now := time.Now()
	rec := &record.Record{
		ID: record.NewID(in.TraceID), TraceID: in.TraceID, ParentID: in.ParentRecord, Side: record.Egress,
		From: e.from, To: e.to, Hop: in.Hop, Key: in.Key, Method: req.Method, Target: req.URL.RequestURI(),
		State: record.Sent, Created: now, Updated: now,
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
	rec.Grant = in.GrantOut
	if in.Uncorrelated {
		rec.Trust = append(rec.Trust, "uncorrelated")
	}
	rec.Trust = append(rec.Trust, middleware.TrustLabels(in)...)
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

// send runs the tries of one handoff.
// body is the whole request body when it was buffered (nil when it streams).
func (e *edge) send(req *http.Request, rec *record.Record, body []byte) (*http.Response, error) {
	ctx := req.Context()
	start := time.Now()
	var deadline time.Time
	if t := e.retry.Timeout.D(); t > 0 {
		deadline = start.Add(t)
	}
	e.budget.request()
	for try := 0; ; try++ {
		if try > 0 {
			req = req.Clone(ctx)
			req.Body = io.NopCloser(bytes.NewReader(body))
			if len(body) == 0 {
				req.Body = http.NoBody
			}
		}
		rec.Attempts++
		if e.signer != nil {
			// Each try carries its own signature: a fresh nonce, as the
			// receiver refuses a nonce it has seen.
			if err := e.signer.Sign(trust.RequestMessage(req, body), time.Now()); err != nil {
				return nil, e.deadLetter(rec, start, nil, fmt.Errorf("signing: %w", err), false, false)
			}
		}
		resp, timedOut, err := e.try(req, body, deadline)
		if err == nil {
			rec.Outcome = "delivered with status " + strconv.Itoa(resp.StatusCode)
			if rec.State == record.Replayed {
				rec.Outcome += " on replay"
			}
			rec.State, rec.Status, rec.Error = record.Delivered, resp.StatusCode, ""
			e.finish(rec, start)
			return resp, nil
		}
		if callerFault(req, err) {
			// The agent's side failed (its body outgrew the limit, or it
			// went away): not the peer's fault, nothing to dead-letter.
			rec.State, rec.Error, rec.Outcome = record.Failed, err.Error(), "not delivered: the caller's request failed"
			e.finish(rec, start)
			return nil, err
		}
		open := errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
		if !open && e.mayRetry(rec, try, err, deadline) {
			wait := e.backoff(try, resp)
			if resp != nil {
				drain(resp)
			}
			rec.State, rec.Error = record.Failed, describe(resp, err)
			rec.Updated = time.Now()
			e.book.WriteLater(rec)
			if !sleep(ctx, wait, deadline) {
				err = context.Cause(ctx)
				if err == nil {
					err = context.DeadlineExceeded
				}
				return nil, e.deadLetter(rec, start, nil, err, false, true)
			}
			continue
		}
		dlErr := e.deadLetter(rec, start, resp, err, open, timedOut)
		if resp != nil {
			// The peer answered: its answer passes through untouched, marked
			// with the dead letter it became.
			resp.Header.Set(HeaderDeadLetter, rec.ID)
			return resp, nil
		}
		return nil, dlErr
	}
}

// HeaderDeadLetter names, on a response passed through after retries were
// exhausted, the dead letter the handoff became.
const HeaderDeadLetter = "Baton-Dead-Letter"

// try sends one attempt through the breaker, bounded by the per-try timeout
// and the overall deadline until response headers. A failure status comes
// back as the response and errPeerStatus.
func (e *edge) try(req *http.Request, body []byte, deadline time.Time) (*http.Response, bool, error) {
	limit := e.retry.PerTryTimeout.D()
	if !deadline.IsZero() {
		if left := time.Until(deadline); limit == 0 || left < limit {
			limit = max(left, time.Millisecond)
		}
	}
	// A try with a time limit runs under its own context, cut by a timer;
	// one without runs under the request's, and costs neither.
	ctx, cancel := req.Context(), context.CancelFunc(noCancel)
	var timedOut atomic.Bool
	var timer *time.Timer
	if limit > 0 {
		ctx, cancel = context.WithCancel(ctx)
		timer = time.AfterFunc(limit, func() { timedOut.Store(true); cancel() })
	}
	resp, err := e.breaker.Execute(func() (*http.Response, error) {
		resp, err := e.next.RoundTrip(withMemoryBody(req.WithContext(ctx), body))
		if err != nil {
			if req.Context().Err() != nil {
				return nil, fmt.Errorf("%w: %w", errCallerGone, err)
			}
			return nil, err
		}
		if breakerFailure(resp.StatusCode) {
			return resp, errPeerStatus
		}
		return resp, nil
	})
	fired := timer != nil && !timer.Stop()
	switch {
	case err == nil && fired:
		// Headers arrived just as the timer fired: the body is cut.
		resp.Body.Close()
		cancel()
		return nil, true, fmt.Errorf("try timed out: %w", context.DeadlineExceeded)
	case err == nil:
		switch {
		case timer == nil: // nothing to release
		case resp.StatusCode == http.StatusSwitchingProtocols:
			// An upgraded connection keeps its writable body and lives as
			// long as the request's own context.
			context.AfterFunc(req.Context(), cancel)
		default:
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		}
		if retryableStatus(resp) {
			return resp, false, errPeerStatus // retried, but not a breaker failure
		}
		return resp, false, nil
	case errors.Is(err, errPeerStatus):
		if timer != nil {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		}
		return resp, fired, err
	}
	cancel()
	if fired || timedOut.Load() {
		err = fmt.Errorf("try timed out after %s: %w", limit, context.DeadlineExceeded)
	}
	return nil, fired || timedOut.Load(), err
}

// mayRetry decides whether a failed try is tried again.
func (e *edge) mayRetry(rec *record.Record, try int, err error, deadline time.Time) bool {
	if try >= *e.retry.Attempts || !rec.Replayable {
		return false
	}
	if !deadline.IsZero() && time.Now().After(deadline) {
		return false
	}
	// Only what the receiver can deduplicate is retried, except a connection
	// that was never opened: nothing was sent.
	if rec.Key == "" && !notSent(err) {
		return false
	}
	return e.budget.allowRetry()
}

// backoff is exponential with full jitter, and at least the peer's
// Retry-After, capped by max_backoff.
func (e *edge) backoff(try int, resp *http.Response) time.Duration {
	ceil := e.retry.Backoff.D() << try
	if m := e.retry.MaxBackoff.D(); m > 0 && (ceil > m || ceil <= 0) {
		ceil = m
	}
	wait := time.Duration(0)
	if ceil > 0 {
		wait = time.Duration(rand.Int64N(int64(ceil) + 1))
	}
	if resp != nil {
		if ra := retryAfter(resp.Header.Get("Retry-After")); ra > wait {
			wait = ra
		}
	}
	if m := e.retry.MaxBackoff.D(); m > 0 && wait > m {
		wait = m
	}
	return wait
}

// deadLetter moves the record to dead and returns the error the agent's
// answer is made from when the peer gave none.
func (e *edge) deadLetter(rec *record.Record, start time.Time, resp *http.Response, err error, open, timedOut bool) error {
	dl := &DeadLetterError{RecordID: rec.ID, Breaker: open, Timeout: timedOut || isTimeout(err), Err: err}
	if resp != nil {
		dl.Status = resp.StatusCode
	}
	rec.State, rec.Status = record.Dead, dl.Status
	rec.Error = describe(resp, err)
	if open {
		rec.Error = "circuit breaker open for peer " + e.to
	}
	rec.Outcome = "dead-lettered after " + strconv.Itoa(rec.Attempts) + " attempt(s)"
	rec.Updated = time.Now()
	rec.Latency = float64(time.Since(start).Microseconds()) / 1000
	e.deadLetters.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(context.Background()), 5*time.Second)
	defer cancel()
	if err := e.book.DeadLetter(ctx, rec); err != nil {
		e.log.Error("dead letter not stored: the failure is in this log only", "record_id", rec.ID,
			"edge", rec.Edge(), "request_digest", rec.RequestDigest, "idempotency_key", rec.Key, "error", err.Error())
	}
	return dl
}

func (e *edge) finish(rec *record.Record, start time.Time) {
	rec.Updated = time.Now()
	rec.Latency = float64(time.Since(start).Microseconds()) / 1000
	e.book.WriteLater(rec)
}

// callerFault reports a failure on the agent's side of the proxy.
func callerFault(req *http.Request, err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig) || errors.Is(req.Context().Err(), context.Canceled)
}

// breakerFailure tells the statuses that count against a peer.
func breakerFailure(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// retryableStatus adds the answers worth retrying without blaming the peer:
// 429, and 409 with Retry-After (the receiver's dedupe window saying the
// same handoff is still in flight: once it completes, a retry gets its
// answer).
func retryableStatus(resp *http.Response) bool {
	return resp.StatusCode == http.StatusTooManyRequests ||
		(resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") != "")
}

// notSent reports a failure to open the connection: the request was never
// written.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func describe(resp *http.Response, err error) string {
	if resp != nil {
		return "peer answered " + resp.Status
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// retryAfter parses Retry-After as seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

// sleep waits d unless ctx ends or the deadline would pass first.
func sleep(ctx context.Context, d time.Duration, deadline time.Time) bool {
	if !deadline.IsZero() && time.Now().Add(d).After(deadline) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// drain reads a little of a body we will not use, so the connection can be
// reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}

// cancelBody ends a try's context when its body is closed.
func noCancel() {}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

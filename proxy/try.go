package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/middleware"
)

// errPeerStatus marks, inside the breaker, an answer that counts against
// the peer, and errCallerGone a try the caller abandoned, which does not.
var (
	errPeerStatus = errors.New("peer failure status")
	errCallerGone = errors.New("the caller went away")
)

// try sends one attempt through the breaker, bounded by the per-try timeout
// and the overall deadline until response headers. It returns the peer's
// answer whatever its status (judge decides what it means), or the try's
// failure, and whether a time limit cut it.
func (e *edge) try(req *http.Request, body []byte, deadline time.Time) (*http.Response, bool, error) {
	limit := e.retry.PerTryTimeout.D()
	if !deadline.IsZero() {
		if left := time.Until(deadline); limit == 0 || left < limit {
			limit = max(left, time.Millisecond)
		}
	}
	// A try with a time limit runs under its own context, cut by a timer;
	// one without runs under the request's, and costs neither.
	sent, cancel := req, context.CancelFunc(noCancel)
	var timedOut atomic.Bool
	var timer *time.Timer
	if limit > 0 {
		var ctx context.Context
		ctx, cancel = context.WithCancel(req.Context())
		sent = req.WithContext(ctx)
		timer = time.AfterFunc(limit, func() { timedOut.Store(true); cancel() })
	}
	resp, err := e.breaker.Execute(func() (*http.Response, error) {
		// The transport is given the request with its body in memory: as it
		// is on its first send, a copy on any other, req itself left as it
		// is for the next try.
		out := sent
		if in := middleware.InfoFromContext(sent.Context()); in == nil || !in.FirstSend(sent) {
			out = withMemoryBody(sent, body)
		}
		resp, err := e.next.RoundTrip(out)
		e.breaker.tried(err)
		if err != nil {
			if req.Context().Err() != nil {
				return nil, fmt.Errorf("%w: %w", errCallerGone, err)
			}
			return nil, err
		}
		if breakerFailure(resp) {
			return resp, errPeerStatus
		}
		return resp, nil
	})
	if errors.Is(err, errPeerStatus) {
		err = nil // counted against the peer; judged by its status
	}
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
			resp.Body = middleware.CancelOnClose(resp.Body, cancel)
		}
		return resp, false, nil
	}
	cancel()
	if fired || timedOut.Load() {
		err = fmt.Errorf("try timed out after %s: %w", limit, context.DeadlineExceeded)
	}
	return nil, fired || timedOut.Load(), err
}

// retryRequest is a fresh copy of req, with the buffered body, for another
// try.
func retryRequest(req *http.Request, body []byte) *http.Request {
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	return req
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

func describe(resp *http.Response, err error) string {
	if resp != nil {
		return "peer answered " + resp.Status
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// drain reads a little of a body we will not use, so the connection can be
// reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}

func noCancel() {}

package compensation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
)

// PostAbandon serves POST /v1/traces/{trace_id}/abandon ({"reason":
// "..."}; ?wait=30s waits for it to settle).
func (cr *Compensator) PostAbandon(w http.ResponseWriter, r *http.Request) {
	id, ok := traceParam(w, r)
	if !ok {
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10)); len(b) > 0 {
		if err := json.Unmarshal(b, &req); err != nil {
			problem.Write(w, r, problem.BadRequest, "the body must be {\"reason\": \"...\"}: "+err.Error())
			return
		}
	}
	if req.Reason == "" {
		req.Reason = "abandoned by an operator"
	}
	wait, err := waitParam(r)
	if err != nil {
		problem.Write(w, r, problem.BadRequest, err.Error())
		return
	}
	a, err := cr.Abandon(r.Context(), id, req.Reason, records.Operator(r))
	if err == nil && wait > 0 {
		a, err = cr.waitSettled(r.Context(), id, wait)
	}
	cr.answerAbandon(w, r, a, err)
}

// GetAbandon serves GET /v1/traces/{trace_id}/abandon: where it stands.
func (cr *Compensator) GetAbandon(w http.ResponseWriter, r *http.Request) {
	id, ok := traceParam(w, r)
	if !ok {
		return
	}
	a, err := cr.Abandonment(r.Context(), id)
	cr.answerAbandon(w, r, a, err)
}

func (cr *Compensator) answerAbandon(w http.ResponseWriter, r *http.Request, a *Abandonment, err error) {
	switch {
	case errors.Is(err, ErrNotAbandonable):
		problem.Write(w, r, problem.NotAbandonable, err.Error())
	case err != nil:
		records.StoreProblem(w, r, cr.o.Log, err)
	default:
		records.WriteJSON(w, http.StatusOK, a)
	}
}

// waitSettled polls until the abandonment settles or wait passes.
func (cr *Compensator) waitSettled(ctx context.Context, id string, wait time.Duration) (*Abandonment, error) {
	deadline := time.Now().Add(wait)
	for {
		a, err := cr.Abandonment(ctx, id)
		if err != nil || a.Settled || time.Now().After(deadline) {
			return a, err
		}
		select {
		case <-ctx.Done():
			return a, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitParam(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > 5*time.Minute {
		return 0, fmt.Errorf("wait must be a duration up to 5m, such as 30s")
	}
	return d, nil
}

// traceParam reads the {trace_id} of the path, answering 404 when it is
// not a trace id.
func traceParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "trace_id")
	if !handoff.ValidTraceID(id) {
		problem.Write(w, r, problem.NotFound, "not a trace id: 32 lower-case hex digits")
		return "", false
	}
	return id, true
}

// compMetrics count compensations by outcome. A nil *compMetrics counts
// nothing.
type compMetrics struct {
	sent metric.Int64Counter
}

func newCompMetrics(mp metric.MeterProvider) (*compMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	c, err := mp.Meter("github.com/batonproxy/baton").Int64Counter("baton.compensations", metric.WithUnit("{handoff}"),
		metric.WithDescription("Compensating handoffs sent for abandoned traces, by outcome: undone (answered 2xx), failed (dead-lettered or refused)."))
	if err != nil {
		return nil, fmt.Errorf("compensation: metrics: %w", err)
	}
	return &compMetrics{sent: c}, nil
}

func (m *compMetrics) observe(ctx context.Context, status int) {
	if m == nil {
		return
	}
	outcome := "undone"
	if status < 200 || status >= 300 {
		outcome = "failed"
	}
	m.sent.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// ErrNotDead reports a replay of a record that is not a dead letter, and
// ErrNotReplayable one whose checkpoint lacks its body.
var (
	ErrNotDead       = errors.New("record is not a dead letter")
	ErrNotReplayable = errors.New("the checkpoint holds no body: the request was streamed or over records.max_body_bytes")
	ErrUnknownPeer   = errors.New("the record's peer is no longer configured")
)

// NotOwnerError reports a dead letter (or record) of another agent: only
// the Baton of the agent whose handoff it is may act on it.
type NotOwnerError struct {
	ID    string
	Owner string // the agent whose record it is
}

func (e *NotOwnerError) Error() string {
	return e.ID + " belongs to agent " + e.Owner + ": act on it at " + e.Owner + "'s Baton"
}

// owned returns rec when it is a record of this Baton's agent's own
// handoffs, and a *NotOwnerError otherwise.
func (s *Server) owned(rec *record.Record) error {
	owner := rec.From
	if rec.Side == record.Ingress {
		owner = rec.To
	}
	if owner != s.cfg.Agent {
		return &NotOwnerError{ID: rec.ID, Owner: owner}
	}
	return nil
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	Record   *record.Record `json:"record"`
	Status   int            `json:"status,omitempty"`
	Response string         `json:"response,omitempty"` // the first 64 KiB of the peer's answer
	Error    string         `json:"error,omitempty"`
}

// Replay re-sends a dead letter's stored request with its original
// idempotency key, trace and hop, on a new span linked to the original, so
// that the receiver's dedupe window makes the replay of already-delivered
// work harmless. The record moves dead → replayed → delivered (or dead again).
func (s *Server) Replay(ctx context.Context, id string) (*ReplayResult, error) {
	rec, err := s.book.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.owned(rec); err != nil {
		return nil, err
	}
	if rec.State != record.Dead {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotDead, id, rec.State)
	}
	if rec.Compensates == "" { // a compensation's own dead letter is replayed to finish undoing
		if gone, err := s.abandoned(ctx, rec.TraceID); err != nil {
			return nil, err
		} else if gone {
			return nil, ErrAbandoned
		}
	}
	if !rec.Replayable || rec.Request == nil {
		return nil, ErrNotReplayable
	}
	res := &ReplayResult{Record: rec}
	resp, done, err := s.resend(ctx, rec, record.Replayed, "replay")
	if err != nil {
		return nil, err
	}
	defer done()
	if resp != nil {
		limit := int64(64 << 10)
		if rec.Approval != nil {
			limit = maxAnswerBytes + 1 // the agent's poll of its approval gets the new answer
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
		resp.Body.Close()
		res.Status, res.Response = resp.StatusCode, string(body[:min(len(body), 64<<10)])
		if rec.Approval != nil {
			s.approvals.keepAnswer(ctx, id, resp, body)
		}
	}
	if rec.State == record.Dead {
		res.Error = rec.Error // dead again, and recorded so
		return res, nil
	}
	if err := s.book.Undead(ctx, rec); err != nil {
		s.log.Warn("replayed dead letter still listed", "record_id", id, "error", err.Error())
	}
	return res, nil
}

// resend sends rec's checkpoint again with its original idempotency key,
// trace and hop, on a new span linked to the original (named for why), so
// that the receiver's dedupe window makes the resend of already-delivered
// work harmless. rec is written in state first before anything is sent, and
// ends delivered or dead. The answer's body is the caller's to close (resp
// is nil when no answer came: rec says why); done ends the span.
func (s *Server) resend(ctx context.Context, rec *record.Record, first record.State, why string) (resp *http.Response, done func(), err error) {
	e, ok := s.edges[rec.To]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s", ErrUnknownPeer, rec.To)
	}
	orig := spanContext(rec)
	ctx = trace.ContextWithRemoteSpanContext(context.WithoutCancel(ctx), orig)
	ctx, span := s.tracer.Start(ctx, "invoke_agent "+rec.To+" ("+why+")", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: orig}), trace.WithAttributes(
			middleware.AttrOperation.String("invoke_agent"), middleware.AttrAgentName.String(rec.To),
			middleware.AttrEdge.String(rec.Edge()), middleware.AttrHop.Int(rec.Hop),
			middleware.AttrEdgeFrom.String(rec.From), middleware.AttrEdgeTo.String(rec.To)))
	done = func() { span.End() }
	if rec.Key != "" {
		span.SetAttributes(middleware.KeyDigestAttr(rec.Key))
	}
	req, err := http.NewRequestWithContext(withRecord(ctx, rec), rec.Request.Method, rec.Request.URL,
		bytes.NewReader(rec.Request.Body))
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("proxy: rebuilding %s: %w", rec.ID, err)
	}
	req.Header = rec.Request.Header.Clone()
	req.Header.Del(middleware.HeaderTraceparent)
	s.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if len(rec.Request.Body) == 0 {
		req.Body = http.NoBody
	}
	rec.State, rec.Updated = first, time.Now()
	if err := s.book.Write(ctx, rec); err != nil {
		done()
		return nil, nil, err
	}
	resp, err = e.RoundTrip(req)
	if err != nil {
		return nil, done, nil // rec says what happened
	}
	return resp, done, nil
}

// replayEdge replays every dead letter of the edge to peer, oldest first,
// until one fails again (auto_replay). One runs per edge at a time.
func (s *Server) replayEdge(ctx context.Context, peer string) {
	e := s.edges[peer]
	if !e.replaying.CompareAndSwap(false, true) {
		return
	}
	defer e.replaying.Store(false)
	list := record.EdgeDeadLetters(s.cfg.Agent + "→" + peer)
	for {
		recs, _, err := s.book.DeadLetters(ctx, list, 0, 50)
		if err != nil || len(recs) == 0 {
			return
		}
		progressed := false
		for _, r := range recs {
			if ctx.Err() != nil {
				return
			}
			res, err := s.Replay(ctx, r.ID)
			if err != nil {
				s.log.Warn("auto replay skipped", "record_id", r.ID, "error", err.Error())
				continue
			}
			if res.Error != "" {
				return // still failing: wait for the next round
			}
			progressed = true
		}
		if !progressed {
			return
		}
	}
}

// autoReplay replays the edge's dead letters when the peer's breaker
// closes again, and every interval while its breaker is not open, so that
// a peer that comes back is found without other traffic to probe it.
func (s *Server) autoReplay(ctx context.Context, peer string, every time.Duration) {
	e := s.edges[peer]
	list := record.EdgeDeadLetters(s.cfg.Agent + "→" + peer)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if e.breaker.State() == gobreaker.StateOpen {
			continue
		}
		if n, err := s.book.DeadLetterCount(ctx, list); err == nil && n > 0 {
			s.replayEdge(ctx, peer)
		}
	}
}

func spanContext(rec *record.Record) trace.SpanContext {
	tid, _ := trace.TraceIDFromHex(rec.TraceID)
	sid, _ := trace.SpanIDFromHex(rec.SpanID)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

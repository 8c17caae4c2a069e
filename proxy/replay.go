package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

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
	if rec.State != record.Dead {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotDead, id, rec.State)
	}
	if !rec.Replayable || rec.Request == nil {
		return nil, ErrNotReplayable
	}
	e, ok := s.edges[rec.To]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownPeer, rec.To)
	}

	// Continue the original trace on a new span linked to the original.
	orig := spanContext(rec)
	ctx = trace.ContextWithRemoteSpanContext(context.WithoutCancel(ctx), orig)
	ctx, span := s.tracer.Start(ctx, "invoke_agent "+rec.To+" (replay)", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: orig}), trace.WithAttributes(
			middleware.AttrOperation.String("invoke_agent"), middleware.AttrAgentName.String(rec.To),
			middleware.AttrEdge.String(rec.Edge()), middleware.AttrHop.Int(rec.Hop),
			middleware.AttrEdgeFrom.String(rec.From), middleware.AttrEdgeTo.String(rec.To)))
	defer span.End()
	if rec.Key != "" {
		span.SetAttributes(middleware.KeyDigestAttr(rec.Key))
	}

	req, err := http.NewRequestWithContext(withRecord(ctx, rec), rec.Request.Method, rec.Request.URL,
		bytes.NewReader(rec.Request.Body))
	if err != nil {
		return nil, fmt.Errorf("proxy: rebuilding %s: %w", id, err)
	}
	req.Header = rec.Request.Header.Clone()
	req.Header.Del(middleware.HeaderTraceparent)
	s.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if len(rec.Request.Body) == 0 {
		req.Body = http.NoBody
	}

	rec.State, rec.Updated = record.Replayed, time.Now()
	if err := s.book.Write(ctx, rec); err != nil {
		return nil, err
	}
	res := &ReplayResult{Record: rec}
	resp, err := e.RoundTrip(req)
	if err != nil {
		res.Error = err.Error()
		return res, nil // dead again, and recorded so
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	res.Status, res.Response = resp.StatusCode, string(body)
	if err := s.book.Undead(ctx, rec); err != nil {
		s.log.Warn("replayed dead letter still indexed", "record_id", id, "error", err.Error())
	}
	return res, nil
}

// replayEdge replays every dead letter of the edge to peer, oldest first
// (auto_replay, when the peer's breaker closes again).
func (s *Server) replayEdge(ctx context.Context, peer string) {
	edgeName := s.cfg.Agent + "→" + peer
	for {
		recs, _, err := s.book.DeadLetters(ctx, edgeName, 0, 50)
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
				return // still failing: wait for the breaker to close again
			}
			progressed = true
		}
		if !progressed {
			return
		}
	}
}

func spanContext(rec *record.Record) trace.SpanContext {
	tid, _ := trace.TraceIDFromHex(rec.TraceID)
	sid, _ := trace.SpanIDFromHex(rec.SpanID)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

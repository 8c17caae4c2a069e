package proxy

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// Resend sends rec's checkpoint again with its original idempotency key,
// trace and hop, on a new span linked to the original (named for why), so
// that the receiver's dedupe window makes the resend of already-delivered
// work harmless. rec is written in state first before anything is sent, and
// ends delivered or dead. The answer's body is the caller's to close (resp
// is nil when no answer came: rec says why); done ends the span.
func (s *Server) Resend(ctx context.Context, rec *record.Record, first record.State, why string) (resp *http.Response, done func(), err error) {
	e, ok := s.edges[rec.To]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s", record.ErrUnknownPeer, rec.To)
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

func spanContext(rec *record.Record) trace.SpanContext {
	tid, _ := trace.TraceIDFromHex(rec.TraceID)
	sid, _ := trace.SpanIDFromHex(rec.SpanID)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

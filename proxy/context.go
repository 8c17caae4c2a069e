package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	tokencount "github.com/batonproxy/baton/handoff/tokens"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// Context by reference (docs/context.md): the middlewares are
// middleware.ContextRefs; this file wires them to the edges' config, counts
// what they do, and serves the lazy read of referenced content to the agent.

// contextOps are the operations counted by baton_context_refs_total.
var contextOps = []string{"stored", "reused", "inlined", "referenced", "served", "refused"}

// contextMetrics count referenced content and its bytes by operation. A nil
// *contextMetrics counts nothing.
type contextMetrics struct {
	refs, bytes metric.Int64Counter
	budget      metric.Int64Counter
	attrs       map[string]metric.AddOption
}

func newContextMetrics(mp metric.MeterProvider) (*contextMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	mt := mp.Meter("github.com/batonproxy/baton")
	m := &contextMetrics{attrs: map[string]metric.AddOption{}}
	var err, err2, err3 error
	m.refs, err = mt.Int64Counter("baton.context.refs", metric.WithUnit("{artifact}"),
		metric.WithDescription("Artifacts passed by reference, by operation: stored, reused (already stored for the trace), inlined, referenced (left for the agent), served (read by the agent), refused."))
	m.bytes, err2 = mt.Int64Counter("baton.context.bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes of the artifacts passed by reference, by operation."))
	m.budget, err3 = mt.Int64Counter("baton.budget.handoffs", metric.WithUnit("{handoff}"),
		metric.WithDescription("Handoffs on an edge with a token budget, by outcome: within, trimmed, refused."))
	if err := errors.Join(err, err2, err3); err != nil {
		return nil, fmt.Errorf("proxy: context metrics: %w", err)
	}
	for _, op := range contextOps {
		m.attrs[op] = metric.WithAttributeSet(attribute.NewSet(attribute.String("op", op)))
	}
	return m, nil
}

func (m *contextMetrics) observe(ctx context.Context, op string, n int64) {
	if m == nil {
		return
	}
	m.refs.Add(ctx, 1, m.attrs[op])
	if n > 0 {
		m.bytes.Add(ctx, n, m.attrs[op])
	}
}

// newContextRefs builds the middlewares for c's edges.
func newContextRefs(c *config.Config, store state.Store, m *contextMetrics, o Options, onTrace func(context.Context, string) (bool, error)) *middleware.ContextRefs {
	return middleware.NewContextRefs(middleware.ContextOptions{
		Store: store, TTL: c.Records.Retention.D(), Log: o.Logger, Observe: m.observe,
		MinBytes: func(in *middleware.Info) int {
			if x := c.ContextOut(in.To); x != nil && x.ByReference != nil {
				return x.ByReference.MinBytes
			}
			return 0
		},
		ByReference: func(in *middleware.Info) bool { return c.Deliver(in.From) == config.DeliverReference },
		OnTrace:     onTrace,
	})
}

// agentContext serves GET /v1/context/{digest}?trace={trace id} on the
// agent-facing listener: referenced content of a trace, to an agent on the
// trace (one that sent or received a handoff in it) only.
func (s *Server) agentContext(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		problem.Write(w, r, problem.BadRequest, "referenced content is read with GET")
		return
	}
	d := strings.TrimPrefix(r.URL.Path, handoff.ContextPath)
	if !handoff.ValidDigest(d) {
		problem.Write(w, r, problem.NotFound, "not a content digest: GET "+handoff.ContextPath+"sha-256:<64 hex digits>?trace=<trace id>")
		return
	}
	traceID := r.URL.Query().Get("trace")
	if traceID == "" {
		traceID = traceOf(r.Header.Get("traceparent"))
	}
	if !handoff.ValidTraceID(traceID) {
		problem.Write(w, r, problem.BadRequest, "name the trace the content belongs to: ?trace=<32 hex digits> (the ref carries it) or a traceparent header")
		return
	}
	ctx := r.Context()
	on, err := s.onTrace(ctx, traceID)
	if err != nil {
		records.StoreProblem(w, r, s.log, err)
		return
	}
	if !on {
		s.ctxm.observe(ctx, "refused", 0)
		problem.New(r, problem.NotOnTrace, fmt.Sprintf("agent %s has received no handoff in trace %s: only agents on a trace may read its content", s.cfg.Agent, traceID)).
			With("trace_id", traceID).Write(w)
		return
	}
	meta, data, err := s.refs.Read(ctx, traceID, d)
	switch {
	case errors.Is(err, state.ErrNotFound):
		problem.Write(w, r, problem.NotFound, "no content "+d+" is stored for trace "+traceID+" (or it expired with the trace)")
		return
	case middleware.DigestMismatch(err):
		s.ctxm.observe(ctx, "refused", 0)
		problem.New(r, problem.DigestMismatch, "the content stored as "+d+" does not match that digest; it is not served").Write(w)
		return
	case err != nil:
		records.StoreProblem(w, r, s.log, err)
		return
	}
	h := w.Header()
	switch {
	case meta.MediaType != "":
		h.Set("Content-Type", meta.MediaType)
	case meta.Text:
		h.Set("Content-Type", "text/plain; charset=utf-8")
	default:
		h.Set("Content-Type", "application/json")
	}
	sum := sha256.Sum256(data)
	h.Set("Content-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":")
	h.Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	if meta.Trust == string(trust.Untrusted) {
		var l trust.Labels
		l.Add("", meta.Source)
		h.Set(trust.HeaderTrust, l.String())
		s.taint.RememberRead(ctx, traceID, meta.Source, data)
	}
	s.ctxm.observe(ctx, "served", int64(len(data)))
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}

// onTrace reports whether this Baton's agent is on the trace: handling a
// handoff of it now, or the receiver of one of its handoffs (a receipt).
// Only inbound handoffs count: an agent chooses the trace of what it sends,
// and sending in a trace must not let it read the trace's content.
func (s *Server) onTrace(ctx context.Context, traceID string) (bool, error) {
	if len(s.hs.OfTrace(traceID, nil)) > 0 {
		return true, nil
	}
	if !s.book.Enabled() {
		return false, nil
	}
	tr, err := s.book.Trace(ctx, traceID)
	if err != nil {
		return false, err
	}
	for _, rec := range tr.Records {
		if rec.Side == record.Ingress && rec.To == s.cfg.Agent && rec.State == record.Delivered {
			return true, nil
		}
	}
	return false, nil
}

// traceOf returns the trace id of a traceparent value, or "".
func traceOf(tp string) string {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) != 4 || len(parts[0]) != 2 {
		return ""
	}
	return parts[1]
}

// toBaton reports whether a request's Host names the Baton itself (a
// loopback address or localhost, as an agent reaches its sidecar) rather
// than a peer the agent calls through it: only then is a path of Baton's own
// served instead of passed on.
func toBaton(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	if h == "" || strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// budgetPolicies builds each outbound edge's budget and field policy once:
// the tokenizer's vocabulary is loaded when an edge names it.
func budgetPolicies(c *config.Config, log *slog.Logger) (func(in *middleware.Info) *middleware.BudgetPolicy, error) {
	byPeer := map[string]*middleware.BudgetPolicy{}
	for _, e := range c.Edges {
		x := e.Context
		if e.To == "" || x == nil || (x.Budget == nil && x.Fields == nil) {
			continue
		}
		p := &middleware.BudgetPolicy{}
		var model, name string
		if b := x.Budget; b != nil {
			p.MaxTokens, p.Trim = b.MaxTokens, b.Over == config.BudgetTrim
			model, name = b.Model, b.Tokenizer
		}
		ctr, err := tokencount.For(model, name)
		if err != nil {
			return nil, fmt.Errorf("proxy: edge to %s: %w", e.To, err)
		}
		if ctr.Note != "" {
			log.Warn("token budget estimated", "to", e.To, "note", ctr.Note)
		}
		p.Counter = ctr
		if f := x.Fields; f != nil {
			p.Envelope = handoff.FieldPolicy{Keep: f.Envelope.Keep, Drop: f.Envelope.Drop}
			p.Message = handoff.FieldPolicy{Keep: f.Message.Keep, Drop: f.Message.Drop}
		}
		byPeer[e.To] = p
	}
	return func(in *middleware.Info) *middleware.BudgetPolicy { return byPeer[in.To] }, nil
}

// observeBudget counts a handoff that met a token budget by outcome.
func (m *contextMetrics) observeBudget(ctx context.Context, in *middleware.Info, outcome string) {
	if m == nil {
		return
	}
	m.budget.Add(ctx, 1, metric.WithAttributes(attribute.String("to", in.To), attribute.String("outcome", outcome)))
}

package contextref

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// Serve serves GET /v1/context/{digest}?trace={trace id} on the egress
// listener (origin-form requests under PathPrefix): referenced content of a
// trace, to an agent on the trace (one that received a handoff in it)
// only. A request whose Host names a peer rather than the Baton itself is
// the agent's call to that peer, and goes on through the egress chain.
func (x *Refs) Serve(w http.ResponseWriter, r *http.Request) {
	if !toBaton(r.Host) {
		x.o.Egress().ServeHTTP(w, r)
		return
	}
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
	on, err := x.onTrace(ctx, traceID)
	if err != nil {
		records.StoreProblem(w, r, x.o.Log, err)
		return
	}
	if !on {
		x.m.observe(ctx, "refused", 0)
		problem.New(r, problem.NotOnTrace, fmt.Sprintf("agent %s has received no handoff in trace %s: only agents on a trace may read its content", x.o.Config.Agent, traceID)).
			With("trace_id", traceID).Write(w)
		return
	}
	meta, data, err := x.refs.Read(ctx, traceID, d)
	switch {
	case errors.Is(err, state.ErrNotFound):
		problem.Write(w, r, problem.NotFound, "no content "+d+" is stored for trace "+traceID+" (or it expired with the trace)")
		return
	case middleware.DigestMismatch(err):
		x.m.observe(ctx, "refused", 0)
		problem.New(r, problem.DigestMismatch, "the content stored as "+d+" does not match that digest; it is not served").Write(w)
		return
	case err != nil:
		records.StoreProblem(w, r, x.o.Log, err)
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
		x.o.Labels.RememberRead(ctx, traceID, meta.Source, data)
	}
	x.m.observe(ctx, "served", int64(len(data)))
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}

// onTrace reports whether this Baton's agent is on the trace: handling a
// handoff of it now, or the receiver of one of its handoffs (a receipt).
// Only inbound handoffs count: an agent chooses the trace of what it sends,
// and sending in a trace must not let it read the trace's content.
func (x *Refs) onTrace(ctx context.Context, traceID string) (bool, error) {
	if len(x.o.Handlings.OfTrace(traceID, nil)) > 0 {
		return true, nil
	}
	book := x.o.Book
	if !book.Enabled() {
		return false, nil
	}
	tr, err := book.Trace(ctx, traceID)
	if err != nil {
		return false, err
	}
	for _, rec := range tr.Records {
		if rec.Side == record.Ingress && rec.To == x.o.Config.Agent && rec.State == record.Delivered {
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

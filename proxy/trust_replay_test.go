package proxy_test

// Replayed signatures: refused while the store is down, never recorded as
// delivered (trust_test.go has the shared helpers).

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
)

// claimOutage is a store whose claims fail while down is set, as a Redis
// that stopped answering would.
type claimOutage struct {
	state.Store
	down atomic.Bool
}

// TestTrustReplayDuringStoreOutage: a signature's nonce cannot be checked
// while the store is down, so a signed handoff is refused with 503 whatever
// the dedupe window's own on_store_error says: delivering it would let a
// captured request be replayed for as long as the outage lasts.
func TestTrustReplayDuringStoreOutage(t *testing.T) {
	t.Parallel()
	known := newTrustID(t, t.TempDir(), "analyst-1")
	tests := []struct {
		name     string
		receiver string // summarizer's dedupe settings
	}{
		{name: "dedupe fail_closed (the default)"},
		{name: "dedupe off", receiver: "dedupe: {enabled: false}\n"},
		{name: "dedupe fail_open", receiver: "dedupe: {on_store_error: fail_open}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got seen
			ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
			t.Cleanup(ag.Close)
			store := &claimOutage{Store: state.NewMemory(config.Memory{})}
			b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n"+
				"trust: {peers: {analyst: ["+known.line()+"]}}\nedges: [{from: analyst}]\n"+tc.receiver, store)
			box := newMiddlebox(t, "http://"+b.IngressAddr(), nil)
			a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+known.identity()+
				"peers: {summarizer: {url: "+box.URL+"}}\nedges: [{to: summarizer}]\n", nil)
			traceparent, _ := newTraceparent(t)
			if resp := sendHandoff(t, a.EgressAddr(), "summarizer", traceparent); resp.StatusCode != 200 {
				t.Fatalf("the original: status %d", resp.StatusCode)
			}

			store.down.Store(true)
			resp := box.last(t).resend(t, b.IngressAddr())
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("the replay during the outage: status %d, want 503", resp.StatusCode)
			} else if p := readTrustProblem(t, resp); p.Type != problem.StoreUnavailable.Type() {
				t.Errorf("type %q, want %q", p.Type, problem.StoreUnavailable.Type())
			}
			if n := got.count(); n != 1 {
				t.Errorf("the agent saw %d handoffs, want 1 (the replay must not reach it)", n)
			}
		})
	}
}

func TestTrustReplayIsNotRecordedAsDelivered(t *testing.T) {
	t.Parallel()
	known := newTrustID(t, t.TempDir(), "analyst-1")
	var got seen
	ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n"+
		"trust: {peers: {analyst: ["+known.line()+"]}}\nedges: [{from: analyst}]\n", nil)
	box := newMiddlebox(t, "http://"+b.IngressAddr(), nil)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+known.identity()+
		"peers: {summarizer: {url: "+box.URL+"}}\nedges: [{to: summarizer}]\n", nil)
	traceparent, traceID := newTraceparent(t)
	if resp := sendHandoff(t, a.EgressAddr(), "summarizer", traceparent); resp.StatusCode != 200 {
		t.Fatalf("the original: status %d", resp.StatusCode)
	}
	receipt(t, b.AdminAddr(), traceID)
	wantRefusal(t, box.last(t).resend(t, b.IngressAddr()), http.StatusUnauthorized, problem.BadSignature, middleware.ReasonReplayed)

	// A refusal is answered before its receipt (if any) is queued: once the
	// original's receipt is there and a marker handoff's receipt follows,
	// the replay's would be too.
	marker, markerID := newTraceparent(t)
	if resp := sendHandoff(t, a.EgressAddr(), "summarizer", marker); resp.StatusCode != 200 {
		t.Fatalf("the marker: status %d", resp.StatusCode)
	}
	receipt(t, b.AdminAddr(), markerID)
	var v records.TraceView
	if st := adminGet(t, b.AdminAddr(), "/v1/traces/"+traceID, &v); st != 200 {
		t.Fatalf("GET trace: %d", st)
	}
	for _, r := range v.Records {
		if r.Side == record.Ingress && r.Status != 200 && r.State == record.Delivered {
			t.Errorf("receipt %s of the refused replay: state %s, status %d, outcome %q", r.ID, r.State, r.Status, r.Outcome)
		}
	}
}

func (s *claimOutage) Claim(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, []byte, error) {
	if s.down.Load() {
		return false, nil, errClaimOutage
	}
	return s.Store.Claim(ctx, key, val, ttl)
}

func (s *claimOutage) ClaimMany(ctx context.Context, ops []state.ClaimOp) ([]state.ClaimResult, error) {
	if s.down.Load() {
		return nil, errClaimOutage
	}
	return s.Store.ClaimMany(ctx, ops)
}

package middleware

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/batonproxy/baton/handoff"
)

func TestSpanDetail(t *testing.T) {
	t.Parallel()
	const key = "order-42"
	sum := sha256.Sum256([]byte(key))
	digest := hex.EncodeToString(sum[:8])
	tests := []struct {
		name   string
		side   Side
		agent  string
		fill   func(*Info, http.ResponseWriter)
		want   map[attribute.Key]attribute.Value
		absent []attribute.Key
	}{
		{
			name: "egress handoff with a derived key and an envelope", side: Egress, agent: "analyst",
			fill: func(in *Info, _ http.ResponseWriter) {
				in.From, in.To, in.Hop, in.Key, in.KeyDerived, in.Uncorrelated = "analyst", "summarizer", 1, key, true, true
				in.Contract = &handoff.Result{Completeness: 0.75}
				in.ContractPolicy = handoff.Policy{Mode: handoff.Observe}
			},
			want: map[attribute.Key]attribute.Value{
				AttrEdgeFrom: attribute.StringValue("analyst"), AttrEdgeTo: attribute.StringValue("summarizer"),
				AttrKeyDigest: attribute.StringValue(digest), AttrKeyDerived: attribute.BoolValue(true),
				AttrContractMode: attribute.StringValue("observe"), AttrCompleteness: attribute.Float64Value(0.75),
				AttrTrustLabels: attribute.StringSliceValue([]string{"uncorrelated"}),
			},
			absent: []attribute.Key{AttrReplayed},
		},
		{
			name: "egress: the peer replayed its answer", side: Egress, agent: "analyst",
			fill: func(in *Info, w http.ResponseWriter) {
				in.From, in.To, in.Hop, in.Key = "analyst", "summarizer", 1, key
				w.Header().Set(HeaderReplayed, "true")
			},
			want: map[attribute.Key]attribute.Value{
				AttrReplayed: attribute.BoolValue(true), AttrKeyDerived: attribute.BoolValue(false),
			},
			absent: []attribute.Key{AttrContractMode, AttrCompleteness, AttrTrustLabels},
		},
		{
			name: "ingress replay from the dedupe window", side: Ingress, agent: "summarizer",
			fill: func(in *Info, _ http.ResponseWriter) {
				in.From, in.To, in.Hop, in.Key, in.Dedupe, in.Posture = "analyst", "summarizer", 2, key, DedupeReplayed, "evaluate"
			},
			want: map[attribute.Key]attribute.Value{
				AttrEdgeFrom: attribute.StringValue("analyst"), AttrReplayed: attribute.BoolValue(true),
				AttrKeyDigest: attribute.StringValue(digest), AttrTrustLabels: attribute.StringSliceValue([]string{"posture=evaluate"}),
			},
		},
		{
			name: "external fetch: no edge ends, no key", side: Egress, agent: "analyst",
			fill:   func(in *Info, _ http.ResponseWriter) { in.From, in.External = "analyst", "api.example.com:443" },
			absent: []attribute.Key{AttrEdgeFrom, AttrEdgeTo, AttrKeyDigest, AttrReplayed},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, sr := tracedChain(tc.side, tc.agent, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.fill(InfoFromContext(r.Context()), w)
				w.WriteHeader(http.StatusOK)
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "http://summarizer/", nil))
			spans := sr.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range spans[0].Attributes() {
				attrs[kv.Key] = kv.Value
				if kv.Value.Type() == attribute.STRING && strings.Contains(kv.Value.AsString(), key) {
					t.Errorf("%s carries the idempotency key itself: %q", kv.Key, kv.Value.AsString())
				}
			}
			for k, v := range tc.want {
				got, ok := attrs[k]
				if !ok || got.String() != v.String() || got.Type() != v.Type() {
					t.Errorf("%s = %v (present %v), want %v", k, got.String(), ok, v.String())
				}
			}
			for _, k := range tc.absent {
				if _, ok := attrs[k]; ok {
					t.Errorf("%s present, want absent", k)
				}
			}
			if len(spans[0].Attributes()) > 6+maxDetail {
				t.Errorf("%d attributes, more than the %d room", len(spans[0].Attributes()), 6+maxDetail)
			}
		})
	}
}

// TestSpanDetailFitsEverything fills every detail at once: the array the
// Trace middleware writes into must have room for all of it.
func TestSpanDetailFitsEverything(t *testing.T) {
	t.Parallel()
	in := &Info{Side: Ingress, From: "a", To: "b", Hop: 1, Key: "k", Dedupe: DedupeReplayed, Posture: "trusted",
		Uncorrelated: true, Contract: &handoff.Result{}, rec: &recorder{ResponseWriter: httptest.NewRecorder()}}
	var a [6 + maxDetail]attribute.KeyValue
	n := spanDetail(a[:], 6, in)
	if n != 6+maxDetail {
		t.Errorf("spanDetail wrote %d, want all %d", n-6, maxDetail)
	}
	var keys []string
	for _, kv := range a[6:n] {
		keys = append(keys, string(kv.Key))
	}
	slices.Sort(keys)
	if len(slices.Compact(keys)) != maxDetail {
		t.Errorf("duplicate keys: %v", keys)
	}
}

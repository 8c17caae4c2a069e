package middleware

import (
	"crypto/sha256"
	"encoding/hex"

	"go.opentelemetry.io/otel/attribute"
)

// Span attributes for incidents: what an operator looking at one handoff's
// span needs without opening its records.
const (
	AttrEdgeFrom     = attribute.Key("baton.edge.from")
	AttrEdgeTo       = attribute.Key("baton.edge.to")
	AttrKeyDerived   = attribute.Key("baton.idempotency_key.derived")
	AttrReplayed     = attribute.Key("baton.replayed")
	AttrContractMode = attribute.Key("baton.contract.mode")
	AttrCompleteness = attribute.Key("baton.contract.completeness")
	AttrTrustLabels  = attribute.Key("baton.trust.labels")
)

// maxDetail is how many attributes spanDetail may add.
const maxDetail = 8

// spanDetail writes the incident attributes of the request into a from n
// and returns the new count: the edge's ends, a digest of the idempotency
// key (never the key), whether the answer was replayed from a dedupe window
// (at ingress this Baton's, at egress the peer's), the contract check and
// the trust labels.
func spanDetail(a []attribute.KeyValue, n int, in *Info) int {
	if in.Handoff() && in.From != "" && in.To != "" {
		a[n], a[n+1], n = AttrEdgeFrom.String(in.From), AttrEdgeTo.String(in.To), n+2
	}
	if in.Key != "" {
		a[n], a[n+1], n = KeyDigestAttr(in.Key), AttrKeyDerived.Bool(in.KeyDerived), n+2
	}
	if replayed(in) {
		a[n], n = AttrReplayed.Bool(true), n+1
	}
	if c := in.Contract; c != nil {
		a[n], a[n+1], n = AttrContractMode.String(in.ContractPolicy.Mode.String()), AttrCompleteness.Float64(c.Completeness), n+2
	}
	if labels := spanTrust(in); len(labels) > 0 {
		a[n], n = AttrTrustLabels.StringSlice(labels), n+1
	}
	return n
}

// KeyDigestAttr is baton.idempotency_key.digest: the first 8 bytes of the
// key's SHA-256, in hex, enough to find every span of one key without
// putting the key itself in the trace.
func KeyDigestAttr(key string) attribute.KeyValue {
	// Copied to the stack (a key is at most MaxKeyLen characters), not
	// converted to a slice on the heap.
	var buf [MaxKeyLen]byte
	sum := sha256.Sum256(append(buf[:0], key...))
	return AttrKeyDigest.String(hex.EncodeToString(sum[:8]))
}

func replayed(in *Info) bool {
	if in.Dedupe == DedupeReplayed {
		return true
	}
	return in.Side == Egress && in.rec != nil && in.rec.Header().Get(HeaderReplayed) == "true"
}

// spanTrust is the request's trust labels as its record keeps them.
func spanTrust(in *Info) []string {
	var out []string
	if in.Posture != "" {
		out = append(out, postureLabel(in.Posture))
	}
	if in.Uncorrelated {
		out = append(out, "uncorrelated")
	}
	return AppendTrustLabels(out, in)
}

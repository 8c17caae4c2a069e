package trust

// HTTP Message Signatures (RFC 9421) between Batons, with Ed25519 and the
// label "baton".
//
// The rule for what is covered: the signer covers @method, @authority,
// @path, @query, and every one of these fields the request has:
// content-digest (always: Sign sets it), baton-agent, baton-hop,
// baton-trust, baton-grant, idempotency-key, traceparent, and any other
// Baton-* field. The verifier requires the same, whatever the signer chose:
// @method, @authority, @path, @query, content-digest, baton-agent,
// baton-hop and traceparent always, and every Baton-* and Idempotency-Key
// field present on the request. A request missing one of the always-required
// fields therefore fails as "uncovered" (Baton's egress always sets them). A
// signature may cover more than that; it must not cover less.
//
// The signature parameters are created, keyid, nonce and alg="ed25519"; the
// verifier requires created, keyid and nonce, accepts alg only as
// "ed25519", and honours expires when present.

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Label is the signature label Batons sign under in Signature-Input and
// Signature. Other labels on a request are ignored.
const Label = "baton"

// Alg is the RFC 9421 algorithm name of Ed25519.
const Alg = "ed25519"

// Header names of RFC 9421.
const (
	HeaderSignatureInput = "Signature-Input"
	HeaderSignature      = "Signature"
)

// maxNonceLen bounds the nonce a verifier accepts: the caller stores it.
const maxNonceLen = 64

// Reasons a signature is refused: SignatureError.Reason, stable for metrics
// labels and problem types.
const (
	ReasonMissing        = "missing"         // no Signature-Input or Signature under the label
	ReasonMalformed      = "malformed"       // unparsable, or parameters missing or wrong
	ReasonUnknownKey     = "unknown_key"     // keyid not in the trust bundle
	ReasonBadSignature   = "bad_signature"   // the signature does not verify, or a covered field is gone
	ReasonDigestMismatch = "digest_mismatch" // Content-Digest does not match the body
	ReasonExpired        = "expired"         // created older than the skew allows, or past expires
	ReasonFuture         = "future"          // created later than the skew allows
	ReasonAgentMismatch  = "agent_mismatch"  // the key's agent is not the signed Baton-Agent
	ReasonUncovered      = "uncovered"       // a component Baton requires is not covered
)

// SignatureError is why a request's signature was refused. Detail is safe
// to show the client: it never holds key material.
type SignatureError struct {
	Reason string
	Detail string
	Err    error // the underlying error, if any
}

func (e *SignatureError) Error() string {
	return "signature " + e.Reason + ": " + e.Detail
}

func (e *SignatureError) Unwrap() error { return e.Err }

func sigErr(reason, detail string) *SignatureError {
	return &SignatureError{Reason: reason, Detail: detail}
}

// derivedComponents are covered first, in this order, on every signature.
var derivedComponents = [...]string{"@method", "@authority", "@path", "@query"}

// Signer signs requests with this Baton's key.
type Signer struct {
	key   *Key
	keyid []byte // the keyid parameter's value, serialized once
}

// Key returns the signing key.
func (s *Signer) Key() *Key { return s.key }

// NewSigner returns a Signer for k.
func NewSigner(k *Key) *Signer {
	return &Signer{key: k, keyid: appendSFString(nil, k.id)}
}

// Sign sets Content-Digest (sha-256 of m.Body), Signature-Input and
// Signature on m.Header, replacing any that were there. Sign last: after
// every change to the covered fields (trace propagation in the transport
// included) and once per attempt, since a retry must carry a fresh nonce.
func (s *Signer) Sign(m Message, now time.Time) error {
	h := m.Header
	h[HeaderContentDigest] = []string{ContentDigest(m.Body)}
	comps := make([]string, 0, 12)
	comps = append(comps, derivedComponents[:]...)
	for _, f := range knownFields {
		if len(h[f[1]]) > 0 {
			comps = append(comps, f[0])
		}
	}
	extra := len(comps)
	for k := range h {
		if !isBatonField(k) || isKnownKey(k) || len(h[k]) == 0 {
			continue
		}
		if c := strings.ToLower(k); !slices.Contains(comps, c) {
			comps = append(comps, c)
		}
	}
	slices.Sort(comps[extra:]) // map order is random; the list need not be
	for _, c := range comps[extra:] {
		if err := checkComponent(c); err != nil {
			return fmt.Errorf("signing: %w", err)
		}
	}

	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	params := make([]byte, 0, 256)
	params = append(params, '(')
	for i, c := range comps {
		if i > 0 {
			params = append(params, ' ')
		}
		params = append(params, '"')
		params = append(params, c...)
		params = append(params, '"')
	}
	params = append(params, ");created="...)
	params = strconv.AppendInt(params, now.Unix(), 10)
	params = append(params, ";keyid="...)
	params = append(params, s.keyid...)
	params = append(params, `;nonce="`...)
	params = base64.RawURLEncoding.AppendEncode(params, nonce[:])
	params = append(params, `";alg="ed25519"`...)

	base, err := appendSignatureBase(make([]byte, 0, 512+len(params)), &m, comps, params)
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	sig := ed25519.Sign(s.key.priv(), base)

	in := make([]byte, 0, len(Label)+1+len(params))
	in = append(append(append(in, Label...), '='), params...)
	out := make([]byte, 0, len(Label)+3+base64.StdEncoding.EncodedLen(len(sig)))
	out = append(append(out, Label...), "=:"...)
	out = append(base64.StdEncoding.AppendEncode(out, sig), ':')
	h[HeaderSignatureInput] = []string{string(in)}
	h[HeaderSignature] = []string{string(out)}
	return nil
}

// isKnownKey reports whether k is the canonical key of a known field.
func isKnownKey(k string) bool {
	for _, f := range knownFields {
		if f[1] == k {
			return true
		}
	}
	return false
}

// isBatonField reports whether the header key k is a Baton-* field.
func isBatonField(k string) bool {
	return len(k) > len("baton-") && strings.EqualFold(k[:len("baton-")], "baton-")
}

// Verified is what a good signature established.
type Verified struct {
	// Agent is the trust bundle's owner of the key, which is also the
	// signed Baton-Agent.
	Agent string
	KeyID string
	// Nonce is the signature's nonce. The caller must refuse a nonce it
	// has seen (scoped by KeyID) and remember this one until NonceUntil:
	// after that the signature is refused as expired anyway.
	Nonce      string
	Created    time.Time
	NonceUntil time.Time
}

// Verifier checks requests' signatures against a trust bundle.
type Verifier struct {
	keys map[string]bundleKey // by key id
	skew time.Duration
}

type bundleKey struct {
	agent string
	pub   ed25519.PublicKey
}

// NewVerifier returns a Verifier trusting b, accepting a signature created
// up to skew before or after the verifier's clock. b must be valid
// (Bundle.Validate) and skew positive.
func NewVerifier(b Bundle, skew time.Duration) (*Verifier, error) {
	if skew <= 0 {
		return nil, fmt.Errorf("trust: clock skew must be positive, got %v", skew)
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	v := &Verifier{keys: map[string]bundleKey{}, skew: skew}
	for agent, pks := range b {
		for _, pk := range pks {
			v.keys[pk.ID] = bundleKey{agent: agent, pub: slices.Clone(pk.Key)}
		}
	}
	return v, nil
}

// requiredFields are the fields every Baton signature must cover.
var requiredFields = [...]string{"content-digest", "baton-agent", "baton-hop", "traceparent"}

// Verify checks m's "baton" signature at time now and returns what it
// established, or a *SignatureError. The checks run cheapest first: parsing,
// coverage, key, time, body digest, signature, and last the binding of the
// key's agent to the signed Baton-Agent.
func (v *Verifier) Verify(m Message, now time.Time) (Verified, error) {
	sin, sig, err := findSignature(m.Header, Label)
	if err != nil {
		return Verified{}, err
	}
	p, err := readParams(sin)
	if err != nil {
		return Verified{}, err
	}
	if err := checkCoverage(p.components, m.Header); err != nil {
		return Verified{}, err
	}
	k, ok := v.keys[p.keyid]
	if !ok {
		return Verified{}, sigErr(ReasonUnknownKey, "key id "+quoteForError(p.keyid)+" is not in the trust bundle")
	}
	created := time.Unix(p.created, 0)
	switch {
	case now.Sub(created) > v.skew:
		return Verified{}, sigErr(ReasonExpired, fmt.Sprintf("created %s, older than the allowed clock skew of %s", created.UTC().Format(time.RFC3339), v.skew))
	case created.Sub(now) > v.skew:
		return Verified{}, sigErr(ReasonFuture, fmt.Sprintf("created %s, later than the allowed clock skew of %s", created.UTC().Format(time.RFC3339), v.skew))
	case p.hasExpires && now.Unix() > p.expires:
		return Verified{}, sigErr(ReasonExpired, "past its expires parameter")
	}
	if len(m.Header[HeaderContentDigest]) == 0 {
		return Verified{}, sigErr(ReasonDigestMismatch, "Content-Digest is covered but absent")
	}
	if err := checkContentDigest(strings.Join(m.Header[HeaderContentDigest], ", "), m.Body); err != nil {
		reason := ReasonDigestMismatch
		if errors.Is(err, errSFV) {
			reason = ReasonMalformed
		}
		return Verified{}, &SignatureError{Reason: reason, Detail: "Content-Digest: " + err.Error(), Err: err}
	}
	params := appendInnerList(make([]byte, 0, 256), sin.list, sin.params)
	base, err := appendSignatureBase(make([]byte, 0, 512+len(params)), &m, p.components, params)
	if err != nil {
		return Verified{}, &SignatureError{Reason: ReasonBadSignature, Detail: err.Error(), Err: err}
	}
	if !ed25519.Verify(k.pub, base, sig) {
		return Verified{}, sigErr(ReasonBadSignature, "the signature does not verify with key "+quoteForError(p.keyid))
	}
	if agent := fieldValue(m.Header, "Baton-Agent"); agent != k.agent {
		return Verified{}, sigErr(ReasonAgentMismatch, "key "+quoteForError(p.keyid)+" belongs to "+
			quoteForError(k.agent)+", but the signed Baton-Agent is "+quoteForError(agent))
	}
	// A second more than the last instant the signature is accepted, so
	// that the nonce's time to live is never zero.
	until := created.Add(v.skew + time.Second)
	if e := time.Unix(p.expires+1, 0); p.hasExpires && e.Before(until) {
		until = e
	}
	return Verified{Agent: k.agent, KeyID: p.keyid, Nonce: p.nonce, Created: created, NonceUntil: until}, nil
}

// fieldValue returns a field's value canonicalised as in the signature base.
func fieldValue(h http.Header, key string) string {
	vs := h[key]
	if len(vs) == 1 {
		return strings.Trim(vs[0], " \t")
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.Trim(v, " \t")
	}
	return strings.Join(out, ", ")
}

// findSignature returns the members labelled label of Signature-Input and
// Signature, the latter decoded.
func findSignature(h http.Header, label string) (sfMember, []byte, error) {
	ins, sigs := h[HeaderSignatureInput], h[HeaderSignature]
	switch {
	case len(ins) == 0 && len(sigs) == 0:
		return sfMember{}, nil, sigErr(ReasonMissing, "no Signature-Input and Signature headers")
	case len(ins) == 0:
		return sfMember{}, nil, sigErr(ReasonMissing, "no Signature-Input header")
	case len(sigs) == 0:
		return sfMember{}, nil, sigErr(ReasonMissing, "no Signature header")
	}
	in, err := labelled(HeaderSignatureInput, ins, label)
	if err != nil {
		return sfMember{}, nil, err
	}
	if !in.inner {
		return sfMember{}, nil, sigErr(ReasonMalformed, "Signature-Input "+label+" is not an inner list")
	}
	s, err := labelled(HeaderSignature, sigs, label)
	if err != nil {
		return sfMember{}, nil, err
	}
	if s.inner || s.item.val.kind != sfBytes || len(s.item.val.bytes) != ed25519.SignatureSize {
		return sfMember{}, nil, sigErr(ReasonMalformed, fmt.Sprintf("Signature %s is not a %d-byte byte sequence", label, ed25519.SignatureSize))
	}
	return in, s.item.val.bytes, nil
}

// labelled parses a Signature-Input or Signature field (its lines joined)
// and returns the member labelled label.
func labelled(field string, lines []string, label string) (sfMember, error) {
	ms, err := parseDictionary(strings.Join(lines, ", "))
	if err != nil {
		return sfMember{}, &SignatureError{Reason: ReasonMalformed, Detail: field + ": " + err.Error(), Err: err}
	}
	for _, m := range ms {
		if m.key == label {
			return m, nil
		}
	}
	return sfMember{}, sigErr(ReasonMissing, "no "+label+" label in "+field)
}

// sigParams are the parsed parameters of a signature.
type sigParams struct {
	components []string
	created    int64
	expires    int64
	hasExpires bool
	keyid      string
	nonce      string
}

func readParams(in sfMember) (sigParams, error) {
	var p sigParams
	var err error
	if p.components, err = coveredComponents(in); err != nil {
		return p, err
	}
	var hasCreated bool
	for _, prm := range in.params {
		v := prm.val
		bad := false
		switch prm.key {
		case "created":
			p.created, hasCreated, bad = v.num, true, v.kind != sfInteger
		case "expires":
			p.expires, p.hasExpires, bad = v.num, true, v.kind != sfInteger
		case "keyid":
			p.keyid, bad = v.str, v.kind != sfString
		case "nonce":
			p.nonce, bad = v.str, v.kind != sfString
		case "alg":
			if v.kind != sfString || v.str != Alg {
				return p, sigErr(ReasonMalformed, "alg must be \""+Alg+"\"")
			}
		}
		if bad {
			return p, sigErr(ReasonMalformed, "parameter "+prm.key+" has the wrong type")
		}
	}
	switch {
	case !hasCreated:
		return p, sigErr(ReasonMalformed, "no created parameter")
	case p.keyid == "":
		return p, sigErr(ReasonMalformed, "no keyid parameter")
	case p.nonce == "" || len(p.nonce) > maxNonceLen:
		return p, sigErr(ReasonMalformed, fmt.Sprintf("nonce parameter must be 1 to %d characters", maxNonceLen))
	}
	return p, nil
}

// coveredComponents returns the component identifiers a Signature-Input
// member covers.
func coveredComponents(in sfMember) ([]string, error) {
	cs := make([]string, 0, len(in.list))
	for _, it := range in.list {
		if it.val.kind != sfString {
			return nil, sigErr(ReasonMalformed, "a covered component is not a string")
		}
		if len(it.params) > 0 {
			return nil, sigErr(ReasonMalformed, "component parameters (;sf, ;key, ;req, …) are not supported: "+quoteForError(it.val.str))
		}
		c := it.val.str
		if err := checkComponent(c); err != nil {
			return nil, &SignatureError{Reason: ReasonMalformed, Detail: err.Error(), Err: err}
		}
		if slices.Contains(cs, c) {
			return nil, sigErr(ReasonMalformed, "component "+quoteForError(c)+" covered twice")
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// checkCoverage enforces the coverage rule in this file's comment.
func checkCoverage(covered []string, h http.Header) error {
	for _, c := range derivedComponents {
		if !slices.Contains(covered, c) {
			return sigErr(ReasonUncovered, "the signature does not cover "+c)
		}
	}
	for _, c := range requiredFields {
		if !slices.Contains(covered, c) {
			return sigErr(ReasonUncovered, "the signature does not cover "+c)
		}
	}
	for k, vs := range h {
		if len(vs) == 0 || !isBatonField(k) && !strings.EqualFold(k, "Idempotency-Key") {
			continue
		}
		if !slices.ContainsFunc(covered, func(c string) bool { return strings.EqualFold(c, k) }) {
			return sigErr(ReasonUncovered, "the signature does not cover "+quoteForError(strings.ToLower(k))+", present on the request")
		}
	}
	return nil
}

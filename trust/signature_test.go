package trust_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/trust"
)

const skew = 30 * time.Second

var t0 = time.Unix(1_800_000_000, 0)

// peers is a trust bundle: analyst with two keys (a rotation in progress),
// planner with one. The keys are generated per test run.
type peers struct {
	analyst1, analyst2, planner *trust.Key
	bundle                      trust.Bundle
	verifier                    *trust.Verifier
}

func newPeers(t testing.TB) *peers {
	t.Helper()
	p := &peers{}
	for _, k := range []struct {
		dst **trust.Key
		id  string
	}{{&p.analyst1, "analyst-1"}, {&p.analyst2, "analyst-2"}, {&p.planner, "planner-1"}} {
		var err error
		if *k.dst, err = trust.GenerateKey(k.id); err != nil {
			t.Fatal(err)
		}
	}
	p.bundle = trust.Bundle{
		"analyst": {p.analyst1.Public(), p.analyst2.Public()},
		"planner": {p.planner.Public()},
	}
	var err error
	if p.verifier, err = trust.NewVerifier(p.bundle, skew); err != nil {
		t.Fatal(err)
	}
	return p
}

// handoff is a request as analyst's egress would send it, before signing.
func handoff(body []byte) trust.Message {
	h := http.Header{}
	h.Set("Content-Type", "application/vnd.baton.handoff+json")
	h.Set("Baton-Agent", "analyst")
	h.Set("Baton-Hop", "2")
	h.Set("Baton-Trust", "untrusted; sources=2")
	h.Set("Baton-Grant", "eyJtYXlfaGFuZG9mZl90byI6W10sInNpZGVfZWZmZWN0cyI6W119")
	h.Set("Idempotency-Key", `"9f1c2b7e-step-3"`)
	h.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Set("Tracestate", "vendor=1")
	return trust.Message{Method: http.MethodPost, Authority: "summarizer.svc:15006", Path: "/a2a/v1",
		RawQuery: "mode=sync", Header: h, Body: body}
}

func body4KiB() []byte {
	b := bytes.Repeat([]byte(`{"k":"0123456789abcdef"},`), 4096/25+1)
	return append(append([]byte("["), b[:4096-2]...), ']')
}

func signed(t testing.TB, k *trust.Key, m trust.Message, at time.Time) trust.Message {
	t.Helper()
	if err := trust.NewSigner(k).Sign(m, at); err != nil {
		t.Fatal(err)
	}
	return m
}

func reasonOf(err error) string {
	var se *trust.SignatureError
	if errors.As(err, &se) {
		return se.Reason
	}
	if err != nil {
		return "untyped: " + err.Error()
	}
	return ""
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	p := newPeers(t)
	m := signed(t, p.analyst1, handoff(body4KiB()), t0)
	in := m.Header.Get("Signature-Input")
	for _, c := range []string{`"@method"`, `"@authority"`, `"@path"`, `"@query"`, `"content-digest"`, `"baton-agent"`,
		`"baton-hop"`, `"baton-trust"`, `"baton-grant"`, `"idempotency-key"`, `"traceparent"`,
		`;created=1800000000;keyid="analyst-1";nonce="`, `;alg="ed25519"`} {
		if !strings.Contains(in, c) {
			t.Errorf("Signature-Input %s lacks %s", in, c)
		}
	}
	if strings.Contains(in, "tracestate") || strings.Contains(in, "content-type") {
		t.Errorf("Signature-Input %s covers a field outside Baton's list", in)
	}
	if !strings.HasPrefix(m.Header.Get("Signature"), "baton=:") || !strings.HasPrefix(m.Header.Get("Content-Digest"), "sha-256=:") {
		t.Errorf("Signature %q, Content-Digest %q", m.Header.Get("Signature"), m.Header.Get("Content-Digest"))
	}

	v, err := p.verifier.Verify(m, t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if v.Agent != "analyst" || v.KeyID != "analyst-1" || !v.Created.Equal(t0) || len(v.Nonce) != 22 {
		t.Errorf("Verified = %+v", v)
	}
	if want := t0.Add(skew + time.Second); !v.NonceUntil.Equal(want) {
		t.Errorf("NonceUntil = %v, want %v", v.NonceUntil, want)
	}

	// Each signature has its own nonce.
	m2 := signed(t, p.analyst1, handoff(body4KiB()), t0)
	v2, err := p.verifier.Verify(m2, t0)
	if err != nil || v2.Nonce == v.Nonce {
		t.Errorf("second signature: %+v, %v; first nonce %s", v2, err, v.Nonce)
	}

	// No body, no query: still a digest (of nothing) and "@query": ?.
	m3 := handoff(nil)
	m3.Method, m3.RawQuery = http.MethodGet, ""
	if _, err := p.verifier.Verify(signed(t, p.planner, withAgent(m3, "planner"), t0), t0); err != nil {
		t.Errorf("bodiless GET: %v", err)
	}
}

func withAgent(m trust.Message, agent string) trust.Message {
	m.Header.Set("Baton-Agent", agent)
	return m
}

// TestVerifyRefuses is the tampering table: every row changes a signed
// request (or the clock, or the bundle) and names the reason Verify gives.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	p := newPeers(t)
	other, _ := trust.GenerateKey("analyst-1") // same id as a bundled key, other key
	stranger, _ := trust.GenerateKey("mallory-1")
	replace := func(field, old, new string) func(*trust.Message) {
		return func(m *trust.Message) { m.Header.Set(field, strings.Replace(m.Header.Get(field), old, new, 1)) }
	}
	tests := []struct {
		name   string
		key    *trust.Key           // signer; analyst1 when nil
		before func(*trust.Message) // applied before signing
		after  func(*trust.Message) // applied after signing
		at     time.Duration        // verifier clock minus signing time
		want   string               // reason; "" for success
	}{
		{name: "untouched"},
		{name: "rotated key", key: p.analyst2},
		{name: "not covered header added", after: func(m *trust.Message) { m.Header.Set("Tracestate", "other=2") }},
		{name: "covered field value padded", after: func(m *trust.Message) { m.Header.Set("Baton-Hop", " 2 ") }},
		{name: "authority case", after: func(m *trust.Message) { m.Authority = "Summarizer.SVC:15006" }},

		{name: "no signature", after: func(m *trust.Message) { m.Header.Del("Signature"); m.Header.Del("Signature-Input") }, want: trust.ReasonMissing},
		{name: "signature removed", after: func(m *trust.Message) { m.Header.Del("Signature") }, want: trust.ReasonMissing},
		{name: "other label only", after: replace("Signature-Input", "baton=", "proxy="), want: trust.ReasonMissing},

		{name: "hop changed", after: func(m *trust.Message) { m.Header.Set("Baton-Hop", "1") }, want: trust.ReasonBadSignature},
		{name: "trust label changed", after: func(m *trust.Message) { m.Header.Set("Baton-Trust", "trusted") }, want: trust.ReasonBadSignature},
		{name: "grant changed", after: func(m *trust.Message) { m.Header.Set("Baton-Grant", "e30") }, want: trust.ReasonBadSignature},
		{name: "idempotency key changed", after: func(m *trust.Message) { m.Header.Set("Idempotency-Key", `"other"`) }, want: trust.ReasonBadSignature},
		{name: "traceparent changed", after: replace("Traceparent", "-01", "-00"), want: trust.ReasonBadSignature},
		{name: "agent header changed", after: func(m *trust.Message) { m.Header.Set("Baton-Agent", "planner") }, want: trust.ReasonBadSignature},
		{name: "second field line", after: func(m *trust.Message) { m.Header.Add("Baton-Hop", "9") }, want: trust.ReasonBadSignature},
		{name: "method changed", after: func(m *trust.Message) { m.Method = http.MethodPut }, want: trust.ReasonBadSignature},
		{name: "authority changed", after: func(m *trust.Message) { m.Authority = "evil.svc:15006" }, want: trust.ReasonBadSignature},
		{name: "path changed", after: func(m *trust.Message) { m.Path = "/a2a/v2" }, want: trust.ReasonBadSignature},
		{name: "query changed", after: func(m *trust.Message) { m.RawQuery = "mode=async" }, want: trust.ReasonBadSignature},
		{name: "query removed", after: func(m *trust.Message) { m.RawQuery = "" }, want: trust.ReasonBadSignature},
		{name: "covered field removed", after: func(m *trust.Message) { m.Header.Del("Baton-Trust") }, want: trust.ReasonBadSignature},
		{name: "nonce changed", after: replace("Signature-Input", `nonce="`, `nonce="x`), want: trust.ReasonBadSignature},
		{name: "created changed within skew", after: replace("Signature-Input", "created=1800000000", "created=1800000001"), want: trust.ReasonBadSignature},
		{name: "signature from another signing", after: func(m *trust.Message) {
			again := signed(t, p.analyst1, handoff(body4KiB()), t0.Add(time.Second))
			m.Header.Set("Signature-Input", again.Header.Get("Signature-Input"))
		}, want: trust.ReasonBadSignature},
		{name: "wrong key under a bundled id", key: other, want: trust.ReasonBadSignature},

		{name: "body changed", after: func(m *trust.Message) { m.Body = append([]byte(" "), m.Body...) }, want: trust.ReasonDigestMismatch},
		{name: "body and digest changed", after: func(m *trust.Message) {
			m.Body = []byte("{}")
			m.Header.Set("Content-Digest", trust.ContentDigest(m.Body))
		}, want: trust.ReasonBadSignature},
		{name: "digest removed", after: func(m *trust.Message) { m.Header.Del("Content-Digest") }, want: trust.ReasonDigestMismatch},
		{name: "digest of unknown algorithm", after: func(m *trust.Message) { m.Header.Set("Content-Digest", "md5=:AAAA:") }, want: trust.ReasonDigestMismatch},

		{name: "unknown key id", key: stranger, want: trust.ReasonUnknownKey},
		{name: "expired", at: skew + 2*time.Second, want: trust.ReasonExpired},
		{name: "future", at: -skew - 2*time.Second, want: trust.ReasonFuture},
		{name: "oldest accepted", at: skew},
		{name: "expires parameter passed", after: replace("Signature-Input", ";alg=", ";expires=1800000001;alg="), at: 2 * time.Second, want: trust.ReasonExpired},

		{name: "signed as another agent", before: func(m *trust.Message) { m.Header.Set("Baton-Agent", "planner") }, want: trust.ReasonAgentMismatch},

		{name: "traceparent not covered", before: func(m *trust.Message) { m.Header.Del("Traceparent") }, after: func(m *trust.Message) {
			m.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		}, want: trust.ReasonUncovered},
		{name: "request without traceparent", before: func(m *trust.Message) { m.Header.Del("Traceparent") }, want: trust.ReasonUncovered},
		{name: "baton header added", after: func(m *trust.Message) { m.Header.Set("Baton-Confirm", "yes") }, want: trust.ReasonUncovered},
		{name: "idempotency key added", before: func(m *trust.Message) { m.Header.Del("Idempotency-Key") }, after: func(m *trust.Message) {
			m.Header.Set("Idempotency-Key", `"k"`)
		}, want: trust.ReasonUncovered},
		{name: "component dropped from coverage", after: replace("Signature-Input", ` "baton-hop"`, ""), want: trust.ReasonUncovered},

		{name: "duplicated Signature-Input label", after: func(m *trust.Message) {
			m.Header.Add("Signature-Input", `baton=("@method");created=1800000000;keyid="analyst-1";nonce="n"`)
		}, want: trust.ReasonMalformed},
		{name: "duplicated label in one line", after: func(m *trust.Message) {
			in := m.Header.Get("Signature-Input")
			m.Header.Set("Signature-Input", in+", "+in)
		}, want: trust.ReasonMalformed},
		{name: "duplicated Signature label", after: func(m *trust.Message) { m.Header.Add("Signature", m.Header.Get("Signature")) }, want: trust.ReasonMalformed},
		{name: "duplicated parameter", after: replace("Signature-Input", ";alg=", ";created=1800000000;alg="), want: trust.ReasonMalformed},
		{name: "other alg", after: replace("Signature-Input", `alg="ed25519"`, `alg="rsa-pss-sha512"`), want: trust.ReasonMalformed},
		{name: "no nonce", after: replace("Signature-Input", ";nonce=", ";n="), want: trust.ReasonMalformed},
		{name: "no keyid", after: replace("Signature-Input", ";keyid=", ";kid="), want: trust.ReasonMalformed},
		{name: "no created", after: replace("Signature-Input", ";created=", ";c="), want: trust.ReasonMalformed},
		{name: "created as string", after: replace("Signature-Input", "created=1800000000", `created="1800000000"`), want: trust.ReasonMalformed},
		{name: "component twice", after: replace("Signature-Input", `"@method"`, `"@method" "@method"`), want: trust.ReasonMalformed},
		{name: "component parameter", after: replace("Signature-Input", `"baton-trust"`, `"baton-trust";sf`), want: trust.ReasonMalformed},
		{name: "unsupported derived component", after: replace("Signature-Input", `"@method"`, `"@method" "@target-uri"`), want: trust.ReasonMalformed},
		{name: "unparsable input", after: replace("Signature-Input", "(", "["), want: trust.ReasonMalformed},
		{name: "signature not bytes", after: func(m *trust.Message) { m.Header.Set("Signature", "baton=abc") }, want: trust.ReasonMalformed},
		{name: "signature too short", after: func(m *trust.Message) { m.Header.Set("Signature", "baton=:AAAA:") }, want: trust.ReasonMalformed},
		{name: "unparsable digest", after: func(m *trust.Message) { m.Header.Set("Content-Digest", "sha-256=:AA") }, want: trust.ReasonMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := tc.key
			if k == nil {
				k = p.analyst1
			}
			m := handoff(body4KiB())
			if tc.before != nil {
				tc.before(&m)
			}
			m = signed(t, k, m, t0)
			if tc.after != nil {
				tc.after(&m)
			}
			_, err := p.verifier.Verify(m, t0.Add(tc.at))
			if got := reasonOf(err); got != tc.want {
				t.Errorf("Verify = %v (reason %q), want reason %q", err, got, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	p := newPeers(t)
	old := signed(t, p.analyst1, handoff(body4KiB()), t0)
	renewed := signed(t, p.analyst2, handoff(body4KiB()), t0)
	for name, m := range map[string]trust.Message{"old key": old, "new key": renewed} {
		if v, err := p.verifier.Verify(m, t0); err != nil || v.Agent != "analyst" {
			t.Errorf("%s during rotation: %+v, %v", name, v, err)
		}
	}
	// Rotation done: the old key leaves the bundle.
	after, err := trust.NewVerifier(trust.Bundle{"analyst": {p.analyst2.Public()}}, skew)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := after.Verify(old, t0); reasonOf(err) != trust.ReasonUnknownKey {
		t.Errorf("old key after rotation: %v", err)
	}
	if _, err := after.Verify(renewed, t0); err != nil {
		t.Errorf("new key after rotation: %v", err)
	}
}

func TestNewVerifierRefuses(t *testing.T) {
	t.Parallel()
	p := newPeers(t)
	if _, err := trust.NewVerifier(p.bundle, 0); err == nil {
		t.Error("zero skew accepted")
	}
	dup := trust.Bundle{"analyst": {p.analyst1.Public()}, "planner": {p.analyst1.Public()}}
	if _, err := trust.NewVerifier(dup, skew); err == nil {
		t.Error("one key for two agents accepted")
	}
}

// TestSignOverTheWire signs a request as net/http's client sends it and
// verifies it as net/http's server receives it: the authority, escaped path
// and query must come out the same at both ends.
func TestSignOverTheWire(t *testing.T) {
	t.Parallel()
	p := newPeers(t)
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			_, err = p.verifier.Verify(trust.RequestMessage(r, body), time.Now())
		}
		got <- err
	}))
	defer srv.Close()

	body := []byte(`{"task":"summarise"}`)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/a%2Fb/c%20d;x?q=a%20b&q=%C3%A9&empty=", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = strings.ToUpper(req.URL.Host[:1]) + req.URL.Host[1:]
	for k, vs := range handoff(nil).Header {
		req.Header[k] = vs
	}
	req.Header.Add("Baton-Trust", "sources=3") // two field lines
	if err := trust.NewSigner(p.analyst1).Sign(trust.RequestMessage(req, body), time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-got; err != nil {
		t.Fatalf("server-side Verify: %v", err)
	}
}

func BenchmarkSignVerify4KiB(b *testing.B) {
	p := newPeers(b)
	s := trust.NewSigner(p.analyst1)
	m := handoff(body4KiB())
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Body)))
	for b.Loop() {
		if err := s.Sign(m, t0); err != nil {
			b.Fatal(err)
		}
		if _, err := p.verifier.Verify(m, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign4KiB(b *testing.B) {
	p := newPeers(b)
	s := trust.NewSigner(p.analyst1)
	m := handoff(body4KiB())
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Sign(m, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify4KiB(b *testing.B) {
	p := newPeers(b)
	m := signed(b, p.analyst1, handoff(body4KiB()), t0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.verifier.Verify(m, t0); err != nil {
			b.Fatal(err)
		}
	}
}

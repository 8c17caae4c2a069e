package proxy_test

// End-to-end tests of signed identity, edge policy, grants, uncorrelated
// handoffs and the admin token, through real Batons on loopback.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/trust"
)

// trustID is an identity key with its key file.
type trustID struct {
	key  *trust.Key
	file string
}

// newTrustID generates a key named id and writes its key file, mode 0600,
// into dir.
func newTrustID(t *testing.T, dir, id string) trustID {
	t.Helper()
	k, err := trust.GenerateKey(id)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := k.PrivatePEM()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, id+".pem")
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return trustID{key: k, file: file}
}

// identity is the config line that makes a Baton sign with this key.
func (k trustID) identity() string { return fmt.Sprintf("identity: {key_file: %q}\n", k.file) }

// line is the key's trust.peers entry, quoted for YAML.
func (k trustID) line() string { return fmt.Sprintf("%q", k.key.Public().String()) }

// newTraceparent returns a fresh sampled traceparent and its trace id.
func newTraceparent(t *testing.T) (traceparent, traceID string) {
	t.Helper()
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b[:16])
	return "00-" + id + "-" + hex.EncodeToString(b[16:]) + "-01", id
}

// trustProblem is a problem document with the reason member of trust
// refusals.
type trustProblem struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
}

func readTrustProblem(t *testing.T, resp *http.Response) trustProblem {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d, Content-Type %q, want application/problem+json; body %s", resp.StatusCode, ct, b)
	}
	var p trustProblem
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("problem body %s: %v", b, err)
	}
	if p.Status != resp.StatusCode {
		t.Errorf("problem status %d != response status %d", p.Status, resp.StatusCode)
	}
	return p
}

// wantRefusal checks a refusal's status, problem type and reason.
func wantRefusal(t *testing.T, resp *http.Response, status int, class problem.Class, reason string) {
	t.Helper()
	if resp.StatusCode != status {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, status, b)
	}
	p := readTrustProblem(t, resp)
	if p.Type != class.Type() {
		t.Errorf("type %q, want %q (detail %q)", p.Type, class.Type(), p.Detail)
	}
	if p.Reason != reason {
		t.Errorf("reason %q, want %q (detail %q)", p.Reason, reason, p.Detail)
	}
}

// receipt waits for the ingress record of traceID on admin and returns it.
func receipt(t *testing.T, admin, traceID string) record.Record {
	t.Helper()
	v := waitTrace(t, admin, traceID, func(v records.TraceView) bool {
		return slices.ContainsFunc(v.Records, func(r record.Record) bool { return r.Side == record.Ingress })
	})
	i := slices.IndexFunc(v.Records, func(r record.Record) bool { return r.Side == record.Ingress })
	return v.Records[i]
}

// captured is a request as a middlebox received it.
type captured struct {
	method, host, uri string
	header            http.Header
	body              []byte
}

// middlebox is a recording reverse proxy between two Batons. It keeps each
// request as it arrived, lets tamper change it, and forwards it with its
// Host unchanged (a proxy that rewrote Host would break every signature).
type middlebox struct {
	*httptest.Server
	tamper func(h http.Header, body []byte) []byte // nil: forward untouched

	mu   sync.Mutex
	reqs []captured
}

func newMiddlebox(t *testing.T, target string, tamper func(http.Header, []byte) []byte) *middlebox {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	m := &middlebox{tamper: tamper}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.Out.Host = pr.In.Host
	}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.reqs = append(m.reqs, captured{method: r.Method, host: r.Host, uri: r.RequestURI,
			header: r.Header.Clone(), body: bytes.Clone(body)})
		m.mu.Unlock()
		if m.tamper != nil {
			body = m.tamper(r.Header, body)
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *middlebox) last(t *testing.T) captured {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reqs) == 0 {
		t.Fatal("nothing passed the middlebox")
	}
	return m.reqs[len(m.reqs)-1]
}

// resend sends c again, byte for byte, to addr.
func (c captured) resend(t *testing.T, addr string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(c.method, "http://"+addr+c.uri, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = c.host
	req.Header = c.header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// signedDirect signs a handoff with k, as a Baton holding k would, at time
// at, claiming agent, and sends it straight to ingress.
func signedDirect(t *testing.T, ingress string, k *trust.Key, agent string, at time.Time) *http.Response {
	t.Helper()
	traceparent, _ := newTraceparent(t)
	body := []byte(`{"task":"summarise"}`)
	req, err := http.NewRequest("POST", "http://"+ingress+"/tasks", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Baton-Agent", agent)
	req.Header.Set("Baton-Hop", "1")
	req.Header.Set("Traceparent", traceparent)
	if err := trust.NewSigner(k).Sign(trust.RequestMessage(req, body), at); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestTrustSignedHandoffDelivers: analyst's Baton signs, summarizer's
// verifies against its bundle and delivers without the signature headers,
// and the receipt names the key. The bundle lists two keys for analyst (a
// rotation in progress): a handoff signed with either is accepted.
func TestTrustSignedHandoffDelivers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oldKey := newTrustID(t, dir, "analyst-2026-01")
	newKey := newTrustID(t, dir, "analyst-2026-02")

	tests := []struct {
		name   string
		bundle []trustID
		signer trustID
	}{
		{name: "the only key in the bundle", bundle: []trustID{oldKey}, signer: oldKey},
		{name: "rotation: the old key of two", bundle: []trustID{oldKey, newKey}, signer: oldKey},
		{name: "rotation: the new key of two", bundle: []trustID{oldKey, newKey}, signer: newKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got seen
			ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
			t.Cleanup(ag.Close)
			lines := make([]string, len(tc.bundle))
			for i, k := range tc.bundle {
				lines[i] = k.line()
			}
			b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n"+
				"trust: {peers: {analyst: ["+strings.Join(lines, ", ")+"]}}\nedges: [{from: analyst}]\n", nil)
			// A proxy between the Batons that keeps Host shows what is on the wire.
			box := newMiddlebox(t, "http://"+b.IngressAddr(), nil)
			a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+tc.signer.identity()+
				"peers: {summarizer: {url: "+box.URL+"}}\nedges: [{to: summarizer}]\n", nil)

			traceparent, traceID := newTraceparent(t)
			resp := send(t, a.EgressAddr(), "summarizer", "POST", "/tasks", `{"task":"summarise"}`,
				http.Header{"Traceparent": {traceparent}, "Content-Type": {"application/json"}})
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}

			wire := box.last(t)
			if in := wire.header.Get("Signature-Input"); !strings.Contains(in, `keyid="`+tc.signer.key.ID()+`"`) {
				t.Errorf("Signature-Input on the wire %q does not name key %s", in, tc.signer.key.ID())
			}
			if wire.header.Get("Signature") == "" || wire.header.Get("Content-Digest") != trust.ContentDigest(wire.body) {
				t.Errorf("on the wire: Signature %q, Content-Digest %q", wire.header.Get("Signature"), wire.header.Get("Content-Digest"))
			}

			r := got.last(t)
			for _, h := range []string{"Signature", "Signature-Input"} {
				if v := r.Header.Values(h); len(v) != 0 {
					t.Errorf("the agent saw %s: %q", h, v)
				}
			}
			if r.Header.Get("Baton-Agent") != "analyst" {
				t.Errorf("Baton-Agent %q", r.Header.Get("Baton-Agent"))
			}

			rec := receipt(t, b.AdminAddr(), traceID)
			if rec.SenderKeyID != tc.signer.key.ID() {
				t.Errorf("receipt sender_key_id %q, want %q", rec.SenderKeyID, tc.signer.key.ID())
			}
			if !slices.Contains(rec.Trust, "posture=evaluate") {
				t.Errorf("receipt trust %q, want posture=evaluate (the default for a signed handoff)", rec.Trust)
			}
		})
	}
}

// trustRig is analyst's Baton → middlebox → summarizer's Baton → agent.
type trustRig struct {
	analyst, summarizer *baton
	box                 *middlebox
	agent               *seen
	known               trustID // analyst's key, in summarizer's bundle
	stranger            trustID // a key named for analyst, in no bundle
}

// TestTrustRefusalsAtReceiver: every signature failure is 401 bad-signature
// with its reason, and the agent sees nothing.
func TestTrustRefusalsAtReceiver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	known := newTrustID(t, dir, "analyst-1")
	stranger := newTrustID(t, dir, "analyst-stolen")

	viaEgress := func(t *testing.T, r *trustRig) *http.Response {
		traceparent, _ := newTraceparent(t)
		return send(t, r.analyst.EgressAddr(), "summarizer", "POST", "/tasks", `{"task":"summarise"}`,
			http.Header{"Traceparent": {traceparent}, "Content-Type": {"application/json"}})
	}
	tests := []struct {
		name string
		// signer is analyst's Baton's key: "known", "stranger" or "" (none).
		signer    string
		tamper    func(h http.Header, body []byte) []byte
		attack    func(t *testing.T, r *trustRig) *http.Response // nil: viaEgress
		receiver  string                                         // extra config of summarizer's Baton
		reason    string
		delivered int // handoffs the agent saw (the replay's original)
	}{
		{name: "unsigned from an agent the bundle knows", reason: trust.ReasonMissing},
		{
			name: "forged Baton-Agent straight to the ingress",
			attack: func(t *testing.T, r *trustRig) *http.Response {
				traceparent, _ := newTraceparent(t)
				return send(t, r.summarizer.IngressAddr(), r.summarizer.IngressAddr(), "POST", "/tasks", `{"task":"x"}`,
					http.Header{"Baton-Agent": {"analyst"}, "Baton-Hop": {"1"}, "Traceparent": {traceparent}})
			},
			reason: trust.ReasonMissing,
		},
		{name: "signed by a key not in the bundle", signer: "stranger", reason: trust.ReasonUnknownKey},
		{
			name:   "the same signed request replayed",
			signer: "known",
			attack: func(t *testing.T, r *trustRig) *http.Response {
				if resp := viaEgress(t, r); resp.StatusCode != 200 {
					t.Fatalf("the original: status %d", resp.StatusCode)
				}
				return r.box.last(t).resend(t, r.summarizer.IngressAddr())
			},
			reason:    middleware.ReasonReplayed,
			delivered: 1,
		},
		{
			name:     "the same signed request replayed, on an edge without dedupe",
			signer:   "known",
			receiver: "dedupe: {enabled: false}\n",
			attack: func(t *testing.T, r *trustRig) *http.Response {
				if resp := viaEgress(t, r); resp.StatusCode != 200 {
					t.Fatalf("the original: status %d", resp.StatusCode)
				}
				return r.box.last(t).resend(t, r.summarizer.IngressAddr())
			},
			reason:    middleware.ReasonReplayed,
			delivered: 1,
		},
		{
			name:   "body changed in transit",
			signer: "known",
			tamper: func(_ http.Header, body []byte) []byte {
				return bytes.Replace(body, []byte("summarise"), []byte("delete all"), 1)
			},
			reason: trust.ReasonDigestMismatch,
		},
		{
			name:   "covered header changed in transit",
			signer: "known",
			tamper: func(h http.Header, body []byte) []byte {
				h.Set("Baton-Hop", "2")
				return body
			},
			reason: trust.ReasonBadSignature,
		},
		{
			name: "signed an hour ago",
			attack: func(t *testing.T, r *trustRig) *http.Response {
				return signedDirect(t, r.summarizer.IngressAddr(), r.known.key, "analyst", time.Now().Add(-time.Hour))
			},
			reason: trust.ReasonExpired,
		},
		{
			name: "analyst's key claiming another agent",
			attack: func(t *testing.T, r *trustRig) *http.Response {
				return signedDirect(t, r.summarizer.IngressAddr(), r.known.key, "reviewer", time.Now())
			},
			reason: trust.ReasonAgentMismatch,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &trustRig{agent: &seen{}, known: known, stranger: stranger}
			ag := httptest.NewServer(r.agent.handler(200, `{"ok":true}`))
			t.Cleanup(ag.Close)
			r.summarizer = startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n"+
				"trust: {peers: {analyst: ["+known.line()+"]}}\nedges: [{from: analyst}, {from: reviewer}]\n"+tc.receiver, nil)
			r.box = newMiddlebox(t, "http://"+r.summarizer.IngressAddr(), tc.tamper)
			id := ""
			switch tc.signer {
			case "known":
				id = known.identity()
			case "stranger":
				id = stranger.identity()
			}
			// analyst's Baton has no bundle, so its edge does not require
			// a signature: unsigned handoffs leave and the receiver decides.
			r.analyst = startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+id+
				"peers: {summarizer: {url: "+r.box.URL+"}}\nedges: [{to: summarizer}]\n", nil)

			attack := tc.attack
			if attack == nil {
				attack = viaEgress
			}
			wantRefusal(t, attack(t, r), http.StatusUnauthorized, problem.BadSignature, tc.reason)
			if n := r.agent.count(); n != tc.delivered {
				t.Errorf("the agent saw %d handoffs, want %d", n, tc.delivered)
			}
		})
	}
}

var errClaimOutage = errors.New("store unreachable (test outage)")

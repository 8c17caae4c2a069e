package proxy_test

// End-to-end tests of signed identity, edge policy, grants, uncorrelated
// handoffs and the admin token, through real Batons on loopback.

import (
	"bytes"
	"context"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
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

// TestTrustEdgePolicy: once edges are configured, an edge that is not
// listed is refused at whichever end checks it, and an unsigned handoff an
// edge lets through is taken as untrusted.
func TestTrustEdgePolicy(t *testing.T) {
	t.Parallel()
	analystKey := newTrustID(t, t.TempDir(), "analyst-1")

	tests := []struct {
		name string
		// The sender, analyst: signs or not, and its edges.
		signs       bool
		senderEdges string
		// The receiver, summarizer: a bundle listing analyst or not, and
		// its edges.
		bundle        bool
		receiverEdges string
		host          string // the peer the agent hands off to
		status        int
		class         problem.Class
		reason        string
		posture       string // in the receipt, when delivered
	}{
		{
			name: "outbound to a peer without a to edge", senderEdges: "[{to: summarizer}]", host: "reviewer",
			status: 403, class: problem.PolicyDenied, reason: trust.DecisionNoEdge,
		},
		{
			name: "outbound unsigned on an edge requiring a signature", senderEdges: "[{to: summarizer, require_signature: true}]",
			host: "summarizer", status: 403, class: problem.PolicyDenied, reason: trust.DecisionUnsigned,
		},
		{
			name: "inbound from a sender without a from edge", receiverEdges: "[{from: reviewer}]", host: "summarizer",
			status: 403, class: problem.PolicyDenied, reason: trust.DecisionNoEdge,
		},
		{
			name: "inbound unsigned where the bundle requires a signature", bundle: true, receiverEdges: "[{from: analyst}]",
			host: "summarizer", status: 401, class: problem.BadSignature, reason: trust.ReasonMissing,
		},
		{
			name: "inbound unsigned on require_signature false", bundle: true,
			receiverEdges: "[{from: analyst, require_signature: false, posture: trusted}]", host: "summarizer",
			status: 200, posture: "posture=untrusted",
		},
		{
			name: "inbound signed on a trusted edge", signs: true, bundle: true,
			receiverEdges: "[{from: analyst, posture: trusted}]", host: "summarizer",
			status: 200, posture: "posture=trusted",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got seen
			ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
			t.Cleanup(ag.Close)
			recv := "agent: summarizer\nupstream: " + ag.URL + "\n"
			if tc.bundle {
				recv += "trust: {peers: {analyst: [" + analystKey.line() + "]}}\n"
			}
			if tc.receiverEdges != "" {
				recv += "edges: " + tc.receiverEdges + "\n"
			}
			b := startBaton(t, recv, nil)
			// reviewer is a configured peer at a closed address: a handoff
			// that left would be 502, not 403.
			send := "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://" + b.IngressAddr() +
				"}, reviewer: {url: http://" + closedAddr(t) + "}}\n"
			if tc.signs {
				send += analystKey.identity()
			}
			if tc.senderEdges != "" {
				send += "edges: " + tc.senderEdges + "\n"
			}
			a := startBaton(t, send, nil)

			traceparent, traceID := newTraceparent(t)
			resp := sendHandoff(t, a.EgressAddr(), tc.host, traceparent)
			if tc.status != 200 {
				wantRefusal(t, resp, tc.status, tc.class, tc.reason)
				if n := got.count(); n != 0 {
					t.Errorf("the agent saw %d handoffs, want none", n)
				}
				return
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if rec := receipt(t, b.AdminAddr(), traceID); !slices.Contains(rec.Trust, tc.posture) {
				t.Errorf("receipt trust %q, want %s", rec.Trust, tc.posture)
			}
		})
	}
}

// sendHandoff is an agent's POST to peer through egress, in the trace of
// traceparent ("" for none).
func sendHandoff(t *testing.T, egress, peer, traceparent string) *http.Response {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}}
	if traceparent != "" {
		hdr.Set("Traceparent", traceparent)
	}
	return send(t, egress, peer, "POST", "/tasks", `{"task":"summarise"}`, hdr)
}

// TestTrustGrantsNarrowAlongAChain: analyst → summarizer → reviewer →
// auditor, all signed. Each agent forwards the traceparent it received, as
// agents in one trace do. The grant each agent receives is the intersection
// of what its sender received and what the sender's edge declares, and an
// agent cannot hand off beyond it.
func TestTrustGrantsNarrowAlongAChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	analystKey := newTrustID(t, dir, "analyst-1")
	summarizerKey := newTrustID(t, dir, "summarizer-1")
	reviewerKey := newTrustID(t, dir, "reviewer-1")

	agents := map[string]*seen{"summarizer": {}, "reviewer": {}, "auditor": {}}
	upstream := map[string]string{}
	for name, s := range agents {
		srv := httptest.NewServer(s.handler(200, `{"ok":true}`))
		t.Cleanup(srv.Close)
		upstream[name] = srv.URL
	}
	auditor := startBaton(t, "agent: auditor\nupstream: "+upstream["auditor"]+"\n"+
		"trust: {peers: {reviewer: ["+reviewerKey.line()+"]}}\nedges: [{from: reviewer}]\n", nil)
	reviewer := startBaton(t, "agent: reviewer\nupstream: "+upstream["reviewer"]+"\n"+reviewerKey.identity()+
		"trust: {peers: {summarizer: ["+summarizerKey.line()+"]}}\n"+
		"peers: {auditor: {url: http://"+auditor.IngressAddr()+"}}\n"+
		// reviewer's own edge declares more than reviewer received: it
		// cannot widen the grant.
		"edges: [{from: summarizer}, {to: auditor, grant: {may_handoff_to: [auditor, publisher], side_effects: [read, write]}}]\n", nil)
	// publisher is configured, with an edge, but outside every grant; it is
	// at a closed address, so a handoff that left would be 502.
	summarizer := startBaton(t, "agent: summarizer\nupstream: "+upstream["summarizer"]+"\n"+summarizerKey.identity()+
		"trust: {peers: {analyst: ["+analystKey.line()+"]}, uncorrelated: deny}\n"+
		"peers: {reviewer: {url: http://"+reviewer.IngressAddr()+"}, publisher: {url: http://"+closedAddr(t)+"}}\n"+
		"edges: [{from: analyst}, {to: reviewer, grant: {may_handoff_to: [auditor], side_effects: [read]}}, {to: publisher}]\n", nil)
	analyst := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+analystKey.identity()+
		"peers: {summarizer: {url: http://"+summarizer.IngressAddr()+"}}\n"+
		"edges: [{to: summarizer, grant: {may_handoff_to: [reviewer, auditor], side_effects: [read, write]}}]\n", nil)
	traceparent, traceID := newTraceparent(t)

	// received returns the traceparent the agent last got, checking the
	// grant that came with it.
	received := func(t *testing.T, agent string, want trust.Grant) string {
		t.Helper()
		r := agents[agent].last(t)
		enc := r.Header.Get("Baton-Grant")
		g, err := trust.DecodeGrant(enc)
		if err != nil {
			t.Fatalf("%s's Baton-Grant %q: %v", agent, enc, err)
		}
		slices.Sort(g.MayHandoffTo)
		slices.Sort(g.SideEffects)
		if !slices.Equal(g.MayHandoffTo, want.MayHandoffTo) || !slices.Equal(g.SideEffects, want.SideEffects) {
			t.Errorf("%s received grant %+v, want %+v", agent, g, want)
		}
		return r.Header.Get("Traceparent")
	}

	// The steps depend on each other (each forwards what the last
	// delivered), so they run in order.
	steps := []struct {
		name   string
		from   *baton
		peer   string
		parent func(t *testing.T) string // the traceparent the agent sends
		// forged is a Baton-Grant the agent sets itself, to widen its grant.
		forged string
		status int
		reason string
		// receiver and grant: the agent that gets the handoff and the grant
		// it must see.
		receiver string
		grant    trust.Grant
	}{
		{
			name: "analyst to summarizer", from: analyst, peer: "summarizer",
			parent: func(*testing.T) string { return traceparent }, status: 200,
			receiver: "summarizer", grant: trust.Grant{MayHandoffTo: []string{"auditor", "reviewer"}, SideEffects: []string{"read", "write"}},
		},
		{
			name: "summarizer to reviewer", from: summarizer, peer: "reviewer",
			parent: func(t *testing.T) string {
				return received(t, "summarizer", trust.Grant{MayHandoffTo: []string{"auditor", "reviewer"}, SideEffects: []string{"read", "write"}})
			},
			status: 200, receiver: "reviewer", grant: trust.Grant{MayHandoffTo: []string{"auditor"}, SideEffects: []string{"read"}},
		},
		{
			name: "reviewer to auditor", from: reviewer, peer: "auditor",
			parent: func(t *testing.T) string {
				return received(t, "reviewer", trust.Grant{MayHandoffTo: []string{"auditor"}, SideEffects: []string{"read"}})
			},
			status: 200, receiver: "auditor", grant: trust.Grant{MayHandoffTo: []string{"auditor"}, SideEffects: []string{"read"}},
		},
		{
			name: "summarizer escalates to a peer outside its grant", from: summarizer, peer: "publisher",
			parent: func(t *testing.T) string { return agents["summarizer"].last(t).Header.Get("Traceparent") },
			status: 403, reason: trust.DecisionNotGranted,
		},
		{
			name: "summarizer escalates with a Baton-Grant of its own", from: summarizer, peer: "publisher",
			parent: func(t *testing.T) string { return agents["summarizer"].last(t).Header.Get("Traceparent") },
			forged: mustEncodeGrant(t, trust.Grant{MayHandoffTo: []string{"publisher"}, SideEffects: []string{"write"}}),
			status: 403, reason: trust.DecisionNotGranted,
		},
	}
	for _, st := range steps {
		if !t.Run(st.name, func(t *testing.T) {
			hdr := http.Header{"Traceparent": {st.parent(t)}, "Content-Type": {"application/json"}}
			if st.forged != "" {
				hdr.Set("Baton-Grant", st.forged)
			}
			before := 0
			if st.receiver != "" {
				before = agents[st.receiver].count()
			}
			resp := send(t, st.from.EgressAddr(), st.peer, "POST", "/tasks", `{"task":"review"}`, hdr)
			if st.status != 200 {
				wantRefusal(t, resp, st.status, problem.PolicyDenied, st.reason)
				return
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if n := agents[st.receiver].count(); n != before+1 {
				t.Fatalf("%s saw %d handoffs, want %d", st.receiver, n, before+1)
			}
			received(t, st.receiver, st.grant)
		}) {
			t.FailNow()
		}
	}

	// The receipts keep the grant as received and the key that signed it.
	rec := receipt(t, reviewer.AdminAddr(), traceID)
	if g, err := trust.DecodeGrant(rec.Grant); err != nil || !slices.Equal(g.MayHandoffTo, []string{"auditor"}) {
		t.Errorf("reviewer's receipt grant %q (%v), want {auditor}/{read}", rec.Grant, err)
	}
	if rec.SenderKeyID != summarizerKey.key.ID() {
		t.Errorf("reviewer's receipt sender_key_id %q, want %q", rec.SenderKeyID, summarizerKey.key.ID())
	}
}

func mustEncodeGrant(t *testing.T, g trust.Grant) string {
	t.Helper()
	s, err := trust.EncodeGrant(g)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTrustUncorrelated: summarizer's agent hands off to reviewer. Only a
// traceparent of a handoff summarizer's Baton delivered ties the handoff to
// a trace; with trust.uncorrelated: deny any other is refused before it
// leaves, with allow it passes and is recorded as uncorrelated.
func TestTrustUncorrelated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		uncorrelated string
		parent       string // "none", "unseen" or "delivered": the traceparent the agent sends
		status       int
	}{
		{name: "deny without a traceparent", uncorrelated: "deny", parent: "none", status: 403},
		{name: "deny with a traceparent Baton never saw", uncorrelated: "deny", parent: "unseen", status: 403},
		{name: "deny with the traceparent of a delivered handoff", uncorrelated: "deny", parent: "delivered", status: 200},
		{name: "allow without a traceparent", uncorrelated: "allow", parent: "none", status: 200},
		{name: "default (allow) with a traceparent Baton never saw", parent: "unseen", status: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var atSummarizer, atReviewer seen
			sag := httptest.NewServer(atSummarizer.handler(200, `{"ok":true}`))
			t.Cleanup(sag.Close)
			rag := httptest.NewServer(atReviewer.handler(200, `{"ok":true}`))
			t.Cleanup(rag.Close)
			reviewer := startBaton(t, "agent: reviewer\nupstream: "+rag.URL+"\n", nil)
			cfg := "agent: summarizer\nupstream: " + sag.URL + "\npeers: {reviewer: {url: http://" + reviewer.IngressAddr() + "}}\n"
			if tc.uncorrelated != "" {
				cfg += "trust: {uncorrelated: " + tc.uncorrelated + "}\n"
			}
			summarizer := startBaton(t, cfg, nil)

			parent := ""
			switch tc.parent {
			case "unseen":
				parent, _ = newTraceparent(t)
			case "delivered":
				analyst := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
					summarizer.IngressAddr()+"}}\n", nil)
				first, _ := newTraceparent(t)
				if resp := sendHandoff(t, analyst.EgressAddr(), "summarizer", first); resp.StatusCode != 200 {
					t.Fatalf("analyst → summarizer: status %d", resp.StatusCode)
				}
				parent = atSummarizer.last(t).Header.Get("Traceparent")
			}
			resp := sendHandoff(t, summarizer.EgressAddr(), "reviewer", parent)
			if tc.status != 200 {
				wantRefusal(t, resp, tc.status, problem.PolicyDenied, "uncorrelated")
				if n := atReviewer.count(); n != 0 {
					t.Errorf("reviewer's agent saw %d handoffs, want none", n)
				}
				return
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			// The delegation record says whether Baton could tie it to a trace.
			m := traceparentRE.FindStringSubmatch(atReviewer.last(t).Header.Get("Traceparent"))
			if m == nil {
				t.Fatal("reviewer's agent got no traceparent")
			}
			v := waitTrace(t, summarizer.AdminAddr(), m[1], func(v records.TraceView) bool {
				return slices.ContainsFunc(v.Records, func(r record.Record) bool {
					return r.Side == record.Egress && r.State == record.Delivered
				})
			})
			i := slices.IndexFunc(v.Records, func(r record.Record) bool { return r.Side == record.Egress })
			if got, want := slices.Contains(v.Records[i].Trust, "uncorrelated"), tc.parent != "delivered"; got != want {
				t.Errorf("delegation record trust %q: uncorrelated %v, want %v", v.Records[i].Trust, got, want)
			}
		})
	}
}

// TestTrustAdminToken: with admin_token set the records API needs the
// bearer token; the health probes stay open.
func TestTrustAdminToken(t *testing.T) {
	t.Parallel()
	const token = "s3cret-admin-token"
	var got seen
	ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\nadmin_token: "+token+"\n", nil)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\n", nil)
	traceparent, traceID := newTraceparent(t)
	if resp := sendHandoff(t, a.EgressAddr(), "summarizer", traceparent); resp.StatusCode != 200 {
		t.Fatalf("handoff: status %d", resp.StatusCode)
	}
	get := func(t *testing.T, path, auth string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+b.AdminAddr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	// The receipt is written off the request path: wait for it, with the token.
	for deadline := time.Now().Add(5 * time.Second); ; {
		resp := get(t, "/v1/traces/"+traceID, "Bearer "+token)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the receipt was never written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	unknown, _ := newTraceparent(t)
	unknownID := unknown[3:35]

	tests := []struct {
		name   string
		path   string
		auth   string
		status int
		class  problem.Class // for a problem answer
	}{
		{name: "trace without a token", path: "/v1/traces/" + traceID, status: 401, class: problem.Unauthorized},
		{name: "trace with a wrong token", path: "/v1/traces/" + traceID, auth: "Bearer wrong", status: 401, class: problem.Unauthorized},
		{name: "trace with the token but no scheme", path: "/v1/traces/" + traceID, auth: token, status: 401, class: problem.Unauthorized},
		{name: "dead letters without a token", path: "/v1/deadletters", status: 401, class: problem.Unauthorized},
		{name: "trace with the token", path: "/v1/traces/" + traceID, auth: "Bearer " + token, status: 200},
		{name: "unknown trace with the token", path: "/v1/traces/" + unknownID, auth: "Bearer " + token, status: 404, class: problem.NotFound},
		{name: "healthz without a token", path: "/healthz", status: 200},
		{name: "readyz without a token", path: "/readyz", status: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := get(t, tc.path, tc.auth)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.class != "" {
				if p := readTrustProblem(t, resp); p.Type != tc.class.Type() {
					t.Errorf("type %q, want %q", p.Type, tc.class.Type())
				}
			}
			if tc.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge", resp.Header.Get("WWW-Authenticate"))
			}
			if tc.status == 200 && strings.HasPrefix(tc.path, "/v1/traces/") {
				var v records.TraceView
				if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.TraceID != traceID || len(v.Records) == 0 {
					t.Errorf("trace view %+v (%v)", v, err)
				}
			}
		})
	}
}

// TestTrustGrantSurvivesLaterInboundHandoffs: summarizer received a signed
// handoff granting {reviewer}/{read}. A second, unsigned handoff in the same
// trace (an edge with require_signature: false lets it in, as untrusted)
// must not widen that grant: its Baton-Grant is not authenticated by
// anything.
func TestTrustGrantSurvivesLaterInboundHandoffs(t *testing.T) {
	t.Parallel()
	analystKey := newTrustID(t, t.TempDir(), "analyst-1")

	tests := []struct {
		name  string
		grant *trust.Grant // the second handoff's Baton-Grant; nil: none
	}{
		{name: "unsigned, without a Baton-Grant"},
		{name: "unsigned, with a wider Baton-Grant", grant: &trust.Grant{MayHandoffTo: []string{"publisher"}, SideEffects: []string{"write"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got seen
			ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
			t.Cleanup(ag.Close)
			// publisher is at a closed address: a handoff that left would be 502.
			summarizer := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n"+
				"trust: {peers: {analyst: ["+analystKey.line()+"]}}\n"+
				"peers: {publisher: {url: http://"+closedAddr(t)+"}}\n"+
				"edges: [{from: analyst}, {from: planner, require_signature: false}, {to: publisher, require_signature: false}]\n", nil)
			analyst := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+analystKey.identity()+
				"peers: {summarizer: {url: http://"+summarizer.IngressAddr()+"}}\n"+
				"edges: [{to: summarizer, grant: {may_handoff_to: [reviewer], side_effects: [read]}}]\n", nil)

			traceparent, traceID := newTraceparent(t)
			if resp := sendHandoff(t, analyst.EgressAddr(), "summarizer", traceparent); resp.StatusCode != 200 {
				t.Fatalf("analyst → summarizer: status %d", resp.StatusCode)
			}
			inTrace := got.last(t).Header.Get("Traceparent")

			// The second handoff, straight to the ingress, in the same trace.
			hdr := http.Header{"Baton-Agent": {"planner"}, "Baton-Hop": {"1"},
				"Traceparent": {"00-" + traceID + "-1111111111111111-01"}}
			if tc.grant != nil {
				hdr.Set("Baton-Grant", mustEncodeGrant(t, *tc.grant))
			}
			if resp := send(t, summarizer.IngressAddr(), summarizer.IngressAddr(), "POST", "/tasks", `{"task":"publish"}`, hdr); resp.StatusCode != 200 {
				t.Fatalf("planner → summarizer (unsigned): status %d", resp.StatusCode)
			}

			resp := sendHandoff(t, summarizer.EgressAddr(), "publisher", inTrace)
			wantRefusal(t, resp, http.StatusForbidden, problem.PolicyDenied, trust.DecisionNotGranted)
		})
	}
}

// claimOutage is a store whose claims fail while down is set, as a Redis
// that stopped answering would.
type claimOutage struct {
	state.Store
	down atomic.Bool
}

var errClaimOutage = errors.New("store unreachable (test outage)")

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

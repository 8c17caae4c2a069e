package proxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/trust/mtls"
)

// tlsFiles writes a certificate for id from ca, valid from nb to na, its
// key and bundle (the CA trusted, which need not be the issuer) into dir,
// and returns the tls block naming them.
func tlsFiles(t *testing.T, dir string, issuer, trusted *mtls.CA, id mtls.ID, nb, na time.Time) string {
	t.Helper()
	cert, key, err := issuer.IssueID(id, nb, na)
	if err != nil {
		t.Fatal(err)
	}
	bundle, _, _ := trusted.PEM()
	base := filepath.Join(dir, id.Agent())
	for f, b := range map[string][]byte{base + ".pem": cert, base + "-key.pem": key, base + "-ca.pem": bundle} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("tls: {cert_file: %s.pem, key_file: %s-key.pem, ca_file: %s-ca.pem, trust_domain: example.org, reload: 1s}\n", base, base, base)
}

type tlsWorld struct {
	dir       string
	ca, other *mtls.CA
	now       time.Time
}

func newTLSWorld(t *testing.T) *tlsWorld {
	ca, err := mtls.NewCA("example.org", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := mtls.NewCA("example.org", 24*time.Hour)
	return &tlsWorld{dir: t.TempDir(), ca: ca, other: other, now: time.Now()}
}

// good is a valid certificate for agent from the world's CA.
func (w *tlsWorld) good(t *testing.T, agent string) string {
	return tlsFiles(t, w.dir, w.ca, w.ca, mtls.IDFor("example.org", agent), w.now.Add(-time.Minute), w.now.Add(time.Hour))
}

// receiver is an agent behind a TLS Baton.
func (w *tlsWorld) receiver(t *testing.T, name, tlsBlock string) (*baton, *headerAgent) {
	ag := &headerAgent{}
	srv := httptest.NewServer(ag)
	t.Cleanup(srv.Close)
	return startBatonWith(t, "agent: "+name+"\nupstream: "+srv.URL+"\n"+tlsBlock, nil, withMetrics(t)), ag
}

// TestMutualTLS hands off between two Batons over mutual TLS: delivered,
// the receipt labelled with the sender's SPIFFE ID; a plaintext client to
// the TLS ingress is answered 400.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	w := newTLSWorld(t)
	bB, b := w.receiver(t, "b", w.good(t, "b"))
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+w.good(t, "a")+
		"peers: {b: {url: https://"+bB.IngressAddr()+"}}\n", nil, withMetrics(t))
	resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/tasks", `{"n":1}`, http.Header{"Traceparent": {tp}})
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || len(b.bodies) != 1 {
		t.Fatalf("over mutual TLS: %d %s, b got %d", resp.StatusCode, body, len(b.bodies))
	}
	rec := receipt(t, bB.AdminAddr(), tp[3:35])
	if !strings.Contains(strings.Join(rec.Trust, " "), "tls=spiffe://example.org/agent/a") {
		t.Fatalf("b's receipt trust %q, want the TLS identity of a", rec.Trust)
	}
	plain, err := http.Post("http://"+bB.IngressAddr()+"/tasks", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	plain.Body.Close()
	if plain.StatusCode != http.StatusBadRequest || len(b.bodies) != 1 {
		t.Fatalf("plaintext to the TLS ingress: %d, b got %d; want 400 and nothing delivered", plain.StatusCode, len(b.bodies))
	}
	if v, _ := scrapeMetrics(t, bB.AdminAddr()).value("baton_tls_cert_expiry_timestamp_seconds", map[string]string{"id": "spiffe://example.org/agent/b"}); v != float64(w.now.Add(time.Hour).Unix()) {
		t.Errorf("b's baton_tls_cert_expiry_timestamp_seconds = %v, want %d", v, w.now.Add(time.Hour).Unix())
	}
	for who, bt := range map[string]*baton{"a": aB, "b": bB} {
		side := map[string]string{"a": "egress", "b": "ingress"}[who]
		if v, _ := scrapeMetrics(t, bt.AdminAddr()).value("baton_tls_handshakes_total", map[string]string{"side": side, "result": "ok"}); v < 1 {
			t.Errorf("%s's baton_tls_handshakes_total{side=%s,result=ok} = %v", who, side, v)
		}
	}
}

// TestMutualTLSRefusals: a client certificate of another CA, an expired
// server certificate, and a peer presenting another agent's identity are
// each refused in the handshake, the handoff a dead letter whose record
// says why; a client whose certificate contradicts its Baton-Agent is
// refused 403 with a receipt.
func TestMutualTLSRefusals(t *testing.T) {
	t.Parallel()
	w := newTLSWorld(t)
	cases := []struct {
		name, aTLS, bTLS string
		refuser, reason  string // which side refuses, and its metric's reason
		detail           string // what a's answer says (a refusing)
		peerIsC          bool
	}{
		{"a client of another CA", tlsFiles(t, t.TempDir(), w.other, w.ca, mtls.IDFor("example.org", "a"), w.now.Add(-time.Minute), w.now.Add(time.Hour)),
			w.good(t, "b"), "ingress", "unknown-authority", "", false},
		{"an expired server certificate", w.good(t, "a"),
			tlsFiles(t, t.TempDir(), w.ca, w.ca, mtls.IDFor("example.org", "b"), w.now.Add(-2*time.Hour), w.now.Add(-time.Hour)),
			"egress", "expired", "certificate has expired", false},
		{"a peer with another agent's identity", w.good(t, "a"), w.good(t, "c"),
			"egress", "wrong-identity", "presented spiffe://example.org/agent/c, the identity of agent c", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			name := "b"
			if c.peerIsC {
				name = "c"
			}
			bB, b := w.receiver(t, name, c.bTLS)
			aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+c.aTLS+
				"peers: {b: {url: https://"+bB.IngressAddr()+"}}\nretry: {attempts: 1}\n", nil, withMetrics(t))
			resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/tasks", `{}`, nil)
			var p struct {
				Detail   string `json:"detail"`
				RecordID string `json:"record_id"`
			}
			decodeBody(t, resp, &p)
			if resp.StatusCode != http.StatusBadGateway || p.RecordID == "" || len(b.bodies) != 0 ||
				c.detail != "" && (!strings.Contains(p.Detail, "the TLS handshake failed: ") || !strings.Contains(p.Detail, c.detail)) {
				t.Fatalf("%d %+v, delivered %d; want 502 naming the TLS refusal (%q) and its dead letter", resp.StatusCode, p, len(b.bodies), c.detail)
			}
			// With TLS 1.3 a client learns its certificate was refused on its
			// first write or read, as an alert or a broken connection: the
			// refusing side's count says why.
			refuser := map[string]*baton{"egress": aB, "ingress": bB}[c.refuser]
			want := map[string]string{"side": c.refuser, "result": "failed", "reason": c.reason}
			if v, _ := scrapeMetrics(t, refuser.AdminAddr()).value("baton_tls_handshakes_total", want); v < 1 {
				t.Errorf("baton_tls_handshakes_total%v = %v, want at least 1", want, v)
			}
			if rec := adminRecord(t, aB.AdminAddr(), p.RecordID); rec.State != "dead" || rec.Error == "" {
				t.Fatalf("the dead letter: %s %q", rec.State, rec.Error)
			}
		})
	}

	t.Run("a certificate contradicting Baton-Agent", func(t *testing.T) {
		t.Parallel()
		bB, b := w.receiver(t, "b", w.good(t, "b"))
		cert, key, _ := w.ca.Issue("x", w.now.Add(-time.Minute), w.now.Add(time.Hour))
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(w.ca.Cert)
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{pair}, RootCAs: roots, InsecureSkipVerify: true}}}
		req, _ := http.NewRequest(http.MethodPost, "https://"+bB.IngressAddr()+"/tasks", strings.NewReader(`{}`))
		req.Header.Set("Baton-Agent", "a")
		req.Header.Set("Traceparent", "00-abababababababababababababababab-b7ad6b7169203331-01")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if p := readProblem(t, resp); resp.StatusCode != http.StatusForbidden || !strings.HasSuffix(p.Type, "#tls-identity-mismatch") || len(b.bodies) != 0 {
			t.Fatalf("%d %+v; want 403 tls-identity-mismatch and nothing delivered", resp.StatusCode, p)
		}
		rec := receipt(t, bB.AdminAddr(), "abababababababababababababababab")
		if rec.State != "failed" || !strings.Contains(strings.Join(rec.Trust, " "), "tls=spiffe://example.org/agent/x") {
			t.Fatalf("the receipt: %s, trust %q", rec.State, rec.Trust)
		}
	})
}

// TestMutualTLSRotation rewrites b's certificate and key in place while a
// hands off to b from four goroutines: no handoff fails, and a new
// connection is served the new certificate.
func TestMutualTLSRotation(t *testing.T) {
	t.Parallel()
	w := newTLSWorld(t)
	bTLS := w.good(t, "b")
	bB, b := w.receiver(t, "b", bTLS)
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+w.good(t, "a")+
		"peers: {b: {url: https://"+bB.IngressAddr()+"}}\n", nil, nil)
	var failed, sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, "http://"+aB.EgressAddr()+"/tasks", strings.NewReader(`{}`))
				req.Host = "b"
				resp, err := client.Do(req)
				sent.Add(1)
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	later := w.now.Add(48 * time.Hour)
	tlsFiles(t, w.dir, w.ca, w.ca, mtls.IDFor("example.org", "b"), w.now.Add(-time.Minute), later)
	roots := x509.NewCertPool()
	roots.AddCert(w.ca.Cert)
	eventually(t, "b serving the new certificate", func() bool {
		cert, key, _ := w.ca.Issue("probe", w.now.Add(-time.Minute), w.now.Add(time.Hour))
		pair, _ := tls.X509KeyPair(cert, key)
		c, err := tls.Dial("tcp", bB.IngressAddr(), &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true})
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].NotAfter.Unix() == later.Unix()
	})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || sent.Load() < 8 {
		t.Fatalf("%d of %d handoffs failed during the rotation", failed.Load(), sent.Load())
	}
	_ = b
}

// tlsScrape is the metrics of a Baton that received a handoff over mutual
// TLS and reloaded its certificate once: what the dashboards and docs must
// cover besides the plain scenario's series.
func tlsScrape(t *testing.T) scrape {
	t.Helper()
	w := newTLSWorld(t)
	bB, _ := w.receiver(t, "b", w.good(t, "b"))
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+w.good(t, "a")+
		"peers: {b: {url: https://"+bB.IngressAddr()+"}}\n", nil, nil)
	if resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/tasks", `{}`, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("over mutual TLS: %d", resp.StatusCode)
	}
	w.good(t, "b") // rewritten: b reloads it
	var s scrape
	eventually(t, "b's certificate reloaded", func() bool {
		s = scrapeMetrics(t, bB.AdminAddr())
		v, _ := s.value("baton_tls_reloads_total", map[string]string{"result": "ok"})
		return v >= 1
	})
	return s
}

// TestMutualTLSClientCertRequest: with client_cert: request, a TLS client
// without a certificate is served (its handoff carries no TLS identity),
// and one with a certificate of another CA is still refused.
func TestMutualTLSClientCertRequest(t *testing.T) {
	t.Parallel()
	w := newTLSWorld(t)
	block := strings.Replace(w.good(t, "b"), "reload: 1s}", "reload: 1s, client_cert: request}", 1)
	bB, b := w.receiver(t, "b", block)
	roots := x509.NewCertPool()
	roots.AddCert(w.ca.Cert)
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, InsecureSkipVerify: true}}}
	resp, err := anon.Post("https://"+bB.IngressAddr()+"/tasks", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b.bodies) != 1 {
		t.Fatalf("a client without a certificate: %d, delivered %d; want 200", resp.StatusCode, len(b.bodies))
	}
	cert, key, _ := w.other.Issue("x", w.now.Add(-time.Minute), w.now.Add(time.Hour))
	pair, _ := tls.X509KeyPair(cert, key)
	foreign := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true}}}
	if resp, err := foreign.Post("https://"+bB.IngressAddr()+"/tasks", "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		t.Fatalf("a certificate of another CA was served: %d", resp.StatusCode)
	}
	if len(b.bodies) != 1 {
		t.Fatal("the foreign client's handoff was delivered")
	}
}

package tlsintercept

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHandshake: a client that trusts only the published bundle completes a
// handshake for a listed name, with either protocol ALPN offers, and gets a
// short-lived P-256 leaf for that name alone, sent with the CA.
func TestHandshake(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Hour
	f := newFixture(t, MinterOptions{LeafTTL: ttl}, "api.example.com:443", "*.openai.test:443")
	s := serve(t, f.m.TLSConfig(), "", 443)
	// A name's leaf is minted at its first handshake and served again to
	// the next: each was minted after start.
	start := time.Now()
	for _, tc := range []struct {
		name  string
		sni   string
		alpn  []string
		proto string
	}{
		{"h2", "api.example.com", []string{"h2", "http/1.1"}, "h2"},
		{"http/1.1", "api.example.com", []string{"http/1.1"}, "http/1.1"},
		{"no ALPN", "API.Example.com", nil, ""},
		{"under a wildcard", "chat.openai.test", []string{"h2"}, "h2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := s.handshake(t, &tls.Config{ServerName: tc.sni, RootCAs: f.pool, NextProtos: tc.alpn})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.serverErr(t); err != nil {
				t.Fatalf("server: %v", err)
			}
			if cs.NegotiatedProtocol != tc.proto {
				t.Errorf("ALPN chose %q, want %q", cs.NegotiatedProtocol, tc.proto)
			}
			if cs.Version < tls.VersionTLS12 {
				t.Errorf("TLS version %x", cs.Version)
			}
			if len(cs.PeerCertificates) != 2 || !cs.PeerCertificates[1].Equal(f.ca.Certificate()) {
				t.Fatalf("the leaf came with %d certificates, want it and the CA", len(cs.PeerCertificates))
			}
			checkLeaf(t, cs.PeerCertificates[0], strings.ToLower(tc.sni), start, ttl)
		})
	}
}

// checkLeaf checks a leaf for name minted with ttl between start and now
// (a certificate's times are whole seconds).
func checkLeaf(t *testing.T, leaf *x509.Certificate, name string, start time.Time, ttl time.Duration) {
	t.Helper()
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("leaf key %T, want ECDSA P-256", leaf.PublicKey)
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != name || len(leaf.IPAddresses) != 0 {
		t.Errorf("leaf names %v %v, want %s alone", leaf.DNSNames, leaf.IPAddresses, name)
	}
	if leaf.IsCA || len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("leaf IsCA %v, extended key usage %v: want a server certificate", leaf.IsCA, leaf.ExtKeyUsage)
	}
	if leaf.NotAfter.After(time.Now().Add(ttl)) || leaf.NotAfter.Before(start.Add(ttl).Add(-time.Second)) {
		t.Errorf("leaf valid until %s, want %s after it was minted", leaf.NotAfter, ttl)
	}
	if leaf.NotBefore.Before(start.Add(-5*time.Minute-time.Second)) || leaf.NotBefore.After(time.Now().Add(-5*time.Minute)) {
		t.Errorf("leaf valid from %s before the handshake's start, want 5m before it was minted", start.Sub(leaf.NotBefore))
	}
}

// TestHandshakeRefused: a name not listed (or not on the destination's
// port, or one no leaf may carry) fails its handshake, and the minter says
// why; so does a client that offers nothing newer than TLS 1.1.
func TestHandshakeRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, MinterOptions{}, "api.example.com:443", "*.openai.test:443")
	s443 := serve(t, f.m.TLSConfig(), "", 443)
	s8443 := serve(t, f.m.TLSConfig(), "", 8443)
	for _, tc := range []struct {
		name   string
		s      *server
		client *tls.Config
		want   error  // the server's, by errors.Is
		says   string // or what the server's error says
	}{
		{"an unlisted name", s443, &tls.Config{ServerName: "evil.example.net"}, ErrNotListed, ""},
		{"a listed name on another port", s8443, &tls.Config{ServerName: "api.example.com"}, ErrNotListed, ""},
		{"the wildcard's own domain", s443, &tls.Config{ServerName: "openai.test"}, ErrNotListed, ""},
		{"a wildcard name", s443, &tls.Config{ServerName: "*.openai.test"}, nil, "not a host name"},
		{"no SNI and no target host", s443, &tls.Config{}, ErrNotListed, ""},
		{"TLS 1.1", s443, &tls.Config{ServerName: "api.example.com", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, nil, "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.client.InsecureSkipVerify = true // so that only the server refuses
			if _, err := tc.s.handshake(t, tc.client); err == nil {
				t.Fatal("the handshake succeeded")
			}
			err := tc.s.serverErr(t)
			switch {
			case err == nil:
				t.Fatal("the server's handshake succeeded")
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("server: %v, want %v", err, tc.want)
			case tc.says != "" && !strings.Contains(err.Error(), tc.says):
				t.Errorf("server: %v, want it to say %q", err, tc.says)
			}
		})
	}
}

// TestHandshakeNoSNI: a client that sends no server name gets the leaf of
// the target's host when its handshake names one (a CONNECT target).
func TestHandshakeNoSNI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, MinterOptions{}, "api.example.com:443")
	s := serve(t, f.m.TLSConfig(), "api.example.com", 443)
	_, err := s.handshake(t, &tls.Config{InsecureSkipVerify: true, VerifyConnection: verifyAs(f.pool, "api.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.serverErr(t); err != nil {
		t.Fatal(err)
	}
}

// TestCertificateLocalPort: with no target in the handshake's context, the
// destination's port is the connection's local one.
func TestCertificateLocalPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	f := newFixture(t, MinterOptions{}, net.JoinHostPort("api.example.com", strconv.Itoa(port)))
	tl := tls.NewListener(ln, f.m.TLSConfig())
	defer tl.Close()
	done := make(chan error, 1)
	go func() {
		c, err := tl.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			c.Close()
		}
		done <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "api.example.com", RootCAs: f.pool})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestHTTP serves HTTP/2 and HTTP/1.1 with the minter's configuration
// behind an http.Server whose ConnContext names the target, to clients
// that trust the bundle alone; the second connection's leaf is the cached
// one.
func TestHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, MinterOptions{}, "api.example.com:443")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:     http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }),
		TLSConfig:   f.m.TLSConfig(),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context { return WithTarget(ctx, "", 443) },
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	}
	for _, tc := range []struct {
		name  string
		tr    *http.Transport
		proto string
	}{
		{"h2", &http.Transport{DialContext: dial, ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: f.pool}}, "HTTP/2.0"},
		{"http/1.1", &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: f.pool},
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}, "HTTP/1.1"},
	} {
		resp, err := (&http.Client{Transport: tc.tr}).Get("https://api.example.com/v1/models")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tc.tr.CloseIdleConnections()
		if string(b) != tc.proto {
			t.Errorf("%s: served over %s", tc.name, b)
		}
	}
	if c := f.counts(t); c.minted != 1 || c.miss != 1 || c.hit != 1 || c.durations != 1 {
		t.Errorf("two connections for one name: %+v, want one leaf minted and one cache hit", c)
	}
}

// TestCache: a name's leaf is minted once and served from the cache after;
// another name has its own; a name pushed out of a full cache is minted
// again.
func TestCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t, MinterOptions{CacheSize: 2}, "*.openai.test:443")
	get := func(name string) *tls.Certificate {
		t.Helper()
		c, err := f.m.CertificateFor(name, 443)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := get("a.openai.test")
	if get("A.openai.test.") != a {
		t.Error("the same name in another spelling got another leaf")
	}
	if c := f.counts(t); c.minted != 1 || c.hit != 1 || c.miss != 1 {
		t.Errorf("after two requests for a name: %+v, want one leaf minted, one hit", c)
	}
	b := get("b.openai.test")
	if b == a {
		t.Error("two names share a leaf")
	}
	get("c.openai.test") // pushes a out
	if get("a.openai.test") == a {
		t.Error("a name pushed out of a full cache kept its leaf")
	}
	if c := f.counts(t); c.minted != 4 {
		t.Errorf("%d leaves minted, want 4", c.minted)
	}
}

// TestRemint: a leaf with less than a third of its life left is minted
// again; not before.
func TestRemint(t *testing.T) {
	t.Parallel()
	const ttl = 90 * time.Millisecond
	f := newFixture(t, MinterOptions{LeafTTL: ttl}, "api.example.com:443")
	start := time.Now()
	first, err := f.m.CertificateFor("api.example.com", 443)
	if err != nil {
		t.Fatal(err)
	}
	checkLeaf(t, first.Leaf, "api.example.com", start, ttl)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := f.m.CertificateFor("api.example.com", 443)
		if err != nil {
			t.Fatal(err)
		}
		if c != first {
			if since := time.Since(start); since < ttl*2/3 {
				t.Errorf("minted again %s after the first, with more than a third of its %s left", since, ttl)
			}
			if c.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 {
				t.Error("the new leaf has the old one's serial number")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leaf was never minted again")
		}
		time.Sleep(ttl / 10)
	}
	if c := f.counts(t); c.minted != 2 {
		t.Errorf("%d leaves minted, want 2", c.minted)
	}
}

// TestMintOnce: concurrent first requests for a name mint one leaf, and all
// get it.
func TestMintOnce(t *testing.T) {
	t.Parallel()
	const names, perName = 8, 32
	f := newFixture(t, MinterOptions{}, "*.openai.test:443")
	got := make([][]*tls.Certificate, names)
	for i := range got {
		got[i] = make([]*tls.Certificate, perName)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range names {
		for j := range perName {
			wg.Go(func() {
				<-start
				c, err := f.m.CertificateFor(fmt.Sprintf("n%d.openai.test", i), 443)
				if err != nil {
					t.Error(err)
				}
				got[i][j] = c
			})
		}
	}
	close(start)
	wg.Wait()
	for i := range names {
		for j := range perName {
			if got[i][j] == nil || got[i][j] != got[i][0] {
				t.Fatalf("name %d: request %d got another leaf than request 0", i, j)
			}
		}
	}
	if c := f.counts(t); c.minted != names || c.miss != names || c.hit != names*(perName-1) {
		t.Errorf("%d names, %d requests each: %+v, want a leaf minted per name and the rest hits", names, perName, c)
	}
}

// TestCertificateFor: an IP address listed exactly gets a leaf naming it
// as an IP; names no leaf may carry are refused even under a wildcard.
func TestCertificateFor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, MinterOptions{}, "127.0.0.1:8443", "[::1]:8443", "*.openai.test:443")
	for _, ip := range []string{"127.0.0.1", "::1"} {
		c, err := f.m.CertificateFor(ip, 8443)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Leaf.IPAddresses) != 1 || c.Leaf.IPAddresses[0].String() != ip || len(c.Leaf.DNSNames) != 0 {
			t.Errorf("leaf for %s names %v %v", ip, c.Leaf.IPAddresses, c.Leaf.DNSNames)
		}
		verifyLeaf(t, c, f.ca.CertPEM(), ip)
	}
	for _, tc := range []struct {
		name string
		host string
		port uint16
		want string
	}{
		{"an IP on another port", "127.0.0.1", 443, "not listed"},
		{"a label of digits", "1.openai.test", 443, ""},
		{"a wildcard", "*.openai.test", 443, "not a host name"},
		{"a space", "a b.openai.test", 443, "not a host name"},
		{"an empty label", "a..openai.test", 443, "empty label"},
		{"a label over 63 bytes", strings.Repeat("a", 64) + ".openai.test", 443, "over 63"},
		{"a slash", "a/b.openai.test", 443, "not a host name"},
		{"an unlisted domain", "openai.test.evil.net", 443, "not listed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := f.m.CertificateFor(tc.host, tc.port)
			if tc.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestLeafWithinCA: a leaf expires no later than its CA.
func TestLeafWithinCA(t *testing.T) {
	t.Parallel()
	notAfter := time.Now().Add(time.Hour).Truncate(time.Second)
	m := minterOfCAUntil(t, notAfter)
	c, err := m.CertificateFor("api.example.com", 443)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Leaf.NotAfter.Equal(notAfter) {
		t.Errorf("leaf valid until %s, its CA until %s", c.Leaf.NotAfter, notAfter)
	}
}

func TestNewMinterOptions(t *testing.T) {
	t.Parallel()
	_, err := NewMinter(nil, Hosts{}, MinterOptions{LeafTTL: -time.Second, CacheSize: -1}, nil)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"needs a CA", "leaf TTL -1s", "cache size -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	ca, err := NewCA("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMinter(ca, Hosts{}, MinterOptions{LeafTTL: MaxLeafTTL + time.Second}, nil); err == nil {
		t.Errorf("a leaf TTL over %s accepted", MaxLeafTTL)
	}
	m, err := NewMinter(ca, Hosts{}, MinterOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.ttl != DefaultLeafTTL {
		t.Errorf("leaf TTL %s, want the default %s", m.ttl, DefaultLeafTTL)
	}
	cfg := m.TLSConfig()
	if cfg.MinVersion != tls.VersionTLS12 || strings.Join(cfg.NextProtos, ",") != "h2,http/1.1" || cfg.GetCertificate == nil {
		t.Errorf("TLSConfig: min version %x, ALPN %v", cfg.MinVersion, cfg.NextProtos)
	}
}

// TestLeafCutShortByCA: a leaf that the CA's end cut short is served from
// the cache only while a third of its own life is left, not for the
// cache's two thirds of the TTL.
func TestLeafCutShortByCA(t *testing.T) {
	t.Parallel()
	notAfter := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	m := minterOfCAUntil(t, notAfter)
	first, err := m.CertificateFor("api.example.com", 443)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := m.CertificateFor("api.example.com", 443); again != first {
		t.Fatal("a fresh leaf was not served from the cache")
	}
	// Past two thirds of its life the cached leaf is not served again.
	life := first.Leaf.NotAfter.Sub(first.Leaf.NotBefore.Add(leafBackdate))
	time.Sleep(time.Until(first.Leaf.NotAfter.Add(-life/3)) + 50*time.Millisecond)
	if again, err := m.CertificateFor("api.example.com", 443); err == nil && again == first {
		t.Error("a leaf near the end of its life, cut short by its CA, was served from the cache")
	}
}

// minterOfCAUntil is a minter for api.example.com:443, with a 6 h TTL, of a
// CA valid until notAfter.
func minterOfCAUntil(t *testing.T, notAfter time.Time) *Minter {
	t.Helper()
	certFile, keyFile := caFiles(t, ecKey(t), true, notAfter, "PRIVATE KEY")
	ca, err := LoadCA(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMinter(ca, mustHosts(t, "api.example.com:443"), MinterOptions{LeafTTL: 6 * time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

package tlsintercept

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func benchMinter(b *testing.B) *Minter {
	b.Helper()
	ca, err := NewCA("bench")
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewMinter(ca, mustHosts(b, "*.openai.test:443"), MinterOptions{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkMint is the cost of a fresh leaf: its key, its signature (and
// the check crypto/x509 makes of it), its parse.
func BenchmarkMint(b *testing.B) {
	m := benchMinter(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.mint("api.openai.test"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCertificateCached is a handshake's request for a leaf that is
// cached: the list checked, the name checked, the cache read.
func BenchmarkCertificateCached(b *testing.B) {
	m := benchMinter(b)
	hello := &tls.ClientHelloInfo{ServerName: "api.openai.test"}
	ctx := WithTarget(b.Context(), "", 443)
	if _, err := m.certificate(ctx, hello.ServerName, 443); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.certificate(ctx, hello.ServerName, 443); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandshake is a full TLS 1.3 handshake over loopback (no
// resumption) with a cached leaf, client and server both in the process:
// what a new intercepted connection costs besides its TCP connect.
func BenchmarkHandshake(b *testing.B) {
	m := benchMinter(b)
	s := serve(b, m.TLSConfig(), "", 443)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.ca.CertPEM())
	cfg := &tls.Config{ServerName: "api.openai.test", RootCAs: pool, NextProtos: []string{"h2"}}
	if _, err := s.handshake(b, cfg); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.handshake(b, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

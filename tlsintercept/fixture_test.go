package tlsintercept

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func mustHosts(t testing.TB, entries ...string) Hosts {
	t.Helper()
	h, err := ParseHosts(entries)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// verifyLeaf checks that c's leaf verifies for name, for server
// authentication, against the roots in rootsPEM alone, through the
// certificates c is sent with.
func verifyLeaf(t *testing.T, c *tls.Certificate, rootsPEM []byte, name string) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootsPEM) {
		t.Fatal("no certificate in the roots")
	}
	inter := x509.NewCertPool()
	for _, der := range c.Certificate[1:] {
		ic, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(ic)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the leaf for %s does not verify: %v", name, err)
	}
}

// fixture is a minter whose CA is published, with a public root beside it
// in the bundle, and its metrics read by hand.
type fixture struct {
	ca     *CA
	m      *Minter
	reader *sdkmetric.ManualReader
	bundle string         // the published bundle's path
	pool   *x509.CertPool // the bundle, as an agent's Go client trusts it
	public *CA            // a root of the "system" roots, not Baton's
}

func newFixture(t *testing.T, opts MinterOptions, entries ...string) *fixture {
	t.Helper()
	ca, err := NewCA("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	public, err := NewCA("a public root")
	if err != nil {
		t.Fatal(err)
	}
	roots := filepath.Join(t.TempDir(), "ca-certificates.crt")
	writeFile(t, roots, public.CertPEM())
	bundle := filepath.Join(t.TempDir(), "trust", "ca.pem")
	if err := ca.publishBundle(bundle, []string{roots}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("the bundle holds no certificate")
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := NewMinter(ca, mustHosts(t, entries...), opts, mp)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ca: ca, m: m, reader: reader, bundle: bundle, pool: pool, public: public}
}

// counts are the minter's metrics: leaves minted, lookups by result,
// mint durations recorded.
type counts struct {
	minted, hit, miss int64
	durations         uint64
}

func (f *fixture) counts(t *testing.T) counts {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var c counts
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					switch r, _ := dp.Attributes.Value("result"); {
					case m.Name == "baton.tls.intercept.certificates.minted":
						c.minted += dp.Value
					case m.Name == "baton.tls.intercept.certificate.cache" && r.AsString() == resultHit:
						c.hit += dp.Value
					case m.Name == "baton.tls.intercept.certificate.cache" && r.AsString() == resultMiss:
						c.miss += dp.Value
					}
				}
			case metricdata.Histogram[float64]:
				if m.Name == "baton.tls.intercept.mint.duration" {
					for _, dp := range d.DataPoints {
						c.durations += dp.Count
					}
				}
			}
		}
	}
	return c
}

// server terminates TLS on a loopback listener, reports each handshake's
// error, and writes "ok" on each connection it completes.
type server struct {
	addr string
	errs chan error
}

// serve serves with cfg, each handshake for the target host and port.
func serve(t testing.TB, cfg *tls.Config, host string, port uint16) *server {
	t.Helper()
	return serveEach(t, func() *tls.Config { return cfg }, WithTarget(context.Background(), host, port))
}

// serveEach serves each connection with the configuration cfg returns
// then, its handshake with ctx.
func serveEach(t testing.TB, cfg func() *tls.Config, ctx context.Context) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: ln.Addr().String(), errs: make(chan error, 1024)}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				tc := tls.Server(c, cfg())
				err := tc.HandshakeContext(ctx)
				select {
				case s.errs <- err:
				default:
				}
				if err == nil {
					_, _ = io.WriteString(tc, "ok")
					_, _ = io.Copy(io.Discard, tc) // until the client closes
				}
			})
		}
	})
	return s
}

// serverErr is the error of the server's next handshake.
func (s *server) serverErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.errs:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the server finished no handshake")
		return nil
	}
}

// handshake dials s as a client with cfg.
func (s *server) handshake(t testing.TB, cfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return tls.ConnectionState{}, err
	}
	return tc.ConnectionState(), nil
}

var errNoCertificate = errors.New("no certificate")

// verifyAs is a VerifyConnection for a client that sends no SNI: it
// checks the chain against pool for name.
func verifyAs(pool *x509.CertPool, name string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errNoCertificate
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: name, Roots: pool, Intermediates: inter})
		return err
	}
}

package tlsintercept

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// publicLeaf is a server certificate for name from a root that is not
// Baton's, as a real server's chains to a system root.
func publicLeaf(t *testing.T, root *CA, name string) *tls.Certificate {
	t.Helper()
	key := ecKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root.cert, key.Public(), root.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// TestPublishBundle: the bundle holds the CA and the roots of the first
// source there is, and verifies both Baton's leaves and a certificate that
// chains to one of those roots.
func TestPublishBundle(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	public, err := NewCA("a public root")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	writeFile(t, roots, append([]byte("# a comment, and a block that is not a certificate\n"),
		append(pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: []byte{1}}), public.CertPEM()...)...))
	// The bundle's directory is made; a source that is a directory is
	// passed over, as one that cannot be read.
	path := filepath.Join(dir, "shared", "baton", "ca.pem")
	unreadable := t.TempDir()
	if err := ca.publishBundle(path, []string{filepath.Join(dir, "missing.pem"), unreadable, roots}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(ca.CertPEM(), public.CertPEM()...); !bytes.Equal(b, want) {
		t.Errorf("bundle:\n%s\nwant the CA, then the roots' certificates alone:\n%s", b, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("bundle mode %v (%v), want 0644", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "shared", "baton", ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	m, err := NewMinter(ca, mustHosts(t, "api.example.com:443"), MinterOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := m.CertificateFor("api.example.com", 443)
	if err != nil {
		t.Fatal(err)
	}
	verifyLeaf(t, leaf, b, "api.example.com")
	verifyLeaf(t, publicLeaf(t, public, "example.org"), b, "example.org")
}

// TestPublishBundleSystemRoots publishes with this machine's own roots: a
// root found there verifies against the bundle. It needs the system roots
// (the Debian package ca-certificates, which .ci/run installs); the path
// without any is TestPublishBundleNoRoots'.
func TestPublishBundleSystemRoots(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	err = ca.publishBundle(path, systemRootFiles)
	if errors.Is(err, ErrNoSystemRoots) {
		t.Fatal("this machine has no system roots: install the Debian package ca-certificates (.ci/run does)")
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	_, rest := pem.Decode(b) // past the CA
	var root *x509.Certificate
	for root == nil {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			t.Fatal("no system root in the bundle")
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err == nil && c.IsCA && time.Now().Before(c.NotAfter) && c.CheckSignatureFrom(c) == nil {
			root = c
		}
	}
	if _, err := root.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Errorf("the system root %s does not verify against the bundle: %v", root.Subject, err)
	}
}

// TestPublishBundleNoRoots: with no source of roots, the bundle holds the CA
// alone, and PublishBundle says so, and why a source was passed over.
func TestPublishBundleNoRoots(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	writeFile(t, empty, nil)
	path := filepath.Join(dir, "ca.pem")
	err = ca.publishBundle(path, []string{filepath.Join(dir, "missing.pem"), t.TempDir(), empty})
	if !errors.Is(err, ErrNoSystemRoots) || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("error %v, want ErrNoSystemRoots and why the directory was passed over", err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, ca.CertPEM()) {
		t.Errorf("bundle %q (%v), want the CA alone", b, err)
	}
}

// TestPublishBundleAgain: publishing replaces the bundle, and a source that
// is the bundle itself (SSL_CERT_FILE in an agent's environment) is
// skipped, so the bundle does not grow.
func TestPublishBundleAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	public, err := NewCA("a public root")
	if err != nil {
		t.Fatal(err)
	}
	roots := filepath.Join(dir, "roots.pem")
	writeFile(t, roots, public.CertPEM())
	path := filepath.Join(dir, "ca.pem")
	for range 3 {
		ca, err := NewCA("agent-a")
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.publishBundle(path, []string{path, roots}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := append(ca.CertPEM(), public.CertPEM()...); !bytes.Equal(b, want) {
			t.Fatalf("bundle of %d bytes, want the new CA and the roots (%d bytes)", len(b), len(want))
		}
	}
}

// TestPublishBundleSSLCertFile: SSL_CERT_FILE, when set, is where the roots
// come from, as for Go itself. (Not parallel: it sets the environment.)
func TestPublishBundleSSLCertFile(t *testing.T) {
	public, err := NewCA("a public root")
	if err != nil {
		t.Fatal(err)
	}
	roots := filepath.Join(t.TempDir(), "roots.pem")
	writeFile(t, roots, public.CertPEM())
	t.Setenv("SSL_CERT_FILE", roots)
	ca, err := NewCA("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := ca.PublishBundle(path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, append(ca.CertPEM(), public.CertPEM()...)) {
		t.Errorf("bundle %d bytes (%v), want the CA and SSL_CERT_FILE's root", len(b), err)
	}
}

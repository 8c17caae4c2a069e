package tlsintercept

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNewCA(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Certificate()
	if c.Subject.CommonName != "Baton interception CA (agent-a)" {
		t.Errorf("subject %q", c.Subject.CommonName)
	}
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("not a CA for leaves only: IsCA %v, MaxPathLen %d, MaxPathLenZero %v", c.IsCA, c.MaxPathLen, c.MaxPathLenZero)
	}
	if c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("key usage %v", c.KeyUsage)
	}
	if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", c.PublicKey)
	}
	now := time.Now()
	if !c.NotBefore.Before(now.Add(-50*time.Minute)) || c.NotAfter.Before(now.Add(364*24*time.Hour)) {
		t.Errorf("valid %s to %s", c.NotBefore, c.NotAfter)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	other, err := NewCA("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	if other.Certificate().SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two CAs share a serial number")
	}
	b, _ := pem.Decode(ca.CertPEM())
	if b == nil || b.Type != "CERTIFICATE" || !bytes.Equal(b.Bytes, c.Raw) {
		t.Error("CertPEM is not the CA's certificate")
	}
}

// TestCAKeyNeverShown: no format of a CA, and no log of one, shows its
// key.
func TestCAKeyNeverShown(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMinter(ca, Hosts{}, MinterOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := ca.key.(*ecdsa.PrivateKey)
	d, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	n := new(big.Int).SetBytes(d)
	secrets := []string{n.String(), n.Text(16), fmt.Sprintf("%x", d), strings.Trim(fmt.Sprint(d), "[]"),
		base64.StdEncoding.EncodeToString(pkcs8), fmt.Sprintf("%x", pkcs8)}
	var shown []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		shown = append(shown, fmt.Sprintf(verb, ca), fmt.Sprintf(verb, *ca), fmt.Sprintf(verb, m))
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("ca", "ca", ca, "minter", m)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("ca", "ca", ca, "minter", m)
	shown = append(shown, logs.String())
	for _, s := range shown {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Fatalf("the CA's key shows in %q", s)
			}
		}
	}
	if got := fmt.Sprint(ca); !strings.Contains(got, "Baton interception CA (agent-a)") || !strings.Contains(got, ca.Fingerprint()) {
		t.Errorf("a CA prints as %q, want its subject and fingerprint", got)
	}
}

// caFiles writes a certificate for key (a CA when isCA), valid until
// notAfter, and key in the PEM form keyType names, to files in a temporary
// directory.
func caFiles(t *testing.T, key crypto.Signer, isCA bool, notAfter time.Time, keyType string) (certFile, keyFile string) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-2 * time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  isCA,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	var kb []byte
	switch keyType {
	case "PRIVATE KEY":
		kb, err = x509.MarshalPKCS8PrivateKey(key)
	case "EC PRIVATE KEY":
		kb, err = x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	case "RSA PRIVATE KEY":
		kb = x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: keyType, Bytes: kb})
	if keyType == "EC PRIVATE KEY" { // as openssl ecparam -genkey writes it
		keyPEM = append(pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}}), keyPEM...)
	}
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, keyPEM)
	return certFile, keyFile
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func rsaKey(t testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestLoadCA loads CAs from the files a Secret holds, in each key format,
// and mints a leaf that chains to each.
func TestLoadCA(t *testing.T) {
	t.Parallel()
	year := time.Now().Add(365 * 24 * time.Hour)
	ec, rs := ecKey(t), rsaKey(t)
	for _, tc := range []struct {
		name    string
		key     crypto.Signer
		keyType string
	}{
		{"EC, PKCS#8", ec, "PRIVATE KEY"},
		{"EC, SEC1 after EC PARAMETERS", ec, "EC PRIVATE KEY"},
		{"RSA, PKCS#8", rs, "PRIVATE KEY"},
		{"RSA, PKCS#1", rs, "RSA PRIVATE KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			certFile, keyFile := caFiles(t, tc.key, true, year, tc.keyType)
			ca, err := LoadCA(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewMinter(ca, mustHosts(t, "api.example.com:443"), MinterOptions{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := m.CertificateFor("api.example.com", 443)
			if err != nil {
				t.Fatal(err)
			}
			verifyLeaf(t, c, ca.CertPEM(), "api.example.com")
		})
	}
}

func TestLoadCARefuses(t *testing.T) {
	t.Parallel()
	year := time.Now().Add(365 * 24 * time.Hour)
	ec := ecKey(t)
	caCert, caKey := caFiles(t, ec, true, year, "PRIVATE KEY")
	_, otherKey := caFiles(t, ecKey(t), true, year, "PRIVATE KEY")
	leafCert, leafKey := caFiles(t, ec, false, year, "PRIVATE KEY")
	expiredCert, expiredKey := caFiles(t, ec, true, time.Now().Add(-time.Hour), "PRIVATE KEY")
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	edKey := filepath.Join(t.TempDir(), "ed.key")
	edDER, _ := x509.MarshalPKCS8PrivateKey(edPriv)
	writeFile(t, edKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: edDER}))
	garbage := filepath.Join(t.TempDir(), "garbage")
	writeFile(t, garbage, []byte("not PEM at all"))
	encrypted := filepath.Join(t.TempDir(), "enc.key")
	writeFile(t, encrypted, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}}))
	badKey := filepath.Join(t.TempDir(), "bad.key")
	writeFile(t, badKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("junk")}))
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weakKey := filepath.Join(t.TempDir(), "weak.key")
	writeFile(t, weakKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(weak)}))

	for _, tc := range []struct {
		name              string
		certFile, keyFile string
		want              string
	}{
		{"the key of another certificate", caCert, otherKey, "does not match the certificate"},
		{"a certificate that is no CA", leafCert, leafKey, "not a CA certificate"},
		{"an expired CA", expiredCert, expiredKey, "expired on"},
		{"no certificate file", filepath.Join(t.TempDir(), "missing.crt"), caKey, "missing.crt"},
		{"no key file", caCert, filepath.Join(t.TempDir(), "missing.key"), "missing.key"},
		{"a certificate file of no PEM", garbage, caKey, "no PEM CERTIFICATE block"},
		{"a key file of no PEM", caCert, garbage, "no PEM PRIVATE KEY"},
		{"an encrypted key", caCert, encrypted, "encrypted"},
		{"a key that does not parse", caCert, badKey, "EC PRIVATE KEY block"},
		{"an Ed25519 key", caCert, edKey, "must be EC or RSA"},
		{"a short RSA key", caCert, weakKey, "at least 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadCA(tc.certFile, tc.keyFile)
			if err == nil {
				t.Fatal("LoadCA accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "tlsintercept: ") {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestLoadCAChain: the certificates after the CA's in its file (those it
// chains up through) are sent with each leaf and published with the CA.
func TestLoadCAChain(t *testing.T) {
	t.Parallel()
	rootCert, rootKey := caFiles(t, ecKey(t), true, time.Now().Add(time.Hour), "PRIVATE KEY") // a root that may sign CAs
	root, err := LoadCA(rootCert, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	key := ecKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "intermediate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root.cert, key.Public(), root.key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), root.CertPEM()...))
	kb, _ := x509.MarshalECPrivateKey(key)
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	ca, err := LoadCA(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Certificate().Subject.CommonName != "intermediate" {
		t.Errorf("the CA is %s, want the first certificate of the file", ca.Certificate().Subject)
	}
	m, err := NewMinter(ca, mustHosts(t, "api.example.com:443"), MinterOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.CertificateFor("api.example.com", 443)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Certificate) != 3 {
		t.Errorf("a leaf is sent with %d certificates, want itself, the CA and the root", len(c.Certificate))
	}
	verifyLeaf(t, c, root.CertPEM(), "api.example.com") // through the intermediate the leaf is sent with
	if !bytes.Contains(ca.CertPEM(), root.CertPEM()) {
		t.Error("CertPEM leaves out the chain")
	}
}

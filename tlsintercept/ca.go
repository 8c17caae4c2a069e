package tlsintercept

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"time"
)

// CA lifetimes: a CA made at start lives for a year, from an hour ago so
// that a client whose clock is a little behind still accepts it.
const (
	caLifetime = 365 * 24 * time.Hour
	caBackdate = time.Hour
)

// CA is the certificate authority whose leaves Baton presents to its agent
// for intercepted destinations. Its key is held in memory only: nothing
// here writes it, and a CA formats and logs as its certificate's subject
// and fingerprint, never its key.
type CA struct {
	cert  *x509.Certificate
	chain [][]byte // DER: the CA's certificate, then any certificates it chains up through
	pem   []byte   // chain as PEM
	key   crypto.Signer
}

// NewCA makes a CA in memory: an ECDSA P-256 key and a self-signed
// certificate for it, named for this Baton's agent, valid for a year from an
// hour ago, that may sign leaves only (MaxPathLen 0).
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: CA key: %w", err)
	}
	cn := "Baton interception CA"
	if name != "" {
		cn += " (" + name + ")"
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Baton"}, CommonName: cn},
		NotBefore:             now.Add(-caBackdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: CA certificate: %w", err)
	}
	return newCA(cert, [][]byte{der}, key), nil
}

func newCA(cert *x509.Certificate, chain [][]byte, key crypto.Signer) *CA {
	var p []byte
	for _, der := range chain {
		p = append(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return &CA{cert: cert, chain: chain, pem: p, key: key}
}

// LoadCA reads a CA from PEM files, as a Kubernetes TLS Secret holds one
// (tls.crt and tls.key, which cert-manager can issue). certFile's first
// certificate is the CA's; any after it are the certificates it chains up
// through, sent with each leaf and published with it. keyFile holds its
// key, EC or RSA, as PKCS#8 ("PRIVATE KEY"), SEC1 ("EC PRIVATE KEY") or
// PKCS#1 ("RSA PRIVATE KEY"). It refuses a certificate that may not sign
// certificates, one outside its validity, and a key that is not the
// certificate's.
func LoadCA(certFile, keyFile string) (*CA, error) {
	chain, err := readCerts(certFile)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: CA certificate %s: %w", certFile, err)
	}
	for i, der := range chain[1:] {
		if _, err := x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("tlsintercept: CA certificate %s: certificate %d of the chain: %w", certFile, i+2, err)
		}
	}
	if err := checkCA(cert, time.Now()); err != nil {
		return nil, fmt.Errorf("tlsintercept: CA certificate %s (%s): %w", certFile, cert.Subject, err)
	}
	key, err := readKey(keyFile)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("tlsintercept: the key in %s does not match the certificate in %s (%s)", keyFile, certFile, cert.Subject)
	}
	return newCA(cert, chain, key), nil
}

// checkCA says why cert cannot sign leaves now, if it cannot.
func checkCA(cert *x509.Certificate, now time.Time) error {
	switch {
	case !cert.BasicConstraintsValid || !cert.IsCA:
		return errors.New("not a CA certificate (its basic constraints do not say CA:TRUE); issue one with isCA: true")
	case cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return errors.New("its key usage does not allow signing certificates (keyCertSign)")
	case now.Before(cert.NotBefore):
		return fmt.Errorf("not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(cert.NotAfter):
		return fmt.Errorf("expired on %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	switch cert.PublicKeyAlgorithm {
	case x509.ECDSA, x509.RSA:
		return nil
	}
	return fmt.Errorf("its key is %s: it must be EC or RSA", cert.PublicKeyAlgorithm)
}

// readCerts returns the DER of the CERTIFICATE blocks of a PEM file.
func readCerts(file string) ([][]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: CA certificate: %w", err)
	}
	var ders [][]byte
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			ders = append(ders, block.Bytes)
		}
	}
	if len(ders) == 0 {
		return nil, fmt.Errorf("tlsintercept: CA certificate %s: no PEM CERTIFICATE block", file)
	}
	return ders, nil
}

// readKey returns the first private key of a PEM file. Its errors name the
// file and the block, never the key's bytes.
func readKey(file string) (crypto.Signer, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: CA key: %w", err)
	}
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("tlsintercept: CA key %s: no PEM PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block", file)
		}
		var k any
		switch block.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("tlsintercept: CA key %s: the key is encrypted; give it unencrypted (a Secret's tls.key)", file)
		default:
			continue // EC PARAMETERS before an openssl ecparam key, a certificate in the same file
		}
		if err != nil {
			return nil, fmt.Errorf("tlsintercept: CA key %s: %s block: %w", file, block.Type, err)
		}
		switch k := k.(type) {
		case *ecdsa.PrivateKey:
			return k, nil
		case *rsa.PrivateKey:
			if k.N.BitLen() < 2048 {
				return nil, fmt.Errorf("tlsintercept: CA key %s: an RSA key of %d bits: it must have at least 2048", file, k.N.BitLen())
			}
			return k, nil
		}
		return nil, fmt.Errorf("tlsintercept: CA key %s: a %T: it must be EC or RSA", file, k)
	}
}

// Certificate returns the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA's certificate as PEM, followed by any certificates
// it chains up through: what an agent must trust.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.pem...) }

// Fingerprint is the SHA-256 of the CA certificate's DER, in hex: how an
// operator tells one CA from another.
func (ca *CA) Fingerprint() string {
	sum := sha256.Sum256(ca.cert.Raw)
	return hex.EncodeToString(sum[:])
}

// Format prints the CA as its subject and fingerprint, whatever the verb,
// so that no format of a CA shows its key.
func (ca *CA) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "CA(%s, sha256 %s)", ca.cert.Subject, ca.Fingerprint())
}

// LogValue logs the CA as its subject, fingerprint and expiry.
func (ca *CA) LogValue() slog.Value {
	return slog.GroupValue(slog.String("subject", ca.cert.Subject.String()),
		slog.String("sha256", ca.Fingerprint()), slog.Time("not_after", ca.cert.NotAfter))
}

// serial returns a random serial number from 1 to 2^128.
func serial() *big.Int {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: it crashes the program instead
	n := new(big.Int).SetBytes(b[:])
	return n.Add(n, big.NewInt(1))
}

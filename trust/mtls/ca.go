package mtls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"time"
)

// CA is a self-signed certificate authority for a trust domain, for a quick
// start and for tests (baton keygen --ca); production takes its
// certificates from cert-manager or SPIRE.
type CA struct {
	Cert        *x509.Certificate
	Key         crypto.Signer
	TrustDomain string
}

// NewCA makes a CA for trustDomain, valid for ttl.
func NewCA(trustDomain string, ttl time.Duration) (*CA, error) {
	if !validTrustDomain(trustDomain) {
		return nil, fmt.Errorf("mtls: bad trust domain %q", trustDomain)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Baton"}, CommonName: "Baton CA " + trustDomain},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		URIs:                  []*url.URL{{Scheme: "spiffe", Host: trustDomain}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, TrustDomain: trustDomain}, nil
}

// LoadCA reads a CA's certificate and key PEM.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("mtls: the CA certificate or key is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("mtls: CA certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("mtls: CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, errors.New("mtls: not a CA certificate and key")
	}
	td := ""
	if len(cert.URIs) == 1 && cert.URIs[0].Scheme == "spiffe" {
		td = cert.URIs[0].Host
	}
	return &CA{Cert: cert, Key: signer, TrustDomain: td}, nil
}

// PEM returns the CA's certificate and key as PEM (the key PKCS#8).
func (ca *CA) PEM() (certPEM, keyPEM []byte, err error) {
	kb, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

// Issue makes a certificate for agent, valid from notBefore to notAfter,
// with its SPIFFE ID (IDFor) as URI SAN, for both server and client use.
// It returns the certificate and a new key as PEM.
func (ca *CA) Issue(agent string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	return ca.IssueID(IDFor(ca.TrustDomain, agent), notBefore, notAfter)
}

// IssueID is Issue for any SPIFFE ID.
func (ca *CA) IssueID(id ID, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	u, _ := url.Parse(id.String())
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Baton"}, CommonName: id.Agent()},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{u},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

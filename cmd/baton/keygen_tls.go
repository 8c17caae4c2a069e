package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/batonproxy/baton/trust/mtls"
)

// keygenTLSUsage is the part of baton's usage text on TLS certificates.
const keygenTLSUsage = `  baton keygen --ca --trust-domain DOMAIN --out DIR [--days 365] [--force]
                                 create a self-signed CA for mutual TLS between
                                 Batons (docs/tls.md): DIR/ca.pem (the trust bundle
                                 every Baton's tls.ca_file names) and DIR/ca-key.pem
  baton keygen --cert AGENT --ca-dir DIR --out DIR [--days 90] [--force]
                                 issue AGENT's certificate from that CA, its SPIFFE
                                 ID spiffe://DOMAIN/agent/AGENT: DIR/AGENT.pem and
                                 DIR/AGENT-key.pem (tls.cert_file, tls.key_file).
                                 For a quick start and for tests: production takes
                                 them from cert-manager or SPIRE
`

// keygenTLS makes a CA (ca) or an agent's certificate (agent != "").
func keygenTLS(ca bool, agent, trustDomain, caDir, out string, days int, force bool, stderr io.Writer) error {
	if days <= 0 {
		return fmt.Errorf("keygen: --days must be positive")
	}
	ttl := time.Duration(days) * 24 * time.Hour
	if ca {
		c, err := mtls.NewCA(trustDomain, ttl)
		if err != nil {
			return fmt.Errorf("keygen: %w", err)
		}
		certPEM, keyPEM, err := c.PEM()
		if err != nil {
			return fmt.Errorf("keygen: %w", err)
		}
		if err := writePair(out, "ca", certPEM, keyPEM, force); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "baton keygen: wrote CA %s to %s and its key to %s (mode 0600)\n", trustDomain,
			filepath.Join(out, "ca.pem"), filepath.Join(out, "ca-key.pem"))
		return nil
	}
	certPEM, err := os.ReadFile(filepath.Join(caDir, "ca.pem"))
	if err != nil {
		return fmt.Errorf("keygen: the CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(caDir, "ca-key.pem"))
	if err != nil {
		return fmt.Errorf("keygen: the CA: %w", err)
	}
	c, err := mtls.LoadCA(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if _, err := mtls.ParseID(mtls.IDFor(c.TrustDomain, agent).String()); err != nil {
		return fmt.Errorf("keygen: --cert: %w", err)
	}
	now := time.Now()
	cert, key, err := c.Issue(agent, now.Add(-time.Minute), now.Add(ttl))
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writePair(out, agent, cert, key, force); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "baton keygen: wrote %s's certificate (%s, until %s) to %s and its key to %s (mode 0600)\n",
		agent, mtls.IDFor(c.TrustDomain, agent), now.Add(ttl).UTC().Format(time.DateOnly),
		filepath.Join(out, agent+".pem"), filepath.Join(out, agent+"-key.pem"))
	return nil
}

// writePair writes DIR/name.pem (mode 0644) and DIR/name-key.pem (0600).
func writePair(dir, name string, certPEM, keyPEM []byte, force bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writeKeyFile(filepath.Join(dir, name+"-key.pem"), keyPEM, force); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".pem"), certPEM, 0o644); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	return nil
}

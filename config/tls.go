package config

import (
	"os"
	"regexp"
	"strings"
	"time"
)

// TLS is mutual TLS between Batons (docs/tls.md): the ingress listener
// serves TLS and verifies clients' certificates; handoffs to https:// peers
// present this Baton's certificate and verify the peer's. Identities are
// SPIFFE IDs whose last path segment is the agent's name.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// CAFile is the trust bundle peers' certificates must chain to.
	CAFile string `yaml:"ca_file"`
	// TrustDomain is the SPIFFE trust domain of every Baton's ID.
	TrustDomain string `yaml:"trust_domain"`
	// IDPath, when set, is the whole path of every Baton's SPIFFE ID, with
	// {agent} for the agent's name (/ns/agents/sa/{agent}); unset, any path
	// whose last segment is the agent's name.
	IDPath string `yaml:"id_path"`
	// MinVersion is 1.3 (the default) or 1.2.
	MinVersion string `yaml:"min_version"`
	// ClientCert is require (the default: a client without a certificate is
	// refused in the handshake) or request (one is verified when sent).
	ClientCert string `yaml:"client_cert"`
	// Reload is how often the files are checked for a change.
	Reload Duration `yaml:"reload"`
}

// DefaultTLSReload is how often certificate files are checked by default.
const DefaultTLSReload = 5 * time.Second

var trustDomain = bounded{max: 255, re: regexp.MustCompile(`^[a-z0-9._-]+$`)}

func (c *Config) defaultTLS() {
	t := c.TLS
	if t == nil {
		return
	}
	if t.MinVersion == "" {
		t.MinVersion = "1.3"
	}
	if t.ClientCert == "" {
		t.ClientCert = "require"
	}
	if t.Reload == 0 {
		t.Reload = Duration(DefaultTLSReload)
	}
}

func (c *Config) validateTLS(bad badFunc) {
	t := c.TLS
	if t == nil {
		return
	}
	for _, f := range []struct{ key, path string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"ca_file", t.CAFile}} {
		if f.path == "" {
			bad("tls."+f.key, nil, "is required")
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			bad("tls."+f.key, f.path, "must be a readable file: "+err.Error())
		}
	}
	if !trustDomain.MatchString(t.TrustDomain) {
		bad("tls.trust_domain", t.TrustDomain, "must be a SPIFFE trust domain such as example.org (lower-case letters, digits, . - _)")
	}
	if t.IDPath != "" && (!strings.HasPrefix(t.IDPath, "/") || strings.Count(t.IDPath, "{agent}") != 1 || strings.Contains(t.IDPath, "//")) {
		bad("tls.id_path", t.IDPath, "must be a path with {agent} once, such as /ns/agents/sa/{agent}")
	}
	if t.MinVersion != "1.2" && t.MinVersion != "1.3" {
		bad("tls.min_version", t.MinVersion, "must be 1.2 or 1.3")
	}
	if t.ClientCert != "require" && t.ClientCert != "request" {
		bad("tls.client_cert", t.ClientCert, "must be require or request")
	}
	if t.Reload < Duration(time.Second) {
		bad("tls.reload", t.Reload.D().String(), "must be a duration of at least 1s")
	}
}

// PeerTLS reports whether handoffs to peer use mutual TLS: tls is set and
// the peer's URL is https.
func (c *Config) PeerTLS(peer string) bool {
	p, ok := c.Peers[peer]
	return c.TLS != nil && ok && p.ParsedURL != nil && p.ParsedURL.Scheme == "https"
}

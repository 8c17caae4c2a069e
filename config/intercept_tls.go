package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// InterceptTLS lists the destinations whose TLS the egress terminates, so
// that the journal and untrusted-content labels see the agent's HTTPS calls
// to them (docs/tls-interception.md). Nothing is terminated unless listed.
type InterceptTLS struct {
	// Hosts are host:port entries written as in external.allow (a leading
	// "*." for any subdomain); each must be allowed by external.allow.
	Hosts []string `yaml:"hosts"`
	// CA is the certificate authority that signs the certificates Baton
	// answers the agent with: made at start in memory when its files are
	// not set (its key then never leaves the process).
	CA InterceptCA `yaml:"ca"`
	// Bundle is where the CA's certificate is published for the agent to
	// trust, with the system roots: the file SSL_CERT_FILE and its kin
	// name. Default DefaultInterceptBundle.
	Bundle string `yaml:"bundle"`
	// LeafTTL is how long a minted certificate is valid; default 6h.
	LeafTTL Duration `yaml:"leaf_ttl"`
	// CacheSize bounds the minted certificates kept; default 1024.
	CacheSize int `yaml:"cache_size"`
}

// InterceptCA names the PEM files of a CA (a Secret cert-manager can
// issue: tls.crt and tls.key). Both or neither.
type InterceptCA struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// TLS interception defaults.
const (
	DefaultInterceptBundle    = "/var/run/baton/ca/bundle.pem"
	DefaultInterceptLeafTTL   = 6 * time.Hour
	DefaultInterceptCacheSize = 1024
)

// Enabled reports whether any destination's TLS is terminated.
func (t InterceptTLS) Enabled() bool { return len(t.Hosts) > 0 }

func (t *InterceptTLS) applyDefaults() {
	if !t.Enabled() {
		return
	}
	if t.Bundle == "" {
		t.Bundle = DefaultInterceptBundle
	}
	if t.LeafTTL == 0 {
		t.LeafTTL = Duration(DefaultInterceptLeafTTL)
	}
	if t.CacheSize == 0 {
		t.CacheSize = DefaultInterceptCacheSize
	}
}

func (c *Config) validateInterceptTLS(bad badFunc) {
	t := &c.Intercept.TLS
	for i, h := range t.Hosts {
		path := fmt.Sprintf("intercept.tls.hosts[%d]", i)
		if err := checkAllow(h); err != nil {
			bad(path, h, err.Error())
		} else if !c.allows(strings.ToLower(h)) {
			bad(path, h, "must be allowed by external.allow (Baton terminates TLS only to hosts the agent may reach)")
		}
	}
	if (t.CA.CertFile == "") != (t.CA.KeyFile == "") {
		bad("intercept.tls.ca", nil, "must set both cert_file and key_file, or neither (a CA made at start)")
	}
	if t.Bundle != "" && !filepath.IsAbs(t.Bundle) {
		bad("intercept.tls.bundle", t.Bundle, "must be an absolute path")
	}
	if t.LeafTTL != 0 && (t.LeafTTL < Duration(10*time.Minute) || t.LeafTTL > Duration(7*24*time.Hour)) {
		bad("intercept.tls.leaf_ttl", t.LeafTTL.D().String(), "must be a duration from 10m to 168h")
	}
	if t.CacheSize < 0 {
		bad("intercept.tls.cache_size", t.CacheSize, "must be an integer > 0")
	}
}

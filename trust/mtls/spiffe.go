// Package mtls gives Batons mutual TLS with identities that match Baton's
// own (docs/tls.md): each Baton's certificate carries a SPIFFE ID,
// spiffe://<trust domain>/<path>/<agent>, in its URI SAN, and the last
// segment of the path is the agent name that edge policies, signatures and
// records already use. Certificates, keys and the trust bundle are read
// from files and reloaded when they change.
package mtls

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// agentName is what an agent name looks like (config's agent names).
var agentName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ID is a SPIFFE ID.
type ID struct {
	TrustDomain string
	Path        string // starts with /
}

func (id ID) String() string { return "spiffe://" + id.TrustDomain + id.Path }

// Agent is the agent the ID names: its path's last segment.
func (id ID) Agent() string { return id.Path[strings.LastIndexByte(id.Path, '/')+1:] }

// IDFor is the SPIFFE ID Baton issues to an agent: spiffe://td/agent/name.
func IDFor(trustDomain, agent string) ID {
	return ID{TrustDomain: trustDomain, Path: "/agent/" + agent}
}

// ParseID reads a SPIFFE ID: the spiffe scheme, a trust domain of lower-case
// letters, digits, dots, dashes and underscores, and a non-empty path whose
// last segment is an agent name; no query, fragment, port or user.
func ParseID(s string) (ID, error) {
	u, err := url.Parse(s)
	if err != nil {
		return ID{}, fmt.Errorf("not a SPIFFE ID: %w", err)
	}
	switch {
	case u.Scheme != "spiffe":
		return ID{}, fmt.Errorf("not a SPIFFE ID (scheme %q): %s", u.Scheme, s)
	case u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return ID{}, fmt.Errorf("a SPIFFE ID has no user, port, query or fragment: %s", s)
	case !validTrustDomain(u.Host):
		return ID{}, fmt.Errorf("SPIFFE ID %s: bad trust domain %q", s, u.Host)
	case u.Path == "" || u.Path == "/" || strings.HasSuffix(u.Path, "/") || strings.Contains(u.Path, "//"):
		return ID{}, fmt.Errorf("SPIFFE ID %s: the path must name the agent in its last segment", s)
	}
	id := ID{TrustDomain: u.Host, Path: u.Path}
	if !agentName.MatchString(id.Agent()) {
		return ID{}, fmt.Errorf("SPIFFE ID %s: the last path segment %q is not an agent name", s, id.Agent())
	}
	return id, nil
}

func validTrustDomain(td string) bool {
	if td == "" || len(td) > 255 {
		return false
	}
	for i := 0; i < len(td); i++ {
		c := td[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ErrNoID reports a certificate without exactly one SPIFFE ID.
var ErrNoID = errors.New("the certificate carries no SPIFFE ID (a spiffe:// URI SAN)")

// IDOf returns the SPIFFE ID of a certificate: its one spiffe URI SAN.
func IDOf(cert *x509.Certificate) (ID, error) {
	var found []string
	for _, u := range cert.URIs {
		if u.Scheme == "spiffe" {
			found = append(found, u.String())
		}
	}
	switch len(found) {
	case 0:
		return ID{}, ErrNoID
	case 1:
		return ParseID(found[0])
	}
	return ID{}, fmt.Errorf("the certificate carries %d SPIFFE IDs, want one", len(found))
}

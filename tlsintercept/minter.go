package tlsintercept

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/state"
)

// Leaf defaults and bounds.
const (
	DefaultLeafTTL   = 6 * time.Hour
	DefaultCacheSize = 1024
	// MaxLeafTTL bounds LeafTTL, as intercept.tls.leaf_ttl is bounded: a
	// leaf is short-lived, so that one that leaks is soon worthless.
	MaxLeafTTL = 7 * 24 * time.Hour
	// leafBackdate is how long before its minting a leaf is valid from,
	// for an agent whose clock is a little behind Baton's.
	leafBackdate = 5 * time.Minute
)

// ErrNotListed is the error for a name the minter will not mint a leaf
// for: the destination is not in its Hosts, or the ClientHello names none.
var ErrNotListed = errors.New("not listed for interception")

// MinterOptions tune a Minter. The zero value takes the defaults.
type MinterOptions struct {
	// LeafTTL is how long a leaf is valid after it is minted (default
	// DefaultLeafTTL, at most MaxLeafTTL). A cached leaf is minted again
	// once less than a third of that is left.
	LeafTTL time.Duration
	// CacheSize bounds the leaves kept, one per name (default
	// DefaultCacheSize); past it, the longest kept is forgotten.
	CacheSize int
}

// Minter mints the leaf certificates Baton presents to its agent for
// intercepted destinations, for listed names only, and keeps them while
// they have two thirds of their life left. Safe for concurrent use:
// concurrent first requests for a name mint one leaf.
type Minter struct {
	ca      *CA
	hosts   Hosts
	ttl     time.Duration
	cache   *state.FIFO[*tls.Certificate] // by name; an entry expires when its leaf is due to be minted again
	configs *state.FIFO[*tls.Config]      // ServerConfig's, by destination
	metrics *minterMetrics

	mu       sync.Mutex
	inflight map[string]*minting // names being minted, for requests that come meanwhile to wait on
}

// minting is one leaf being minted; done is closed when cert or err is set.
type minting struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

// NewMinter returns a minter of leaves signed by ca for the destinations
// hosts lists. mp receives its metrics (metrics.go); nil records none.
func NewMinter(ca *CA, hosts Hosts, opts MinterOptions, mp metric.MeterProvider) (*Minter, error) {
	var errs []error
	if ca == nil {
		errs = append(errs, errors.New("tlsintercept: a minter needs a CA"))
	}
	if opts.LeafTTL < 0 || opts.LeafTTL > MaxLeafTTL {
		errs = append(errs, fmt.Errorf("tlsintercept: leaf TTL %s: must be between 0 (the default, %s) and %s",
			opts.LeafTTL, DefaultLeafTTL, MaxLeafTTL))
	}
	if opts.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("tlsintercept: cache size %d: must be >= 0 (0: the default, %d)",
			opts.CacheSize, DefaultCacheSize))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.LeafTTL == 0 {
		opts.LeafTTL = DefaultLeafTTL
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	mm, err := newMinterMetrics(mp)
	if err != nil {
		return nil, err
	}
	return &Minter{
		ca:       ca,
		hosts:    hosts,
		ttl:      opts.LeafTTL,
		cache:    state.NewFIFO[*tls.Certificate](opts.CacheSize, opts.LeafTTL-opts.LeafTTL/3),
		configs:  state.NewFIFO[*tls.Config](opts.CacheSize, 0),
		metrics:  mm,
		inflight: map[string]*minting{},
	}, nil
}

// Hosts returns the destinations m mints leaves for.
func (m *Minter) Hosts() Hosts { return m.hosts }

// Listed reports whether host on port is listed: whether Baton terminates
// TLS to it.
func (m *Minter) Listed(host string, port uint16) bool { return m.hosts.Match(host, port) }

// CertificateFor returns the leaf for host on port (a CONNECT target whose
// client sent no SNI), refusing one not listed with ErrNotListed.
func (m *Minter) CertificateFor(host string, port uint16) (*tls.Certificate, error) {
	return m.certificate(context.Background(), host, port)
}

func (m *Minter) certificate(ctx context.Context, host string, port uint16) (*tls.Certificate, error) {
	name := normalName(host)
	if !m.hosts.Match(name, port) {
		// The name is the agent's: quoted, so that it cannot forge a log line.
		return nil, fmt.Errorf("tlsintercept: %q: %w", net.JoinHostPort(name, strconv.Itoa(int(port))), ErrNotListed)
	}
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("tlsintercept: %q: %w", name, err)
	}
	return m.leaf(ctx, name)
}

// leaf returns the cached leaf of name, or mints it: once, however many
// requests for it come while it is being minted.
func (m *Minter) leaf(ctx context.Context, name string) (*tls.Certificate, error) {
	if c, ok := m.cache.Get(name); ok && m.fresh(c) {
		m.metrics.lookup(true)
		return c, nil
	}
	m.mu.Lock()
	if c, ok := m.cache.Get(name); ok && m.fresh(c) { // minted while this request waited for the lock
		m.mu.Unlock()
		m.metrics.lookup(true)
		return c, nil
	}
	if w, ok := m.inflight[name]; ok {
		m.mu.Unlock()
		select {
		case <-w.done:
			if w.err == nil {
				m.metrics.lookup(true)
			}
			return w.cert, w.err
		case <-ctx.Done():
			return nil, fmt.Errorf("tlsintercept: waiting for the leaf of %q: %w", name, ctx.Err())
		}
	}
	w := &minting{done: make(chan struct{})}
	m.inflight[name] = w
	m.mu.Unlock()

	m.metrics.lookup(false)
	w.cert, w.err = m.mint(name)
	if w.err == nil {
		m.cache.Set(name, w.cert) // before the in-flight entry goes, so that no request falls between
	}
	m.mu.Lock()
	delete(m.inflight, name)
	m.mu.Unlock()
	close(w.done)
	return w.cert, w.err
}

// fresh reports whether a cached leaf may be served: the cache's own expiry
// (two thirds of the TTL from the mint) covers a leaf of the full TTL; one
// the CA's end cut short is served only while a third of its life is left.
func (m *Minter) fresh(c *tls.Certificate) bool {
	l := c.Leaf
	if l == nil || !l.NotAfter.Equal(m.ca.cert.NotAfter) {
		return true
	}
	return time.Until(l.NotAfter) > l.NotAfter.Sub(l.NotBefore.Add(leafBackdate))/3
}

// mint makes a leaf for name: a new P-256 key, a certificate naming it
// alone (a DNS name, or an IP address), for server authentication, valid
// from a little before now for the minter's TTL (no later than the CA),
// sent with the CA's chain.
func (m *Minter) mint(name string) (*tls.Certificate, error) {
	start := time.Now()
	notAfter := start.Add(m.ttl)
	if ca := m.ca.cert.NotAfter; ca.Before(notAfter) {
		notAfter = ca
	}
	if !notAfter.After(start) {
		return nil, fmt.Errorf("tlsintercept: the CA (%s) expired on %s", m.ca.cert.Subject, notAfter.UTC().Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: leaf key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		NotBefore:             start.Add(-leafBackdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if len(name) <= 64 { // the longest common name X.509 allows; the SAN is what clients check
		tmpl.Subject = pkix.Name{CommonName: name}
	}
	if ip, ok := parseIP(name); ok {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, m.ca.cert, key.Public(), m.ca.key)
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: leaf for %q: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tlsintercept: leaf for %q: %w", name, err)
	}
	chain := make([][]byte, 0, 1+len(m.ca.chain))
	chain = append(append(chain, der), m.ca.chain...)
	m.metrics.mint(time.Since(start))
	return &tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}, nil
}

// checkName refuses a name no leaf should carry, though a wildcard entry
// covers it: a wildcard ("*.openai.com" would be a certificate for every
// subdomain), an IP with a zone, anything but letters, digits, '-' and
// '_' in labels of 1 to 63 bytes, over 253 bytes in all.
func checkName(name string) error {
	if ip, ok := parseIP(name); ok {
		if ip.Zone() != "" {
			return errors.New("an IP address with a zone cannot be named in a certificate")
		}
		return nil
	}
	if len(name) == 0 || len(name) > 253 {
		return errors.New("not a host name: empty or over 253 bytes")
	}
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return errors.New("not a host name: an empty label")
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return errors.New("not a host name: only letters, digits, '-' and '_' may be in a label")
		}
		if label++; label > 63 {
			return errors.New("not a host name: a label over 63 bytes")
		}
	}
	if label == 0 {
		return errors.New("not a host name: an empty label")
	}
	return nil
}

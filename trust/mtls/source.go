package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Options configure a Source.
type Options struct {
	CertFile, KeyFile, CAFile string
	// TrustDomain is the SPIFFE trust domain every peer's ID must be in.
	TrustDomain string
	// IDPath, when set, is the whole path every Baton's SPIFFE ID must
	// have, with {agent} where the agent's name goes
	// (/ns/agents/sa/{agent}); unset, any path whose last segment is the
	// agent's name.
	IDPath     string
	MinVersion uint16 // tls.VersionTLS13 unless set
	// Reload is how often the files are checked for a change.
	Reload time.Duration
	Log    *slog.Logger
	// Handshake counts handshakes by side (ingress, egress), result (ok,
	// failed) and, for a failure, reason.
	Handshake func(side, result, reason string)
	// Reloaded counts reloads by result (ok, failed).
	Reloaded func(result string)
}

// material is one loaded set of files.
type material struct {
	cert  *tls.Certificate
	leaf  *x509.Certificate
	id    ID
	roots *x509.CertPool
	stamp string // the files' sizes and modification times
}

// Source holds this Baton's certificate and the trust bundle, reloaded from
// their files when they change (cert-manager and SPIRE's helper rewrite
// them in place). Every handshake uses what is current.
type Source struct {
	o   Options
	cur atomic.Pointer[material]
}

// Load reads the files once; they must be good.
func Load(o Options) (*Source, error) {
	if o.MinVersion == 0 {
		o.MinVersion = tls.VersionTLS13
	}
	if o.Reload <= 0 {
		o.Reload = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Handshake == nil {
		o.Handshake = func(string, string, string) {}
	}
	if o.Reloaded == nil {
		o.Reloaded = func(string) {}
	}
	s := &Source{o: o}
	m, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	return s, nil
}

func (s *Source) stamp() string {
	var b strings.Builder
	for _, f := range []string{s.o.CertFile, s.o.KeyFile, s.o.CAFile} {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%d.%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

func (s *Source) load() (*material, error) {
	stamp := s.stamp()
	cert, err := tls.LoadX509KeyPair(s.o.CertFile, s.o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("mtls: certificate %s and key %s: %w", s.o.CertFile, s.o.KeyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("mtls: certificate %s: %w", s.o.CertFile, err)
	}
	cert.Leaf = leaf
	id, err := IDOf(leaf)
	if err != nil {
		return nil, fmt.Errorf("mtls: certificate %s: %w", s.o.CertFile, err)
	}
	if id.TrustDomain != s.o.TrustDomain {
		return nil, fmt.Errorf("mtls: certificate %s names %s, outside trust domain %s", s.o.CertFile, id, s.o.TrustDomain)
	}
	if _, ok := s.AgentOf(id); !ok {
		return nil, fmt.Errorf("mtls: certificate %s names %s, whose path is not %s", s.o.CertFile, id, s.o.IDPath)
	}
	bundle, err := os.ReadFile(s.o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("mtls: trust bundle: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("mtls: trust bundle %s holds no PEM certificate", s.o.CAFile)
	}
	return &material{cert: &cert, leaf: leaf, id: id, roots: roots, stamp: stamp}, nil
}

// Run reloads the files whenever they change, until ctx ends. A change that
// does not load (a half-written file) keeps what is current, and is tried
// again at the next check.
func (s *Source) Run(ctx context.Context) {
	t := time.NewTicker(s.o.Reload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.stamp() == s.cur.Load().stamp {
			continue
		}
		m, err := s.load()
		if err != nil {
			s.o.Reloaded("failed")
			s.o.Log.Warn("tls: reloading the certificate failed; the current one stays", "error", err.Error())
			continue
		}
		s.cur.Store(m)
		s.o.Reloaded("ok")
		s.o.Log.Info("tls: certificate reloaded", "id", m.id.String(), "not_after", m.leaf.NotAfter)
	}
}

// AgentOfOwn is the agent this Baton's own certificate names.
func (s *Source) AgentOfOwn() string {
	a, _ := s.AgentOf(s.ID())
	return a
}

// ID is this Baton's SPIFFE ID; NotAfter when its certificate expires.
func (s *Source) ID() ID              { return s.cur.Load().id }
func (s *Source) NotAfter() time.Time { return s.cur.Load().leaf.NotAfter }

// ServerConfig is the ingress listener's: this Baton's certificate, and
// each client's verified against the trust bundle as a SPIFFE ID of the
// trust domain: required, or checked only when one is sent.
func (s *Source) ServerConfig(requireClient bool) *tls.Config {
	auth := tls.RequestClientCert
	if requireClient {
		auth = tls.RequireAnyClientCert
	}
	return &tls.Config{
		MinVersion: s.o.MinVersion,
		NextProtos: []string{"h2", "http/1.1"},
		ClientAuth: auth,
		// A resumed session skips VerifyPeerCertificate: without tickets
		// every connection's client certificate is checked against the
		// bundle current at its handshake (a rotated bundle applies at once).
		SessionTicketsDisabled: true,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return nil // RequestClientCert without one: the HTTP layer sees no identity
			}
			_, err := s.verify(raw, x509.ExtKeyUsageClientAuth, "")
			s.observe("ingress", err)
			return err
		},
	}
}

// ClientConfig is the egress transport's for the peer named agent: this
// Baton's certificate, and the peer's verified against the trust bundle as
// the SPIFFE ID of that agent. Host names are not checked: the identity is
// the SPIFFE ID.
func (s *Source) ClientConfig(agent string) *tls.Config {
	return &tls.Config{
		MinVersion: s.o.MinVersion,
		NextProtos: []string{"h2", "http/1.1"},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		InsecureSkipVerify: true, // verified below, against the current bundle and the peer's SPIFFE ID
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			_, err := s.verify(raw, x509.ExtKeyUsageServerAuth, agent)
			s.observe("egress", err)
			return err
		},
	}
}

func (s *Source) observe(side string, err error) {
	if err == nil {
		s.o.Handshake(side, "ok", "")
		return
	}
	s.o.Handshake(side, "failed", Reason(err))
}

// VerifyError is a peer certificate refused, with why.
type VerifyError struct {
	Reason string // unknown-authority, expired, wrong-identity, no-identity, bad-certificate
	Err    error
}

func (e *VerifyError) Error() string { return "mtls: " + e.Err.Error() }
func (e *VerifyError) Unwrap() error { return e.Err }

// Reason names why a handshake failed, for metrics: the VerifyError's
// reason, or "handshake".
func Reason(err error) string {
	var ve *VerifyError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return "handshake"
}

// verify checks a peer's chain against the current bundle for usage, and
// its SPIFFE ID: in the trust domain, and naming agent when agent is set.
func (s *Source) verify(raw [][]byte, usage x509.ExtKeyUsage, agent string) (ID, error) {
	certs := make([]*x509.Certificate, 0, len(raw))
	for _, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return ID{}, &VerifyError{"bad-certificate", err}
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return ID{}, &VerifyError{"bad-certificate", errors.New("the peer sent no certificate")}
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: s.cur.Load().roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		var inv x509.CertificateInvalidError
		switch {
		case errors.As(err, &inv) && inv.Reason == x509.Expired:
			return ID{}, &VerifyError{"expired", err}
		case errors.As(err, new(x509.UnknownAuthorityError)):
			return ID{}, &VerifyError{"unknown-authority", err}
		}
		return ID{}, &VerifyError{"bad-certificate", err}
	}
	id, err := IDOf(certs[0])
	switch {
	case err != nil:
		return ID{}, &VerifyError{"no-identity", err}
	case id.TrustDomain != s.o.TrustDomain:
		return ID{}, &VerifyError{"wrong-identity", fmt.Errorf("the peer presented %s, outside trust domain %s", id, s.o.TrustDomain)}
	}
	who, ok := s.AgentOf(id)
	switch {
	case !ok:
		return ID{}, &VerifyError{"wrong-identity", fmt.Errorf("the peer presented %s, whose path is not %s", id, s.o.IDPath)}
	case agent != "" && who != agent:
		return ID{}, &VerifyError{"wrong-identity", fmt.Errorf("peer %s presented %s, the identity of agent %s", agent, id, who)}
	}
	return id, nil
}

// AgentOf returns the agent a SPIFFE ID of the trust domain names: the
// name in the place of {agent} in IDPath, or without IDPath the path's last
// segment. ok is false for an ID of another shape.
func (s *Source) AgentOf(id ID) (agent string, ok bool) {
	if id.TrustDomain != s.o.TrustDomain {
		return "", false
	}
	if s.o.IDPath == "" {
		return id.Agent(), true
	}
	prefix, suffix, _ := strings.Cut(s.o.IDPath, "{agent}")
	name, ok := strings.CutPrefix(id.Path, prefix)
	if !ok {
		return "", false
	}
	if name, ok = strings.CutSuffix(name, suffix); !ok || !agentName.MatchString(name) {
		return "", false
	}
	return name, true
}

// PeerID returns the verified SPIFFE ID of a connection's client, or false
// when it sent no certificate.
func PeerID(cs *tls.ConnectionState) (ID, bool) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return ID{}, false
	}
	id, err := IDOf(cs.PeerCertificates[0])
	return id, err == nil
}

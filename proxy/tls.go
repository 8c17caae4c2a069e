package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust/mtls"
)

// Mutual TLS between Batons (docs/tls.md): trust/mtls loads and reloads
// the certificate and the bundle and verifies handshakes; this file serves
// the ingress listener over TLS, gives each https:// peer's edge a transport
// that expects that peer's SPIFFE ID, refuses a handoff whose TLS identity
// contradicts the agent it says it comes from, and counts handshakes.

// newTLS loads c.TLS, with its metrics; nil without a tls block.
func newTLS(c *config.Config, o Options) (*mtls.Source, error) {
	if c.TLS == nil {
		return nil, nil
	}
	m, err := newTLSMetrics(o.MeterProvider)
	if err != nil {
		return nil, err
	}
	version := uint16(tls.VersionTLS13)
	if c.TLS.MinVersion == "1.2" {
		version = tls.VersionTLS12
	}
	src, err := mtls.Load(mtls.Options{
		CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, CAFile: c.TLS.CAFile, TrustDomain: c.TLS.TrustDomain, IDPath: c.TLS.IDPath,
		MinVersion: version, Reload: c.TLS.Reload.D(), Log: o.Logger,
		Handshake: m.handshake, Reloaded: m.reloaded,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if id := src.ID(); src.AgentOfOwn() != c.Agent {
		return nil, fmt.Errorf("proxy: tls.cert_file names %s, the identity of agent %s, not of %s", id, src.AgentOfOwn(), c.Agent)
	}
	if err := m.observeExpiry(o.MeterProvider, src); err != nil {
		return nil, err
	}
	return src, nil
}

// peerTransportFor is the transport of the edge to peer: base, or for an
// https:// peer with tls set a clone that presents this Baton's
// certificate and expects the peer's SPIFFE ID.
func (s *Server) peerTransportFor(peer string, base *http.Transport) http.RoundTripper {
	if s.tlsSrc == nil || !s.cfg.PeerTLS(peer) {
		return base
	}
	t := base.Clone()
	t.TLSClientConfig = s.tlsSrc.ClientConfig(peer)
	return t
}

// tlsListener serves l over TLS when tls is set.
func (s *Server) tlsListener(l net.Listener) net.Listener {
	if s.tlsSrc == nil {
		return l
	}
	return tls.NewListener(l, s.tlsSrc.ServerConfig(s.cfg.TLS.ClientCert == "require"))
}

// tlsIdentity refuses, at ingress, a handoff whose client certificate names
// another agent than the Baton-Agent it carries (403 tls-identity-mismatch,
// recorded on the receipt), and labels the receipt with the TLS identity.
func (s *Server) tlsIdentity(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := mtls.PeerID(r.TLS)
		if !ok || s.tlsSrc == nil {
			next.ServeHTTP(w, r)
			return
		}
		agent, _ := s.tlsSrc.AgentOf(id) // verified in the handshake
		in := middleware.InfoFromContext(r.Context())
		if in != nil {
			in.TLSIdentity = id.String()
		}
		if from := r.Header.Get(middleware.HeaderAgent); from != "" && from != agent {
			if in != nil {
				in.Err = errors.New("tls identity " + id.String() + " is not agent " + from)
			}
			problem.New(r, problem.TLSIdentityMismatch, fmt.Sprintf("the connection's certificate is %s, the identity of agent %s, but the handoff says it comes from %s", id, agent, from)).
				With("tls_identity", id.String()).With("agent", from).Write(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tlsMetrics count handshakes and reloads, and observe the certificate's
// expiry. A nil *tlsMetrics counts nothing.
type tlsMetrics struct {
	handshakes, reloads metric.Int64Counter
}

func newTLSMetrics(mp metric.MeterProvider) (*tlsMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	mt := mp.Meter("github.com/batonproxy/baton")
	m := &tlsMetrics{}
	var err, err2 error
	m.handshakes, err = mt.Int64Counter("baton.tls.handshakes", metric.WithUnit("{handshake}"),
		metric.WithDescription("TLS handshakes between Batons, by side, result (ok, failed) and reason of a failure (unknown-authority, expired, wrong-identity, no-identity, bad-certificate, handshake)."))
	m.reloads, err2 = mt.Int64Counter("baton.tls.reloads", metric.WithUnit("{reload}"),
		metric.WithDescription("Reloads of the certificate, key and bundle after their files changed, by result (ok, failed: the current ones stay)."))
	if err := errors.Join(err, err2); err != nil {
		return nil, fmt.Errorf("proxy: tls metrics: %w", err)
	}
	return m, nil
}

func (m *tlsMetrics) handshake(side, result, reason string) {
	if m == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("side", side), attribute.String("result", result)}
	if reason != "" {
		attrs = append(attrs, attribute.String("reason", reason))
	}
	m.handshakes.Add(context.Background(), 1, metric.WithAttributes(attrs...))
}

func (m *tlsMetrics) reloaded(result string) {
	if m == nil {
		return
	}
	m.reloads.Add(context.Background(), 1, metric.WithAttributes(attribute.String("result", result)))
}

// observeExpiry reports when the current certificate expires.
func (m *tlsMetrics) observeExpiry(mp metric.MeterProvider, src *mtls.Source) error {
	if m == nil {
		return nil
	}
	_, err := mp.Meter("github.com/batonproxy/baton").Int64ObservableGauge("baton.tls.cert_expiry_timestamp",
		metric.WithUnit("s"), metric.WithDescription("When this Baton's current certificate expires (Unix seconds)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(src.NotAfter().Unix(), metric.WithAttributes(attribute.String("id", src.ID().String())))
			return nil
		}))
	return err
}

package tlsintercept

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// TLSConfig returns a new server configuration for the agent's side of
// intercepted connections: TLS 1.2 or later, ALPN h2 and http/1.1, leaves
// from Certificate, so each handshake's destination comes from WithTarget.
// Make one and share it across connections: it holds the session ticket
// keys.
func (m *Minter) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: m.Certificate,
	}
}

// ServerConfig returns the server configuration for the agent's side of a
// connection to host on port (a CONNECT target; a redirected connection's
// server name and original port): as TLSConfig, for that destination, so
// that a ClientHello without SNI gets host's leaf. One is kept per
// destination (as many as there are leaves), so that the connections to a
// destination share its session ticket keys, and an agent's client, which
// keeps its sessions by server name, resumes them.
func (m *Minter) ServerConfig(host string, port uint16) *tls.Config {
	key := net.JoinHostPort(normalName(host), strconv.Itoa(int(port)))
	return m.configs.Update(key, func(cfg *tls.Config, ok bool) (*tls.Config, bool) {
		if ok {
			return cfg, false
		}
		cfg = m.TLSConfig()
		cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return m.forTarget(helloContext(hello), hello.ServerName, host, port)
		}
		return cfg, true
	})
}

type targetKey struct{}

type target struct {
	host string
	port uint16
}

// WithTarget returns ctx carrying the destination an intercepted
// connection is for: the CONNECT target, or a redirected connection's
// original destination (host "" when only its port is known). Pass it to
// tls.Conn.HandshakeContext, or return it from http.Server.ConnContext.
func WithTarget(ctx context.Context, host string, port uint16) context.Context {
	return context.WithValue(ctx, targetKey{}, target{host: host, port: port})
}

// Certificate is a tls.Config.GetCertificate: the leaf for the name the
// ClientHello asks for (its SNI) on the destination's port. The
// destination is the one WithTarget put in the handshake's context; with
// none, its port is the connection's local port (a listener on the
// destination's port itself, or a TPROXY socket). See forTarget for what
// is refused.
func (m *Minter) Certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	ctx := helloContext(hello)
	t, ok := ctx.Value(targetKey{}).(target)
	if !ok && hello.Conn != nil {
		if ap, err := netip.ParseAddrPort(hello.Conn.LocalAddr().String()); err == nil {
			t.port = ap.Port()
		}
	}
	return m.forTarget(ctx, hello.ServerName, t.host, t.port)
}

// forTarget returns the leaf for a handshake that asks for sni on a
// connection to host on port. The name is sni, or host when the
// ClientHello has none; with neither, it is refused (ErrNotListed), and so
// is a name not listed on port. An sni that is not host, when both are
// known, is refused too: the agent would verify one name and talk to
// another.
func (m *Minter) forTarget(ctx context.Context, sni, host string, port uint16) (*tls.Certificate, error) {
	switch {
	case sni == "" && host == "":
		return nil, fmt.Errorf("tlsintercept: a ClientHello without a server name, for no known host: %w", ErrNotListed)
	case sni == "":
		sni = host
	case host != "" && normalName(sni) != normalName(host):
		return nil, fmt.Errorf("tlsintercept: a ClientHello for %q on a connection to %q", sni, host)
	}
	return m.certificate(ctx, sni, port)
}

// helloContext is the handshake's context (Background for a ClientHelloInfo
// made by hand).
func helloContext(hello *tls.ClientHelloInfo) context.Context {
	if ctx := hello.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

package tlsintercept

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestServerConfig: one configuration per destination, and Listed is the
// list's answer.
func TestServerConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t, MinterOptions{}, "api.example.com:443", "*.openai.test:443")
	a := f.m.ServerConfig("api.example.com", 443)
	if f.m.ServerConfig("API.example.com.", 443) != a {
		t.Error("one destination in another spelling got another configuration")
	}
	if f.m.ServerConfig("api.example.com", 8443) == a || f.m.ServerConfig("chat.openai.test", 443) == a {
		t.Error("two destinations share a configuration")
	}
	if a.MinVersion != tls.VersionTLS12 || strings.Join(a.NextProtos, ",") != "h2,http/1.1" {
		t.Errorf("min version %x, ALPN %v", a.MinVersion, a.NextProtos)
	}
	for _, tc := range []struct {
		host string
		port uint16
		want bool
	}{
		{"api.example.com", 443, true},
		{"chat.openai.test", 443, true},
		{"api.example.com", 8443, false},
		{"example.com", 443, false},
	} {
		if got := f.m.Listed(tc.host, tc.port); got != tc.want {
			t.Errorf("Listed(%s, %d) = %v", tc.host, tc.port, got)
		}
	}
}

// TestServerConfigHandshake: a destination's configuration answers a
// ClientHello for it, or without SNI, and refuses one that asks for
// another name, listed or not, and any for a destination not listed.
func TestServerConfigHandshake(t *testing.T) {
	t.Parallel()
	f := newFixture(t, MinterOptions{}, "api.example.com:443", "*.openai.test:443")
	listed := serve(t, f.m.ServerConfig("api.example.com", 443), "", 0)
	unlisted := serve(t, f.m.ServerConfig("evil.example.net", 443), "", 0)
	for _, tc := range []struct {
		name   string
		s      *server
		client *tls.Config
		want   string // in the server's error; "": none
	}{
		{"its name", listed, &tls.Config{ServerName: "api.example.com", RootCAs: f.pool}, ""},
		{"no SNI", listed, &tls.Config{InsecureSkipVerify: true, VerifyConnection: verifyAs(f.pool, "api.example.com")}, ""},
		{"another listed name", listed, &tls.Config{ServerName: "chat.openai.test", InsecureSkipVerify: true}, "on a connection to"},
		{"an unlisted destination", unlisted, &tls.Config{InsecureSkipVerify: true}, ErrNotListed.Error()},
		{"an unlisted destination, by its name", unlisted, &tls.Config{ServerName: "evil.example.net", InsecureSkipVerify: true}, ErrNotListed.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cerr := tc.s.handshake(t, tc.client)
			serr := tc.s.serverErr(t)
			if tc.want == "" {
				if cerr != nil || serr != nil {
					t.Fatalf("client: %v; server: %v", cerr, serr)
				}
				return
			}
			if cerr == nil || serr == nil || !strings.Contains(serr.Error(), tc.want) {
				t.Errorf("client: %v; server: %v, want it to say %q", cerr, serr, tc.want)
			}
		})
	}
	if _, err := f.m.CertificateFor("evil.example.net", 443); !errors.Is(err, ErrNotListed) {
		t.Errorf("CertificateFor an unlisted name: %v", err)
	}
}

// TestServerConfigResumes: an agent's second connection to a destination,
// served with the configuration ServerConfig gives again, resumes its
// first session.
func TestServerConfigResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, MinterOptions{}, "api.example.com:443")
	s := serveEach(t, func() *tls.Config { return f.m.ServerConfig("api.example.com", 443) }, context.Background())
	client := &tls.Config{ServerName: "api.example.com", RootCAs: f.pool, ClientSessionCache: tls.NewLRUClientSessionCache(8)}
	for i, want := range []bool{false, true} {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.addr, client)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 2) // reading takes in the session ticket sent before it
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		if got := c.ConnectionState().DidResume; got != want {
			t.Errorf("connection %d resumed: %v, want %v", i+1, got, want)
		}
		c.Close()
		if err := s.serverErr(t); err != nil {
			t.Fatal(err)
		}
	}
}

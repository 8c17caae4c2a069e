package mtls_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/trust/mtls"
)

// files writes agent's certificate from ca (valid from nb to na), its key
// and ca's bundle into dir, and returns the Options for them.
func files(t *testing.T, dir string, ca *mtls.CA, id mtls.ID, nb, na time.Time) mtls.Options {
	t.Helper()
	cert, key, err := ca.IssueID(id, nb, na)
	if err != nil {
		t.Fatal(err)
	}
	bundle, _, err := ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	o := mtls.Options{CertFile: filepath.Join(dir, id.Agent()+".pem"), KeyFile: filepath.Join(dir, id.Agent()+"-key.pem"),
		CAFile: filepath.Join(dir, "ca-"+id.Agent()+".pem"), TrustDomain: "example.org", Reload: 20 * time.Millisecond}
	for f, b := range map[string][]byte{o.CertFile: cert, o.KeyFile: key, o.CAFile: bundle} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// trusting gives o the bundle of ca instead of its issuer's.
func trusting(t *testing.T, ca *mtls.CA, o mtls.Options) mtls.Options {
	t.Helper()
	bundle, _, _ := ca.PEM()
	if err := os.WriteFile(o.CAFile, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	return o
}

// handshake runs a real TLS handshake over loopback TCP between a server
// with server's source and a client with client's, expecting peer.
func handshake(t *testing.T, server, client *mtls.Source, peer string) (clientErr, serverErr error) {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", server.ServerConfig(true))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		done <- c.(*tls.Conn).Handshake()
	}()
	c, err := tls.Dial("tcp", l.Addr().String(), client.ClientConfig(peer))
	if err == nil {
		// TLS 1.3: the client learns of a refused certificate on its first read.
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, rerr := c.Read(make([]byte, 1))
		var ne net.Error
		if rerr != nil && !errors.Is(rerr, io.EOF) && !(errors.As(rerr, &ne) && ne.Timeout()) {
			err = rerr
		}
		c.Close()
	}
	return err, <-done
}

func TestHandshakes(t *testing.T) {
	dir := t.TempDir()
	ca, _ := mtls.NewCA("example.org", time.Hour)
	other, _ := mtls.NewCA("example.org", time.Hour)
	now := time.Now()
	load := func(o mtls.Options) *mtls.Source {
		s, err := mtls.Load(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	b := load(files(t, dir, ca, mtls.IDFor("example.org", "b"), now.Add(-time.Minute), now.Add(time.Hour)))
	a := load(files(t, dir, ca, mtls.IDFor("example.org", "a"), now.Add(-time.Minute), now.Add(time.Hour)))
	if cerr, serr := handshake(t, b, a, "b"); cerr != nil || serr != nil {
		t.Fatalf("a to b: client %v, server %v", cerr, serr)
	}
	for _, c := range []struct {
		name, reason string
		client       mtls.Options
		server       *mtls.Source
		peer         string
	}{
		{"the server is not the peer", "wrong-identity", files(t, dir, ca, mtls.IDFor("example.org", "a"), now.Add(-time.Minute), now.Add(time.Hour)), b, "c"},
		{"a client of another CA", "unknown-authority", trusting(t, ca, files(t, t.TempDir(), other, mtls.IDFor("example.org", "x"), now.Add(-time.Minute), now.Add(time.Hour))), b, "b"},
		{"an expired client", "expired", files(t, t.TempDir(), ca, mtls.IDFor("example.org", "y"), now.Add(-2*time.Hour), now.Add(-time.Hour)), b, "b"},
		{"another trust domain", "wrong-identity", files(t, t.TempDir(), ca, mtls.ID{TrustDomain: "evil.org", Path: "/agent/z"}, now.Add(-time.Minute), now.Add(time.Hour)), b, "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.client
			o.TrustDomain = "example.org"
			var s *mtls.Source
			if c.name == "another trust domain" {
				o.TrustDomain = "evil.org" // its own config is consistent; b refuses it
			}
			s = load(o)
			cerr, serr := handshake(t, c.server, s, c.peer)
			err := serr // the side that refused first says why
			var ve *mtls.VerifyError
			if errors.As(cerr, &ve) {
				err = cerr
			}
			if err == nil || mtls.Reason(err) != c.reason {
				t.Fatalf("client %v, server %v; want a %s refusal", cerr, serr, c.reason)
			}
		})
	}
}

// TestReload rewrites the files in place: the next handshake presents the
// new certificate; a half-written file keeps the current one.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca, _ := mtls.NewCA("example.org", time.Hour)
	now := time.Now()
	o := files(t, dir, ca, mtls.IDFor("example.org", "b"), now.Add(-time.Minute), now.Add(time.Hour))
	s, err := mtls.Load(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	go s.Run(ctx)
	first := s.NotAfter()
	if err := os.WriteFile(o.CertFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if !s.NotAfter().Equal(first) {
		t.Fatal("a half-written certificate replaced the current one")
	}
	files(t, dir, ca, mtls.IDFor("example.org", "b"), now.Add(-time.Minute), now.Add(2*time.Hour))
	deadline := time.Now().Add(5 * time.Second)
	for s.NotAfter().Equal(first) {
		if time.Now().After(deadline) {
			t.Fatal("the rewritten certificate was never loaded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestParseID(t *testing.T) {
	for in, want := range map[string]string{
		"spiffe://example.org/agent/analyst":      "analyst",
		"spiffe://example.org/ns/prod/sa/analyst": "analyst",
		"spiffe://example.org/":                   "",
		"spiffe://Example.org/agent/a":            "",
		"https://example.org/agent/a":             "",
		"spiffe://example.org/agent/Analyst":      "",
		"spiffe://example.org:8443/agent/analyst": "",
		"spiffe://example.org/agent/analyst?x=1":  "",
		"spiffe://example.org/agent//analyst":     "",
	} {
		id, err := mtls.ParseID(in)
		if got := id.Agent(); (err == nil) != (want != "") || (err == nil && got != want) {
			t.Errorf("ParseID(%q) = %v, %v; want agent %q", in, id, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "SPIFFE") {
			t.Errorf("ParseID(%q): an unclear error %v", in, err)
		}
	}
}

// TestIDPath: with an ID path, only that whole path names an agent; a
// workload elsewhere in the trust domain whose name ends like the peer's is
// refused.
func TestIDPath(t *testing.T) {
	dir := t.TempDir()
	ca, _ := mtls.NewCA("example.org", time.Hour)
	now := time.Now()
	strict := func(o mtls.Options) *mtls.Source {
		o.IDPath = "/ns/agents/sa/{agent}"
		s, err := mtls.Load(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	b := strict(files(t, dir, ca, mtls.ID{TrustDomain: "example.org", Path: "/ns/agents/sa/b"}, now.Add(-time.Minute), now.Add(time.Hour)))
	a := strict(files(t, dir, ca, mtls.ID{TrustDomain: "example.org", Path: "/ns/agents/sa/a"}, now.Add(-time.Minute), now.Add(time.Hour)))
	if cerr, serr := handshake(t, b, a, "b"); cerr != nil || serr != nil {
		t.Fatalf("a to b: client %v, server %v", cerr, serr)
	}
	// A workload in another namespace named like b.
	impostorOpts := files(t, t.TempDir(), ca, mtls.ID{TrustDomain: "example.org", Path: "/ns/sandbox/sa/b"}, now.Add(-time.Minute), now.Add(time.Hour))
	if _, err := mtls.Load(func() mtls.Options { o := impostorOpts; o.IDPath = "/ns/agents/sa/{agent}"; return o }()); err == nil {
		t.Fatal("a certificate outside the ID path was loaded")
	}
	impostor, err := mtls.Load(impostorOpts) // its own Baton does not check the path
	if err != nil {
		t.Fatal(err)
	}
	cerr, serr := handshake(t, impostor, a, "b")
	if mtls.Reason(cerr) != "wrong-identity" {
		t.Fatalf("a reached an impostor of b: client %v, server %v", cerr, serr)
	}
	if who, ok := a.AgentOf(mtls.ID{TrustDomain: "example.org", Path: "/ns/agents/sa/b/x"}); ok {
		t.Fatalf("AgentOf a longer path = %q", who)
	}
}

package intercept_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The topology: an agent namespace and a peer namespace joined by a veth
// pair. Each has a Baton running as UID 1337 with `baton iptables` applied;
// the peer namespace also has the peer agent (an HTTP server on :8080) and
// a TLS site on :8443. The agent is the test process (UID 0) with a plain
// HTTP client: no proxy settings, it calls the peer's address.
const (
	agentIP4, peerIP4 = "198.18.77.1", "198.18.77.2"
	agentIP6, peerIP6 = "2001:db8:77::1", "2001:db8:77::2"
	batonUID          = 1337
)

type topology struct {
	agent, peer *netns
	agentLog    *logBuffer
	got         *received
	tlsRoots    *x509.CertPool
}

// received records what the peer agent got.
type received struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *received) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"done":true}`)
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func (r *received) last() *http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		return nil
	}
	return r.reqs[len(r.reqs)-1]
}

func startTopology(t testing.TB) *topology {
	t.Helper()
	need(t, "ip6tables", "ip6tables-save", "ip6tables-restore")
	tp := &topology{agent: newNetns(t, "agent"), peer: newNetns(t, "peer"), got: &received{}}
	veth(t, tp.agent, tp.peer, agentIP4, peerIP4, agentIP6, peerIP6)

	// The peer agent, unmodified, on its usual port.
	srv := &http.Server{Handler: tp.got, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(tp.peer.listen(t, "0.0.0.0:8080"))
	t.Cleanup(func() { srv.Close() })
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls site")
	}))
	site.Listener.Close()
	site.Listener = tp.peer.listen(t, "0.0.0.0:8443")
	site.StartTLS()
	t.Cleanup(site.Close)
	tp.tlsRoots = site.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	common := "listen: {egress: 127.0.0.1:15001, ingress: \"[::]:15006\", admin: 127.0.0.1:15000}\n" +
		"intercept: {mode: transparent}\nlog_level: debug\n"
	tp.peer.startBaton(t, batonUID, "agent: peerb\nupstream: http://127.0.0.1:8080\n"+common+
		"edges: [{from: analyst}]\n")
	// Two names for the peer's Baton, one per address family: the peer's
	// URL is its agent's own address, reached through the peer's inbound
	// interception.
	tp.agentLog = tp.agent.startBaton(t, batonUID, "agent: analyst\nupstream: http://127.0.0.1:9\n"+common+
		"peers:\n  peerb: {url: \"http://"+peerIP4+":8080\"}\n  peerb6: {url: \"http://["+peerIP6+"]:8080\"}\n"+
		"edges: [{to: peerb}, {to: peerb6}]\n"+
		"external: {allow: [\"example.com:8443\"]}\n")

	for _, ns := range []*netns{tp.agent, tp.peer} {
		args := []string{"iptables"}
		if ns == tp.peer {
			args = append(args, "--exclude-inbound-ports", "8443") // TLS to the site is not for ingress
		}
		if out, err := ns.baton(args...); err != nil {
			t.Fatalf("baton iptables in %s: %v\n%s", ns.name, err, out)
		}
	}
	return tp
}

var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$`)

func TestTransparentHandoffEndToEnd(t *testing.T) {
	t.Parallel()
	tp := startTopology(t)
	client := tp.agent.client()

	tests := []struct {
		name, url, host string
	}{
		{name: "by the peer's IPv4 address", url: "http://" + peerIP4 + ":8080/tasks"},
		{name: "by the peer's IPv6 address", url: "http://[" + peerIP6 + "]:8080/tasks"},
		{name: "by the peer's name", url: "http://" + peerIP4 + ":8080/tasks", host: "peerb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tp.got.count()
			req, _ := http.NewRequest("POST", tt.url, strings.NewReader(`{"task":"summarise"}`))
			req.Header.Set("Content-Type", "application/json")
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if body := readAll(t, resp.Body); resp.StatusCode != 200 || body != `{"done":true}` {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			if tp.got.count() != n+1 {
				t.Fatalf("the peer agent got %d requests, want %d", tp.got.count()-n, 1)
			}
			r := tp.got.last()
			h := r.Header
			if !traceparentRE.MatchString(h.Get("Traceparent")) {
				t.Errorf("traceparent %q", h.Get("Traceparent"))
			}
			if h.Get("Baton-Agent") != "analyst" {
				t.Errorf("Baton-Agent %q, want analyst", h.Get("Baton-Agent"))
			}
			if h.Get("Baton-Hop") != "1" {
				t.Errorf("Baton-Hop %q, want 1 (a loop would have added hops)", h.Get("Baton-Hop"))
			}
			if !regexp.MustCompile(`^"bk-[0-9a-f]{32}"$`).MatchString(h.Get("Idempotency-Key")) {
				t.Errorf("Idempotency-Key %q, want a derived key", h.Get("Idempotency-Key"))
			}
			if r.URL.Path != "/tasks" {
				t.Errorf("path %q", r.URL.Path)
			}
			// Delivered by the peer's Baton over loopback, not straight from
			// the agent's namespace: the peer's inbound rules caught the
			// connection to its agent's port.
			if host, _, _ := strings.Cut(r.RemoteAddr, ":"); host != "127.0.0.1" {
				t.Errorf("the peer agent was called from %s, not by its Baton", r.RemoteAddr)
			}
		})
	}

	t.Run("a port of the peer's address no peer has is not a handoff", func(t *testing.T) {
		n := tp.got.count()
		req, _ := http.NewRequest("POST", "http://"+peerIP4+":9999/x", strings.NewReader(`{"task":"t"}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "#unknown-destination") {
			t.Errorf("status %d body %s: want 403 unknown-destination", resp.StatusCode, body)
		}
		if tp.got.count() != n {
			t.Errorf("the peer agent got the call to port 9999 as a handoff")
		}
	})

	t.Run("Baton's own connections are not redirected", func(t *testing.T) {
		// The handoffs above completed, so Baton's connections to the peer
		// did not come back to its egress; the UID rule counted them.
		out := tp.agent.sh(t, "iptables", "-t", "nat", "-L", "BATON_OUTPUT", "-n", "-v", "-x")
		if pk := ruleCount(t, out, "owner UID match 1337"); pk == 0 {
			t.Errorf("the UID exclusion matched nothing:\n%s", out)
		}
		out = tp.agent.sh(t, "ip6tables", "-t", "nat", "-L", "BATON_OUTPUT", "-n", "-v", "-x")
		if pk := ruleCount(t, out, "owner UID match 1337"); pk == 0 {
			t.Errorf("the IPv6 UID exclusion matched nothing:\n%s", out)
		}
		for _, cmd := range []string{"iptables", "ip6tables"} {
			out := tp.peer.sh(t, cmd, "-t", "nat", "-L", "BATON_IN_REDIRECT", "-n", "-v", "-x")
			if pk := ruleCount(t, out, "redir ports 15006"); pk == 0 {
				t.Errorf("%s: the peer's inbound redirect matched nothing:\n%s", cmd, out)
			}
		}
	})

	t.Run("TLS passes through by server name", func(t *testing.T) {
		c := tp.agent.client()
		c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: tp.tlsRoots, ServerName: "example.com"}
		resp, err := c.Get("https://" + peerIP4 + ":8443/")
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp.Body); body != "tls site" {
			t.Errorf("body %q", body)
		}
		c.CloseIdleConnections() // the tunnel is logged when it ends
		waitFor(t, tp.agentLog, `"sni":"example.com"`)

		c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: tp.tlsRoots, ServerName: "not-allowed.test"}
		c.Transport.(*http.Transport).CloseIdleConnections()
		if resp, err := c.Get("https://" + peerIP4 + ":8443/"); err == nil {
			resp.Body.Close()
			t.Fatal("TLS for a server name outside external.allow went through")
		}
		waitFor(t, tp.agentLog, `"sni":"not-allowed.test"`)
	})

	t.Run("other bytes to an unlisted address are closed", func(t *testing.T) {
		c, err := tp.agent.dial(context.Background(), "tcp", peerIP4+":8080")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "\x00\x01\x02 not http\r\n\r\n")
		if n, err := c.Read(make([]byte, 64)); err == nil {
			t.Errorf("read %d bytes: the connection reached something", n)
		}
		waitFor(t, tp.agentLog, `non-HTTP bytes`)
	})
}

// ruleCount returns the packet count of the rule whose line contains s in
// `iptables -L -v -x` output.
func ruleCount(t testing.TB, listing, s string) int {
	t.Helper()
	for _, line := range strings.Split(listing, "\n") {
		if strings.Contains(line, s) {
			f := strings.Fields(line)
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("listing line %q", line)
			}
			return n
		}
	}
	t.Fatalf("no rule %q in:\n%s", s, listing)
	return 0
}

func waitFor(t testing.TB, logs *logBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %s", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkTransparentVsProxy hands off through the same two Batons, once
// with the agent using egress as its HTTP proxy and once intercepted
// transparently, and logs the ratio of their ns/op.
func BenchmarkTransparentVsProxy(b *testing.B) {
	tp := startTopology(b)
	perOp := map[string]float64{}
	body := `{"task":"summarise","text":"` + strings.Repeat("x", 512) + `"}`
	for _, mode := range []struct {
		name, url string
		client    *http.Client
	}{
		{"proxy", "http://peerb/bench", proxyClient(tp.agent)},
		{"transparent", "http://" + peerIP4 + ":8080/bench", tp.agent.client()},
	} {
		b.Run(mode.name, func(b *testing.B) {
			do := func() {
				req, _ := http.NewRequest("POST", mode.url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := mode.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			do() // a warm connection pool on both hops
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				do()
			}
			perOp[mode.name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	if p, tr := perOp["proxy"], perOp["transparent"]; p > 0 && tr > 0 {
		b.Logf("proxy %.0f ns/op, transparent %.0f ns/op, transparent/proxy %.3f", p, tr, tr/p)
	}
}

// proxyClient is the agent configured with HTTP_PROXY pointing at egress.
func proxyClient(ns *netns) *http.Client {
	c := ns.client()
	u, _ := http.NewRequest("GET", "http://127.0.0.1:15001", nil)
	c.Transport.(*http.Transport).Proxy = http.ProxyURL(u.URL)
	return c
}

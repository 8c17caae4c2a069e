package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/sidecar"
	"github.com/batonproxy/baton/state"
)

// These tests redirect without iptables: the agent connects to the
// listener from a source address of its own on 127/8, and the Baton's
// original-destination lookup answers for that source what the kernel
// would answer for a redirected connection. proxy/intercept's namespace
// tests do the same with real rules and SO_ORIGINAL_DST.

// redirects maps an agent's source address to the original destination
// its connections pretend to have had.
type redirects struct {
	mu sync.Mutex
	m  map[netip.Addr]netip.AddrPort
}

var nextSource atomic.Uint32

func (rd *redirects) lookup(c net.Conn) (netip.AddrPort, bool, error) {
	src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if dst, ok := rd.m[src]; ok {
		return dst, true, nil
	}
	return c.LocalAddr().(*net.TCPAddr).AddrPort(), false, nil
}

// via returns a dialer whose connections to the listener look redirected
// from dst.
func (rd *redirects) via(dst string) *net.Dialer {
	n := nextSource.Add(1)
	src := netip.AddrFrom4([4]byte{127, 77, byte(n >> 8), byte(n)})
	rd.mu.Lock()
	rd.m[src] = netip.MustParseAddrPort(dst)
	rd.mu.Unlock()
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 5 * time.Second}
}

// startTransparent starts a Baton in transparent mode on loopback port 0.
// ports lists intercept.inbound_ports.
func startTransparent(t *testing.T, yaml, ports string) (*sidecar.Baton, *redirects, *syncBuffer) {
	t.Helper()
	c, err := config.Decode(strings.NewReader(yaml + "intercept: {mode: transparent, inbound_ports: [" + ports + "]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen == (config.Listen{}) {
		c.Listen = config.Listen{Egress: "127.0.0.1:0", Ingress: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	store, err := state.Open(c.Store)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s, err := sidecar.New(proxy.Options{Config: c, Store: store, TracerProvider: sdktrace.NewTracerProvider(),
		Propagator: propagation.TraceContext{},
		Logger:     slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	rd := &redirects{m: map[netip.Addr]netip.AddrPort{}}
	proxy.SetOriginalDst(s.Server, rd.lookup)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		_ = store.Close()
		if t.Failed() {
			t.Logf("%s log:\n%s", c.Agent, logs.String())
		}
	})
	return s, rd, logs
}

// clientVia is an HTTP client whose every connection goes to addr (the
// Baton listener) as if redirected from dst.
func clientVia(rd *redirects, addr, dst string) *http.Client {
	d := rd.via(dst)
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		},
	}, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, rawURL, host string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", rawURL, strings.NewReader(`{"task":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s (Host %q): %v", rawURL, host, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestTransparentHandoff(t *testing.T) {
	t.Parallel()
	var got seen
	ag := httptest.NewServer(got.handler(200, `{"ok":true}`))
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\nedges: [{from: analyst, max_hops: 8}]\n", nil)
	peerAddr := b.IngressAddr()
	a, rd, _ := startTransparent(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		peerAddr+", ports: [8080]}}\nedges: [{to: summarizer, max_hops: 8}]\n", "")

	// The agent calls the peer's address (its agent port, say 8080, on the
	// host of the peer's Baton URL) or its name; the rules bring the call to
	// egress.
	peerHost, _, _ := net.SplitHostPort(peerAddr)
	agentPort := net.JoinHostPort(peerHost, "8080")
	tests := []struct {
		name, dst, host string
	}{
		{name: "by address", dst: agentPort, host: agentPort},
		{name: "by peer name", dst: "203.0.113.9:8080", host: "summarizer:8080"},
		{name: "by the Baton URL's address", dst: peerAddr, host: peerAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := got.count()
			c := clientVia(rd, a.EgressAddr(), tt.dst)
			resp := get(t, c, "http://"+tt.dst+"/tasks", tt.host)
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if got.count() != n+1 {
				t.Fatalf("agent calls %d, want %d", got.count(), n+1)
			}
			r := got.last(t)
			if r.Header.Get("Baton-Agent") != "analyst" || r.Header.Get("Baton-Hop") != "1" ||
				!traceparentRE.MatchString(r.Header.Get("Traceparent")) || r.Header.Get("Idempotency-Key") == "" {
				t.Errorf("the peer agent got no handoff headers: %v", r.Header)
			}
		})
	}

	t.Run("a port of the peer's host the peer does not have", func(t *testing.T) {
		n := got.count()
		other := net.JoinHostPort(peerHost, "9999")
		for _, host := range []string{other, ""} {
			c := clientVia(rd, a.EgressAddr(), other)
			resp := get(t, c, "http://"+other+"/x", host)
			if p := readProblem(t, resp); resp.StatusCode != 403 || !strings.HasSuffix(p.Type, "unknown-destination") {
				t.Errorf("Host %q: status %d, problem %+v: want 403 unknown-destination", host, resp.StatusCode, p)
			}
		}
		if got.count() != n {
			t.Errorf("the peer agent got %d calls to a port it does not have", got.count()-n)
		}
	})
	t.Run("Host naming another address than the connection's", func(t *testing.T) {
		c := clientVia(rd, a.EgressAddr(), agentPort)
		resp := get(t, c, "http://"+agentPort+"/", "198.51.100.7:8080")
		if p := readProblem(t, resp); resp.StatusCode != 403 || !strings.HasSuffix(p.Type, "denied-address") {
			t.Errorf("status %d, problem %+v: want 403 denied-address", resp.StatusCode, p)
		}
	})
	t.Run("a connection to egress itself is served as in proxy mode", func(t *testing.T) {
		resp := send(t, a.EgressAddr(), "summarizer", "POST", "/", `{}`, nil)
		if resp.StatusCode != 200 {
			t.Errorf("Host routing in transparent mode: %d", resp.StatusCode)
		}
		// As in transparent mode, the address of a peer's URL, or one of its
		// ports on that host, is the peer; another port is no one.
		for _, addr := range []string{peerAddr, agentPort} {
			n := got.count()
			resp = send(t, a.EgressAddr(), addr, "POST", "/", `{}`, nil)
			if resp.StatusCode != 200 || got.count() != n+1 {
				t.Errorf("Host %s in proxy mode: %d; want a handoff to summarizer", addr, resp.StatusCode)
			}
		}
		resp = send(t, a.EgressAddr(), net.JoinHostPort(peerHost, "9999"), "POST", "/", `{}`, nil)
		if p := readProblem(t, resp); resp.StatusCode != 403 || !strings.HasSuffix(p.Type, "unknown-destination") {
			t.Errorf("status %d, problem %+v: want 403 unknown-destination", resp.StatusCode, p)
		}
	})
}

func TestTransparentExternal(t *testing.T) {
	t.Parallel()
	var host atomic.Value
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		io.WriteString(w, "page")
	}))
	t.Cleanup(site.Close)
	_, sitePort, _ := net.SplitHostPort(site.Listener.Addr().String())
	// A second site on 127.0.0.2, an address the guard refuses unless it is
	// listed as an IP.
	l2, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "other") }))
	other.Listener = l2
	other.Start()
	t.Cleanup(other.Close)
	_, otherPort, _ := net.SplitHostPort(l2.Addr().String())

	a, rd, _ := startTransparent(t, "agent: analyst\nupstream: http://127.0.0.1:1\nexternal: {allow: [\"docs.test:"+sitePort+
		"\", \"127.0.0.1:"+sitePort+"\", \"guarded.test:"+otherPort+"\"]}\n", "")

	t.Run("allowed by Host, sent to the original destination without DNS", func(t *testing.T) {
		c := clientVia(rd, a.EgressAddr(), site.Listener.Addr().String())
		resp := get(t, c, "http://docs.test:"+sitePort+"/", "")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "page" {
			t.Fatalf("status %d body %q", resp.StatusCode, body)
		}
		if h := host.Load(); h != "docs.test:"+sitePort {
			t.Errorf("the site saw Host %v, want docs.test:%s", h, sitePort)
		}
	})
	t.Run("a Host not in external.allow", func(t *testing.T) {
		c := clientVia(rd, a.EgressAddr(), site.Listener.Addr().String())
		resp := get(t, c, "http://elsewhere.test:"+sitePort+"/", "")
		if p := readProblem(t, resp); resp.StatusCode != 403 || !strings.HasSuffix(p.Type, "unknown-destination") {
			t.Errorf("status %d, problem %+v: want 403 unknown-destination", resp.StatusCode, p)
		}
	})
	t.Run("allowed by Host, but the address is guarded", func(t *testing.T) {
		c := clientVia(rd, a.EgressAddr(), l2.Addr().String())
		resp := get(t, c, "http://guarded.test:"+otherPort+"/", "")
		if p := readProblem(t, resp); resp.StatusCode != 403 || !strings.HasSuffix(p.Type, "denied-address") {
			t.Errorf("status %d, problem %+v: want 403 denied-address", resp.StatusCode, p)
		}
	})
}

func TestTransparentTLSPassthrough(t *testing.T) {
	t.Parallel()
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") }))
	t.Cleanup(site.Close)
	dst := site.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(dst)
	a, rd, logs := startTransparent(t, "agent: analyst\nupstream: http://127.0.0.1:1\nexternal: {allow: [\"example.com:"+port+
		"\", \"127.0.0.1:"+port+"\"]}\n", "")

	tlsClient := func(serverName string) *http.Client {
		c := clientVia(rd, a.EgressAddr(), dst)
		tr := c.Transport.(*http.Transport)
		// httptest's certificate is for example.com; the client checks it,
		// so the bytes went end to end, untouched.
		tr.TLSClientConfig = &tls.Config{RootCAs: site.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: serverName}
		return c
	}
	t.Run("server name allowed: spliced", func(t *testing.T) {
		resp, err := tlsClient("example.com").Get("https://" + dst + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "secret" {
			t.Fatalf("body %q", body)
		}
	})
	t.Run("server name not allowed: closed", func(t *testing.T) {
		_, err := tlsClient("other.test").Get("https://" + dst + "/")
		if err == nil {
			t.Fatal("a TLS connection for other.test went through")
		}
		waitLog(t, logs, `"sni":"other.test"`)
	})
}

func TestTransparentRawTCP(t *testing.T) {
	t.Parallel()
	echo := func(banner string) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					io.WriteString(c, banner)
					io.Copy(c, c)
				}()
			}
		}()
		return l.Addr().String()
	}
	listed, unlisted, banner := echo(""), echo(""), echo("220 ready\r\n")
	a, rd, logs := startTransparent(t, "agent: analyst\nupstream: http://127.0.0.1:1\nexternal: {allow: [\""+listed+"\", \""+banner+"\"]}\n", "")

	dial := func(dst string) net.Conn {
		c, err := rd.via(dst).Dial("tcp", a.EgressAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	t.Run("listed IP:port: tunnelled", func(t *testing.T) {
		c := dial(listed)
		msg := "\x00\x01binary\xff"
		io.WriteString(c, msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("echo %q, %v", got, err)
		}
	})
	t.Run("listed IP:port, the server speaks first", func(t *testing.T) {
		c := dial(banner)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "220 ready\r\n" {
			t.Fatalf("banner %q, %v", line, err)
		}
	})
	t.Run("not listed: closed", func(t *testing.T) {
		c := dial(unlisted)
		io.WriteString(c, "\x00\x01binary")
		if n, err := c.Read(make([]byte, 16)); err == nil {
			t.Fatalf("read %d bytes from an unlisted destination", n)
		}
		waitLog(t, logs, `"original":"`+unlisted+`"`)
	})
}

func TestTransparentIngressPorts(t *testing.T) {
	t.Parallel()
	agent := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
		t.Cleanup(s.Close)
		return s
	}
	main, admin := agent("main"), agent("admin")
	_, adminPort, _ := net.SplitHostPort(admin.Listener.Addr().String())
	_, mainPort, _ := net.SplitHostPort(main.Listener.Addr().String())
	b, rd, logs := startTransparent(t, "agent: summarizer\nupstream: "+main.URL+"\n", adminPort)

	for _, tt := range []struct{ name, dst, want string }{
		{"upstream's port", "10.0.0.2:" + mainPort, "main"},
		{"a listed port", "10.0.0.2:" + adminPort, "admin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := get(t, clientVia(rd, b.IngressAddr(), tt.dst), "http://"+tt.dst+"/", "")
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != tt.want {
				t.Errorf("status %d body %q, want %s", resp.StatusCode, body, tt.want)
			}
		})
	}
	t.Run("not redirected: upstream", func(t *testing.T) {
		resp, err := http.Post("http://"+b.IngressAddr()+"/", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if body, _ := io.ReadAll(resp.Body); string(body) != "main" {
			t.Errorf("body %q", body)
		}
	})
	t.Run("a port neither upstream's nor listed: closed", func(t *testing.T) {
		port := strconv.Itoa(closedPort(t))
		c := clientVia(rd, b.IngressAddr(), "10.0.0.2:"+port)
		if resp, err := c.Get("http://10.0.0.2:" + port + "/"); err == nil {
			resp.Body.Close()
			t.Fatalf("a redirected connection to port %s was served: %d", port, resp.StatusCode)
		}
		waitLog(t, logs, "intercept.inbound_ports")
	})
}

func closedPort(t *testing.T) int {
	_, p, _ := net.SplitHostPort(closedAddr(t))
	n, _ := strconv.Atoi(p)
	return n
}

// waitLog waits until the Baton's log holds s.
func waitLog(t *testing.T, logs *syncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %s", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/sidecar"
	"github.com/batonproxy/baton/state"
)

// baton is one Baton under test with its captured log.
type baton struct {
	*sidecar.Baton
	log *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startBaton starts a Baton from YAML on loopback port 0 with the store
// given (the one the YAML configures when nil).
func startBaton(t testing.TB, yaml string, store state.Store) *baton {
	t.Helper()
	return startBatonWith(t, yaml, store, nil)
}

// startBatonWith is startBaton with opts adjusting the Options (a meter
// provider, say) before the Baton is built.
func startBatonWith(t testing.TB, yaml string, store state.Store, opts func(*proxy.Options)) *baton {
	t.Helper()
	c, err := config.Decode(strings.NewReader(yaml))
	if err != nil {
		t.Fatalf("decoding config: %v", err)
	}
	if c.Listen == (config.Listen{}) {
		c.Listen = config.Listen{Egress: "127.0.0.1:0", Ingress: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	if store == nil {
		if store, err = state.Open(c.Store); err != nil {
			t.Fatal(err)
		}
	}
	logs := &syncBuffer{}
	tp := sdktrace.NewTracerProvider()
	o := proxy.Options{
		Config: c, Store: store,
		TracerProvider: tp,
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		Logger:         slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if opts != nil {
		opts(&o)
	}
	s, err := sidecar.New(o)
	if err != nil {
		t.Fatal(err)
	}
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
	return &baton{Baton: s, log: logs}
}

// pair is analyst's Baton handing off to summarizer's Baton, whose agent is
// the handler given.
type pair struct {
	a, b  *baton
	agent *httptest.Server
}

func startPair(t *testing.T, agent http.Handler, extraA, extraB string) *pair {
	t.Helper()
	ag := httptest.NewServer(agent)
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\nedges: [{from: analyst, max_hops: 8}]\n"+extraB, nil)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\nedges: [{to: summarizer, max_hops: 8}]\n"+extraA, nil)
	return &pair{a: a, b: b, agent: ag}
}

// send makes the agent's call to a peer through egress with Host routing.
func send(t *testing.T, egress, host, method, path string, body string, hdr http.Header) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+egress+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// seen records the requests an agent received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (s *seen) handler(status int, reply string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.body = append(s.body, b)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, reply)
	})
}

func (s *seen) last(t *testing.T) *http.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the agent received nothing")
	}
	return s.reqs[len(s.reqs)-1]
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// problemDoc decodes a problem+json answer.
type problemDoc struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Status  int    `json:"status"`
	Detail  string `json:"detail"`
	TraceID string `json:"trace_id"`
}

func readProblem(t *testing.T, resp *http.Response) problemDoc {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("Content-Type = %q, want application/problem+json; body %s", ct, b)
	}
	var p problemDoc
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Status != resp.StatusCode {
		t.Errorf("problem status %d != response status %d", p.Status, resp.StatusCode)
	}
	return p
}

// closedAddr returns an address that refuses connections for the rest of the
// test: a TCP socket bound to a port but never listening. Holding the bound
// socket keeps the port from being reused by another test's server, which a
// merely closed listener would not.
func closedAddr(t *testing.T) string {
	t.Helper()
	fd, addr := boundSocket(t)
	t.Cleanup(func() { syscall.Close(fd) })
	return addr
}

// boundSocket returns a TCP socket bound to a free loopback port, not
// listening, and its address; the caller closes it.
func boundSocket(t *testing.T) (int, string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	return fd, net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

func httptestServer(h http.Handler) *httptest.Server { return httptest.NewServer(h) }

// adminGetAs sends GET path to a Baton's admin listener, with auth as the
// Authorization header when set, and returns the answer read whole.
func adminGetAs(t *testing.T, b *baton, path, auth string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+b.AdminAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, body
}

package proxy_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/proxy"
)

// hopBaton starts a Baton as baton serve runs one with no exporter: the
// tracer provider that records nothing, the access log written (to
// nowhere) as serve writes it, the memory store, every default on.
func hopBaton(tb testing.TB, yaml string) *baton {
	tb.Helper()
	return startBatonWith(tb, yaml+"\nlog_level: info\n", benchMemory(), func(o *proxy.Options) {
		o.TracerProvider = &middleware.IDTracerProvider{}
		o.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
		o.AccessLog = io.Discard
	})
}

// benchAgent answers every request with a small JSON body, reading the
// request's.
func benchAgent(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"marker":"agent"}`)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// hopBody is the bench harness's request: 512 bytes of plain JSON.
var hopBody = `{"task":"` + strings.Repeat("x", 500) + `"}`

// BenchmarkHop is one request through one Baton's egress to a peer (the
// peer's URL is the agent itself): the bench harness's baton-1hop, in
// this process, on defaults. allocs/op counts the client, Baton and the
// agent; BenchmarkHopBare is the same client and agent with no Baton, so
// that the difference is Baton's.
func BenchmarkHop(b *testing.B) {
	ag := benchAgent(b)
	bt := hopBaton(b, "agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: "+ag.URL+"}}\nedges: [{to: b}]")
	runHops(b, "http://"+bt.EgressAddr()+"/task", "b")
}

// BenchmarkHopTwoBatons is one request through Baton A's egress and Baton
// B's ingress to B's agent: the harness's baton-2hop.
func BenchmarkHopTwoBatons(b *testing.B) {
	ag := benchAgent(b)
	bB := hopBaton(b, "agent: b\nupstream: "+ag.URL+"\nedges: [{from: a}]")
	aB := hopBaton(b, "agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: http://"+bB.IngressAddr()+"}}\nedges: [{to: b}]")
	runHops(b, "http://"+aB.EgressAddr()+"/task", "b")
}

// BenchmarkHopBare is BenchmarkHop's client and agent, with no Baton.
func BenchmarkHopBare(b *testing.B) {
	ag := benchAgent(b)
	runHops(b, ag.URL+"/task", "")
}

func runHops(b *testing.B, url, host string) {
	call := hopCaller(url, host)
	for range 100 {
		if err := call(); err != nil { // connections, pools
			b.Fatal(err)
		}
	}
	measureCalls(b, func() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	})
}

// hopCaller returns one request of the hop benchmarks: hopBody posted to
// url (as Host host, when set).
func hopCaller(url, host string) func() error { return poster(url, host, hopBody) }

// poster returns a call that posts body as JSON to url (as Host host, when
// set) on a client of its own, reads the answer whole and checks it is 200.
func poster(url, host, body string) func() error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	return func() error {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// BenchmarkHopFloor is BenchmarkHop's client and agent through a bare
// httputil.ReverseProxy with Baton's transport and buffer pool: the Go
// floor of the bench harness, in this process.
func BenchmarkHopFloor(b *testing.B) {
	ag := benchAgent(b)
	target, _ := url.Parse(ag.URL)
	rp := &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:  proxy.NewTransport(proxy.TransportOptions{Dial: 5 * time.Second, UpstreamHeader: 60 * time.Second}),
		BufferPool: proxy.NewBufferPool(),
	}
	floor := httptest.NewServer(rp)
	b.Cleanup(floor.Close)
	runHops(b, floor.URL+"/task", "b")
}

// BenchmarkHopNoRecords is BenchmarkHop with handoff records off: what
// records cost a hop.
func BenchmarkHopNoRecords(b *testing.B) {
	ag := benchAgent(b)
	bt := hopBaton(b, "agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: "+ag.URL+"}}\nedges: [{to: b}]\nrecords: {enabled: false}")
	runHops(b, "http://"+bt.EgressAddr()+"/task", "b")
}

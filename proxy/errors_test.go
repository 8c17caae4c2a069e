package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/problem"
)

func TestErrorsAreProblems(t *testing.T) {
	t.Parallel()
	var got seen
	p := startPair(t, got.handler(200, "ok"), "limits: {max_body_bytes: 64}\n", "limits: {max_body_bytes: 64}\n")

	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	slowAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slowAgent.Close)
	slowB := startBaton(t, "agent: slow\nupstream: "+slowAgent.URL+"\ntimeouts: {upstream_header: 100ms}\n", nil)
	deadB := startBaton(t, "agent: dead\nupstream: http://"+closedAddr(t)+"\n", nil)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+
		"peers: {summarizer: {url: http://"+p.b.IngressAddr()+"}, gone: {url: http://"+closedAddr(t)+"},"+
		" slow: {url: http://"+slowB.IngressAddr()+"}, dead: {url: http://"+deadB.IngressAddr()+"}}\n"+
		"external: {allow: ['169.254.169.254:80', 'api.example.com:443']}\n"+
		"limits: {max_body_bytes: 64}\n", nil)
	_ = a

	big := strings.Repeat("x", 65)
	tests := []struct {
		name   string
		addr   string // defaults to a's egress
		host   string
		method string
		body   string
		chunk  bool // send the body chunked, without Content-Length
		hdr    http.Header
		want   problem.Class
	}{
		{name: "unknown destination", host: "stranger", want: problem.UnknownDestination},
		{name: "peer name on another port", host: "summarizer:8080", want: problem.UnknownDestination},
		{name: "external not allowed", host: "evil.example.com:443", want: problem.UnknownDestination},
		{name: "metadata address even when unlisted wildcard", host: "169.254.169.253", want: problem.UnknownDestination},
		{name: "egress itself is no destination", host: "127.0.0.1:15001", want: problem.UnknownDestination},
		{name: "malformed idempotency key", host: "summarizer", method: "POST", body: "{}",
			hdr: http.Header{"Idempotency-Key": {`"unterminated`}}, want: problem.BadIdempotencyKey},
		{name: "over-long idempotency key", host: "summarizer", method: "POST", body: "{}",
			hdr: http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, want: problem.BadIdempotencyKey},
		{name: "two idempotency keys", host: "summarizer", method: "POST", body: "{}",
			hdr: http.Header{"Idempotency-Key": {"a", "b"}}, want: problem.BadIdempotencyKey},
		{name: "body too large by length", host: "summarizer", method: "POST", body: big, want: problem.BodyTooLarge},
		{name: "body too large chunked, key derived", host: "summarizer", method: "POST", body: big, chunk: true,
			want: problem.BodyTooLarge},
		{name: "body too large chunked, agent key", host: "summarizer", method: "POST", body: big, chunk: true,
			hdr: http.Header{"Idempotency-Key": {"k1"}}, want: problem.BodyTooLarge},
		{name: "peer refused", host: "gone", method: "POST", body: "{}", want: problem.UpstreamUnavailable},
		{name: "peer's agent down", host: "dead", want: problem.UpstreamUnavailable},
		{name: "peer's agent times out", host: "slow", want: problem.UpstreamTimeout},
		{name: "hop limit at ingress", addr: p.b.IngressAddr(), host: "x",
			hdr: http.Header{"Baton-Agent": {"analyst"}, "Baton-Hop": {"9"}}, want: problem.HopLimit},
		{name: "malformed hop", addr: p.b.IngressAddr(), host: "x",
			hdr: http.Header{"Baton-Agent": {"analyst"}, "Baton-Hop": {"two"}}, want: problem.BadHop},
		{name: "malformed sender", addr: p.b.IngressAddr(), host: "x",
			hdr: http.Header{"Baton-Agent": {"Not An Agent"}}, want: problem.BadRequest},
		{name: "body too large at ingress", addr: p.b.IngressAddr(), host: "x", method: "POST", body: big,
			chunk: true, hdr: http.Header{"Baton-Agent": {"analyst"}}, want: problem.BodyTooLarge},
		{name: "sender without an edge", addr: p.b.IngressAddr(), host: "x",
			hdr: http.Header{"Baton-Agent": {"stranger"}}, want: problem.PolicyDenied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := tc.addr
			if addr == "" {
				addr = a.EgressAddr()
			}
			method := tc.method
			if method == "" {
				method = "GET"
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
				if tc.chunk {
					body = io.MultiReader(strings.NewReader(tc.body[:10]), strings.NewReader(tc.body[10:]))
				}
			}
			req, _ := http.NewRequest(method, "http://"+addr+"/", body)
			req.Host = tc.host
			for k, v := range tc.hdr {
				req.Header[k] = v
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want.Status() {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want.Status(), b)
			}
			pd := readProblem(t, resp)
			if pd.Type != tc.want.Type() {
				t.Errorf("type %s, want %s (%s)", pd.Type, tc.want.Type(), pd.Detail)
			}
			if len(pd.TraceID) != 32 || pd.Detail == "" || pd.Title == "" {
				t.Errorf("problem lacks trace_id, title or detail: %+v", pd)
			}
		})
	}
	if n := got.count(); n != 0 {
		t.Errorf("the agent received %d refused requests", n)
	}
}

func TestAgentErrorsPassThroughUntouched(t *testing.T) {
	t.Parallel()
	var got seen
	p := startPair(t, got.handler(503, `{"agent":"overloaded"}`), "", "")
	resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || string(b) != `{"agent":"overloaded"}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("agent's error changed: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

func TestMalformedTraceparentStartsANewTrace(t *testing.T) {
	t.Parallel()
	var got seen
	p := startPair(t, got.handler(200, "ok"), "", "")
	for _, tp := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", strings.Repeat("0", 1000)} {
		resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}",
			http.Header{"Traceparent": {tp}, "Tracestate": {"a=b"}})
		if resp.StatusCode != 200 {
			t.Fatalf("traceparent %q: status %d", tp, resp.StatusCode)
		}
		r := got.last(t)
		if !traceparentRE.MatchString(r.Header.Get("Traceparent")) {
			t.Errorf("traceparent %q gave %q, want a fresh valid one", tp, r.Header.Get("Traceparent"))
		}
		if r.Header.Get("Tracestate") != "" {
			t.Errorf("tracestate kept with an invalid traceparent")
		}
	}
}

func TestClientGoneMidStreamIsLogged(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	done := make(chan struct{})
	var calls atomic.Int64
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			io.WriteString(w, "data: again\n\n")
			return
		}
		defer close(done)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		close(started)
		for i := 0; i < 1000; i++ {
			if _, err := io.WriteString(w, "data: more\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	p := startPair(t, agent, "", "")
	req, _ := http.NewRequest("GET", "http://"+p.a.EgressAddr()+"/stream", nil)
	req.Host = "summarizer"
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	resp.Body.Close() // the client goes away mid-stream
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.a.log.String(), `"abort":"client gone or stream aborted"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no abort logged:\n%s", p.a.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Baton still serves.
	if resp := send(t, p.a.EgressAddr(), "summarizer", "GET", "/stream", "", nil); resp.StatusCode != 200 {
		t.Errorf("after abort: status %d", resp.StatusCode)
	}
}

package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/proxy"
)

// flaky is a peer's agent that answers 503 while down and 200 after.
type flaky struct {
	down  atomic.Bool
	calls atomic.Int64
	hold  time.Duration
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.calls.Add(1)
	if f.hold > 0 {
		select {
		case <-time.After(f.hold):
		case <-r.Context().Done():
		}
	}
	if f.down.Load() {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "warming up", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "done")
}

// resilientPair is analyst → summarizer with the sender's resilience
// settings given, the receiver's dedupe window on.
func resilientPair(t *testing.T, agent http.Handler, senderExtra string) *pair {
	t.Helper()
	ag := httptest.NewServer(agent)
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n", nil)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\n"+senderExtra, nil)
	return &pair{a: a, b: b, agent: ag}
}

func TestBreakerOpensAndHalfOpens(t *testing.T) {
	t.Parallel()
	peer := &flaky{}
	peer.down.Store(true)
	p := resilientPair(t, peer, "retry: {attempts: 0}\nbreaker: {failures: 3, open_for: 300ms}\n")
	for i := 0; i < 3; i++ {
		resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil)
		if resp.StatusCode != 503 || resp.Header.Get("Baton-Dead-Letter") == "" {
			t.Fatalf("failure %d: %d %v", i+1, resp.StatusCode, resp.Header)
		}
	}
	// Open: refused at once, nothing reaches the peer.
	resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil)
	pd := readProblem(t, resp)
	if resp.StatusCode != 503 || !strings.HasSuffix(pd.Type, "#circuit-open") {
		t.Fatalf("with the breaker open: %d %s", resp.StatusCode, pd.Type)
	}
	if peer.calls.Load() != 3 {
		t.Errorf("the peer got %d calls, want 3 (none while open)", peer.calls.Load())
	}
	// The peer recovers; after open_for the breaker lets a probe through,
	// which closes it.
	peer.down.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker never half-opened: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil); resp.StatusCode != 200 {
		t.Errorf("after the probe succeeded: %d", resp.StatusCode)
	}
}

func TestRetriesAndBudget(t *testing.T) {
	t.Parallel()
	peer := &flaky{}
	peer.down.Store(true)
	// Budget share 0: only the three retries per window every edge gets.
	p := resilientPair(t, peer, "retry: {attempts: 5, backoff: 1ms, max_backoff: 2ms, budget: 0}\nbreaker: {failures: 100}\n")
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil)
	if n := peer.calls.Load(); n != 4 {
		t.Errorf("first handoff: %d tries, want 4 (1 + the budget's 3 retries)", n)
	}
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil)
	if n := peer.calls.Load(); n != 5 {
		t.Errorf("second handoff: %d tries in all, want 5 (the budget is spent: no retry)", n)
	}
}

func TestOnlySafeRequestsAreRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		method  string
		body    io.Reader
		key     string
		wantTry int64
	}{
		{"POST with a derived key is retried", "POST", strings.NewReader("{}"), "", 3},
		{"POST with the agent's key is retried", "POST", strings.NewReader("{}"), "k1", 3},
		{"GET without a key is not", "GET", nil, "", 1},
		{"streamed body with a key is not", "POST", io.MultiReader(strings.NewReader("{"), strings.NewReader("}")), "k2", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			peer := &flaky{}
			peer.down.Store(true)
			p := resilientPair(t, peer, "retry: {attempts: 2, backoff: 1ms}\nbreaker: {failures: 100}\n")
			req, _ := http.NewRequest(tc.method, "http://"+p.a.EgressAddr()+"/", tc.body)
			req.Host = "summarizer"
			if tc.key != "" {
				req.Header.Set("Idempotency-Key", tc.key)
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if n := peer.calls.Load(); n != tc.wantTry {
				t.Errorf("%d tries, want %d", n, tc.wantTry)
			}
		})
	}
}

func TestConnectFailureIsAlwaysRetried(t *testing.T) {
	t.Parallel()
	// No key (GET), but the connection was never opened: nothing was sent.
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {gone: {url: http://"+closedAddr(t)+
		"}}\nretry: {attempts: 2, backoff: 1ms}\n", nil)
	resp := send(t, a.EgressAddr(), "gone", "GET", "/", "", nil)
	var pd struct {
		RecordID string `json:"record_id"`
	}
	json.NewDecoder(resp.Body).Decode(&pd)
	rec := adminRecord(t, a.AdminAddr(), pd.RecordID)
	if resp.StatusCode != 502 || rec.State != record.Dead || rec.Attempts != 3 {
		t.Errorf("status %d, record %s after %d attempts; want 502, dead after 3", resp.StatusCode, rec.State, rec.Attempts)
	}
}

func TestPerTryTimeout(t *testing.T) {
	t.Parallel()
	peer := &flaky{hold: 2 * time.Second}
	p := resilientPair(t, peer, "retry: {attempts: 1, backoff: 1ms, per_try_timeout: 100ms}\n")
	start := time.Now()
	// A GET with a key: retryable, and outside the receiver's dedupe window
	// (which would answer the retry 409 while the first try still runs).
	resp := send(t, p.a.EgressAddr(), "summarizer", "GET", "/", "", http.Header{"Idempotency-Key": {"t1"}})
	pd := readProblem(t, resp)
	if resp.StatusCode != 504 || !strings.HasSuffix(pd.Type, "#upstream-timeout") || peer.calls.Load() != 2 {
		t.Errorf("%d %s after %d tries", resp.StatusCode, pd.Type, peer.calls.Load())
	}
	if time.Since(start) > 1500*time.Millisecond {
		t.Errorf("the per-try timeout did not cut the tries")
	}
}

// adminGet decodes a JSON answer of the admin API.
func adminGet(t *testing.T, admin, path string, v any) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func adminRecord(t *testing.T, admin, id string) record.Record {
	t.Helper()
	var rec record.Record
	if st := adminGet(t, admin, "/v1/records/"+id, &rec); st != 200 {
		t.Fatalf("GET record %s: %d", id, st)
	}
	return rec
}

func adminPost(t *testing.T, admin, path string, v any) int {
	t.Helper()
	resp, err := http.Post("http://"+admin+path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// waitTrace polls the trace until it holds n records in the wanted states
// (records are written off the request path).
func waitTrace(t *testing.T, admin, traceID string, ok func(proxy.TraceView) bool) proxy.TraceView {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var v proxy.TraceView
		st := adminGet(t, admin, "/v1/traces/"+traceID, &v)
		if st == 200 && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s never reached the wanted state: %d %+v", traceID, st, v.Records)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAutoReplayWhenBreakerCloses(t *testing.T) {
	t.Parallel()
	peer := &flaky{}
	peer.down.Store(true)
	p := resilientPair(t, peer, "edges: [{to: summarizer, auto_replay: true, retry: {attempts: 0}, breaker: {failures: 1, open_for: 100ms}}]\n")
	resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", `{"n":1}`, nil)
	id := deadLetterID(t, resp)
	peer.down.Store(false)
	// The next handoff after open_for is the probe that closes the breaker;
	// closing replays the dead letter.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", `{"n":2}`, nil)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker never closed: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		if rec := adminRecord(t, p.a.AdminAddr(), id); rec.State == record.Delivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letter %s not replayed after the breaker closed", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBreakerIgnoresCallersThatLeave: clients giving up on slow handoffs do
// not open the peer's breaker.
func TestBreakerIgnoresCallersThatLeave(t *testing.T) {
	t.Parallel()
	fast := make(chan struct{})
	peer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-fast:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "done")
	})
	p := resilientPair(t, peer, "retry: {attempts: 0}\nbreaker: {failures: 2, open_for: 1m}\n")
	for i := 0; i < 4; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.a.EgressAddr()+"/", nil)
		req.Host = "summarizer"
		if resp, err := http.DefaultTransport.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
		cancel()
	}
	close(fast)
	resp := send(t, p.a.EgressAddr(), "summarizer", "GET", "/", "", nil)
	if resp.StatusCode != 200 {
		t.Errorf("after four abandoned calls: %d, want 200 (the breaker must stay closed)", resp.StatusCode)
	}
}

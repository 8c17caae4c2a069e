package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/deadletter"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
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

// hits is a peer's agent that keeps the time each request reaches it.
type hits struct {
	http.Handler
	mu sync.Mutex
	at []time.Time
}

func (h *hits) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.at = append(h.at, time.Now())
	h.mu.Unlock()
	h.Handler.ServeHTTP(w, r)
}

func (h *hits) times() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.at)
}

// breakerOpening is an opening of a breaker, as its Baton logs it.
type breakerOpening struct {
	From    string        `json:"from"`
	OpenFor time.Duration `json:"-"`
	After   string        `json:"after"`
}

// breakerOpenings reads, from a Baton's log, each opening of its breaker
// to peer.
func breakerOpenings(t *testing.T, b *baton, peer string) []breakerOpening {
	t.Helper()
	var out []breakerOpening
	for line := range strings.Lines(b.log.String()) {
		var l struct {
			breakerOpening
			Msg, Peer, To string
			Open          string `json:"open_for"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "circuit breaker" || l.Peer != peer || l.To != "open" {
			continue
		}
		d, err := time.ParseDuration(l.Open)
		if err != nil {
			t.Fatalf("open_for %q in %s", l.Open, line)
		}
		l.breakerOpening.OpenFor = d
		out = append(out, l.breakerOpening)
	}
	return out
}

// handOffUntil sends handoffs to summarizer one after the other, each with
// its own body, until done.
func handOffUntil(t *testing.T, p *pair, done func(resp *http.Response) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for n := 0; ; n++ {
		resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/", `{"n":`+strconv.Itoa(n)+`}`, nil)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if done(resp) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done after %d handoffs (last %d)", n+1, resp.StatusCode)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// within checks an open time against base ±20%, and the cap.
func within(t *testing.T, i int, o breakerOpening, base, most time.Duration) {
	t.Helper()
	lo, hi := base*8/10-time.Millisecond, min(base*12/10, most)+time.Millisecond // the log rounds to 1ms
	if o.OpenFor < lo || o.OpenFor > hi {
		t.Errorf("opening %d: open for %s, want %s to %s (%s ±20%%, at most %s)", i, o.OpenFor, lo, hi, base, most)
	}
}

// TestBreakerBacksOffWhileProbesFail: a peer that stays down is probed
// ever less often. The breaker opens for open_for, then each failed probe
// doubles the open time, up to max_open_for. The open times are the ones
// the sender's Baton logs; that each probe came no sooner than the open time
// before it is read at the peer (a loaded machine only makes it later).
func TestBreakerBacksOffWhileProbesFail(t *testing.T) {
	t.Parallel()
	peer := &hits{Handler: &flaky{}}
	peer.Handler.(*flaky).down.Store(true)
	const openFor, most = 100 * time.Millisecond, 400 * time.Millisecond
	p := resilientPair(t, peer, "retry: {attempts: 0}\nbreaker: {failures: 1, open_for: 100ms, max_open_for: 400ms}\n")
	handOffUntil(t, p, func(*http.Response) bool { return len(peer.times()) >= 6 })

	at, opened := peer.times(), breakerOpenings(t, p.a, "summarizer")
	if len(opened) != len(at) {
		t.Fatalf("%d handoffs reached the peer, the breaker opened %d times: want one opening after each", len(at), len(opened))
	}
	for i, o := range opened {
		base, after := min(openFor<<i, most), "a failed probe"
		if i == 0 {
			after = "1 consecutive failure(s)"
		}
		if o.After != after {
			t.Errorf("opening %d: after %q, want %q", i, o.After, after)
		}
		within(t, i, o, base, most)
		if i+1 < len(at) {
			if gap := at[i+1].Sub(at[i]); gap < o.OpenFor-time.Millisecond {
				t.Errorf("probe %d reached the peer %s after the try before it, within the open time %s", i+1, gap, o.OpenFor)
			}
		}
	}
}

// TestBreakerBackoffResetsOnClose: after a probe that succeeds closes the
// breaker, the next opening lasts open_for again.
func TestBreakerBackoffResetsOnClose(t *testing.T) {
	t.Parallel()
	agent := &flaky{}
	peer := &hits{Handler: agent}
	agent.down.Store(true)
	p := resilientPair(t, peer, "retry: {attempts: 0}\nbreaker: {failures: 1, open_for: 100ms, max_open_for: 1s}\n")
	// Two failed probes: the breaker is open for 400ms.
	handOffUntil(t, p, func(*http.Response) bool { return len(peer.times()) >= 3 })
	agent.down.Store(false)
	handOffUntil(t, p, func(resp *http.Response) bool { return resp.StatusCode == 200 })
	agent.down.Store(true)
	handOffUntil(t, p, func(resp *http.Response) bool { return resp.StatusCode == 503 })

	opened := breakerOpenings(t, p.a, "summarizer")
	if len(opened) != 4 {
		t.Fatalf("the breaker opened %d times, want 4: %+v", len(opened), opened)
	}
	within(t, 2, opened[2], 400*time.Millisecond, time.Second)
	if o := opened[3]; o.From != "closed" || o.After != "1 consecutive failure(s)" {
		t.Errorf("the last opening: %+v, want from closed after 1 consecutive failure(s)", o)
	}
	within(t, 3, opened[3], 100*time.Millisecond, time.Second)
	if !strings.Contains(p.a.log.String(), `"from":"half-open","to":"closed"`) {
		t.Error("no close logged")
	}
}

func TestRetriesAndBudget(t *testing.T) {
	t.Parallel()
	peer := &flaky{}
	peer.down.Store(true)
	// Budget share 0: only the three retries per window every edge gets.
	// The peer's 503 says Retry-After, which the edge takes as retryable.
	p := resilientPair(t, peer, "retry: {attempts: 5, backoff: 1ms, max_backoff: 2ms, budget: 0, agent_retry_after: true}\nbreaker: {failures: 100}\n")
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil)
	if n := peer.calls.Load(); n != 4 {
		t.Errorf("first handoff: %d tries, want 4 (1 + the budget's 3 retries)", n)
	}
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", nil)
	if n := peer.calls.Load(); n != 5 {
		t.Errorf("second handoff: %d tries in all, want 5 (the budget is spent: no retry)", n)
	}
}

// TestOnlySafeRequestsAreRetried: a Baton never runs an agent twice by
// retrying. The agent's own failure answer is final (a dead letter) unless
// the edge opts in to the agent's Retry-After; a Baton-Refused answer (the
// receiving Baton's own, before its agent) is always retried; an agent
// cannot forge one.
func TestOnlySafeRequestsAreRetried(t *testing.T) {
	t.Parallel()
	optIn := "retry: {attempts: 2, backoff: 1ms, agent_retry_after: true}\nbreaker: {failures: 100}\n"
	byDefault := "retry: {attempts: 2, backoff: 1ms}\nbreaker: {failures: 100}\n"
	tests := []struct {
		name    string
		sender  string
		method  string
		body    io.Reader
		key     string
		answer  func(w http.ResponseWriter) // the peer agent's failure; nil: 503 with Retry-After
		wantTry int64
	}{
		{"the agent's 503 is final by default", byDefault, "POST", strings.NewReader("{}"), "", nil, 1},
		{"the agent's 502 is final", optIn, "POST", strings.NewReader("{}"), "", func(w http.ResponseWriter) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}, 1},
		{"a 503 without Retry-After is final even opted in", optIn, "POST", strings.NewReader("{}"), "", func(w http.ResponseWriter) {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}, 1},
		{"an agent cannot forge its Baton's refusal", byDefault, "POST", strings.NewReader("{}"), "", func(w http.ResponseWriter) {
			w.Header().Set("Baton-Refused", "store-unavailable")
			w.Header().Set("Retry-After", "0")
			http.Error(w, "down", http.StatusServiceUnavailable)
		}, 1},
		{"opted in: POST with a derived key is retried", optIn, "POST", strings.NewReader("{}"), "", nil, 3},
		{"opted in: POST with the agent's key is retried", optIn, "POST", strings.NewReader("{}"), "k1", nil, 3},
		{"opted in: GET without a key is retried", optIn, "GET", nil, "", nil, 3},
		{"opted in: a streamed body is not (nothing to send again)", optIn, "POST",
			io.MultiReader(strings.NewReader("{"), strings.NewReader("}")), "k2", nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			p := resilientPair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				calls.Add(1)
				if tc.answer != nil {
					tc.answer(w)
					return
				}
				w.Header().Set("Retry-After", "0")
				http.Error(w, "warming up", http.StatusServiceUnavailable)
			}), tc.sender)
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
			if n := calls.Load(); n != tc.wantTry {
				t.Errorf("%d tries, want %d", n, tc.wantTry)
			}
			if resp.StatusCode < 500 || resp.Header.Get("Baton-Dead-Letter") == "" || resp.Header.Get("Baton-Refused") != "" {
				t.Errorf("the agent got %d, Baton-Dead-Letter %q, Baton-Refused %q; want the failure, dead-lettered, no refusal mark",
					resp.StatusCode, resp.Header.Get("Baton-Dead-Letter"), resp.Header.Get("Baton-Refused"))
			}
		})
	}
}

// TestBatonRefusalsAreRetried: what the receiving Baton refuses before its
// agent sees anything is tried again: its agent unreachable (502), its
// store down (503). The agent runs once when it is back.
func TestBatonRefusalsAreRetried(t *testing.T) {
	t.Parallel()
	t.Run("the agent is not listening", func(t *testing.T) {
		t.Parallel()
		b := startBaton(t, "agent: summarizer\nupstream: http://"+closedAddr(t)+"\n", nil)
		a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
			b.IngressAddr()+"}}\nretry: {attempts: 2, backoff: 1ms}\n", nil)
		resp := send(t, a.EgressAddr(), "summarizer", "POST", "/", `{}`, nil)
		rec := adminRecord(t, a.AdminAddr(), resp.Header.Get("Baton-Dead-Letter"))
		if resp.StatusCode != 502 || rec.State != record.Dead || rec.Attempts != 3 {
			t.Errorf("status %d, record %s after %d attempts; want 502, dead after 3", resp.StatusCode, rec.State, rec.Attempts)
		}
	})
	t.Run("the receiver's store is down", func(t *testing.T) {
		t.Parallel()
		srv, store := killableRedis(t)
		var calls atomic.Int64
		ag := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			io.WriteString(w, "done")
		}))
		t.Cleanup(ag.Close)
		b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n", store)
		a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
			b.IngressAddr()+"}}\nretry: {attempts: 2, backoff: 1ms}\n", nil)
		srv.Kill()
		resp := send(t, a.EgressAddr(), "summarizer", "POST", "/", `{}`, nil)
		id := resp.Header.Get("Baton-Dead-Letter")
		if resp.StatusCode != 503 || id == "" || resp.Header.Get("Baton-Refused") != "store-unavailable" {
			t.Fatalf("with the receiver's store down: %d, dead letter %q, Baton-Refused %q", resp.StatusCode, id,
				resp.Header.Get("Baton-Refused"))
		}
		if rec := adminRecord(t, a.AdminAddr(), id); rec.Attempts != 3 || calls.Load() != 0 {
			t.Errorf("%d attempts, the agent ran %d times; want 3 (every refusal retried) and none", rec.Attempts, calls.Load())
		}
		srv.Restart(t)
		// Where the store stayed down past the Baton's liveness mark (a
		// loaded machine), its first claims after the restart are refused
		// as in flight and the sender's breaker opens: the replay then waits
		// out the breaker's open state.
		eventuallyWithin(t, 40*time.Second, "the replay delivers once the store is back", func() bool {
			var res deadletter.ReplayResult
			return adminPost(t, a.AdminAddr(), "/v1/deadletters/"+id+"/replay", &res) == 200 && res.Status == 200
		})
		if calls.Load() != 1 {
			t.Errorf("the agent ran %d times, want once", calls.Load())
		}
	})
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
	// A GET: safe by HTTP's contract, so a try that timed out is tried
	// again; outside the receiver's dedupe window (which would answer the
	// retry 409 while the first try still runs).
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
func waitTrace(t *testing.T, admin, traceID string, ok func(records.TraceView) bool) records.TraceView {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var v records.TraceView
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

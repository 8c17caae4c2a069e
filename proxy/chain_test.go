package proxy_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/deadletter"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// stepAgent is an agent in a chain under test. Each run counts itself and
// calls its steps (peers, in order) through its Baton's egress with a body
// that differs on every run (a run counter and a clock, as a model's output
// would), and answers 200 when every call answered 2xx, or 502 at the first
// failure. It propagates context as an agent instrumented with
// OpenTelemetry does: the trace id it received with a span of its own, and
// the baggage it received. A leaf (no steps) answers what answer says for
// its run; done counts the runs that answered 2xx: its completed side
// effects.
type stepAgent struct {
	steps  []string
	answer func(run int64) int // nil: always 200
	otel   bool                // propagate traceparent and baggage
	before func(run int64)     // called as a run starts; nil: nothing
	after  func(run int64)     // called once a run's steps ended, before it answers; nil: nothing

	egress atomic.Pointer[string]
	runs   atomic.Int64
	done   atomic.Int64
}

func (a *stepAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	run := a.runs.Add(1)
	if a.before != nil {
		a.before(run)
	}
	if a.after != nil {
		defer a.after(run) // before the answer is complete, whatever it is
	}
	for i, peer := range a.steps {
		body := fmt.Sprintf(`{"step":%d,"run":%d,"at":%d}`, i, run, time.Now().UnixNano())
		req, _ := http.NewRequest(http.MethodPost, "http://"+*a.egress.Load()+"/step", strings.NewReader(body))
		req.Host = peer
		req.Header.Set("Content-Type", "application/json")
		if a.otel {
			if tp := r.Header.Get("Traceparent"); len(tp) == 55 {
				req.Header.Set("Traceparent", tp[:36]+randomSpan()+tp[52:])
			}
			if bg := r.Header.Get("Baggage"); bg != "" {
				req.Header.Set("Baggage", bg)
			}
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, "calling "+peer+": "+err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "%s answered %d: %s", peer, resp.StatusCode, answer)
			return
		}
	}
	status := http.StatusOK
	if a.answer != nil {
		if s := a.answer(run); s != 0 {
			status = s
		}
	}
	if status < 300 {
		a.done.Add(1)
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"run":%d}`, run)
}

func randomSpan() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// failOnce answers 500 on the first run, 200 after.
func failOnce(run int64) int {
	if run == 1 {
		return http.StatusInternalServerError
	}
	return 0
}

// sharedStore gives each Baton of a chain its own client of one Redis,
// under one prefix: the Batons of a chain share a store, as in production.
func sharedStore(t *testing.T) func() state.Store {
	url := redistest.Shared(t)
	return storesOn(t, url, redistest.Prefix(t, url))
}

// storesOn gives a new client of the Redis at url, under prefix, on each
// call: one for each Baton, whose cleanup closes it.
func storesOn(tb testing.TB, url, prefix string) func() state.Store {
	return func() state.Store { return redisStoreWithPrefix(tb, url, prefix) }
}

// nodeAgent is an agent under test that calls its peers through its Baton's
// egress, once told where it is.
type nodeAgent interface {
	http.Handler
	useEgress(addr string)
}

func (a *stepAgent) useEgress(addr string) { a.egress.Store(&addr) }

// node starts agent a behind a Baton configured by yaml (agent name and
// upstream added), and points the agent at the Baton's egress.
func node(t *testing.T, name string, a nodeAgent, yaml string, store state.Store) *baton {
	t.Helper()
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	b := startBaton(t, "agent: "+name+"\nupstream: "+srv.URL+"\n"+yaml, store)
	a.useEgress(b.EgressAddr())
	return b
}

func peerYAML(peers map[string]string) string {
	var b strings.Builder
	b.WriteString("peers: {")
	i := 0
	for name, addr := range peers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: {url: http://%s}", name, addr)
		i++
	}
	b.WriteString("}\n")
	return b.String()
}

// fanChain is B, whose agent calls C then D, each agent behind its Baton on
// one store: the part of a chain under test where D fails.
type fanChain struct {
	b, c, d    *stepAgent
	bB, cB, dB *baton
}

// startFan starts C and D (d is D's agent), then B with bYAML added; dAddr,
// when set, is where B reaches D's Baton instead of its ingress.
func startFan(t *testing.T, store func() state.Store, d *stepAgent, bYAML string, dAddr func(ingress string) string) *fanChain {
	t.Helper()
	return startFanOf(t, store, &stepAgent{steps: []string{"c", "d"}, otel: true}, d, bYAML, dAddr)
}

// startFanOf is startFan with B's agent b (its steps c, then d).
func startFanOf(t *testing.T, store func() state.Store, b, d *stepAgent, bYAML string, dAddr func(ingress string) string) *fanChain {
	t.Helper()
	f := &fanChain{b: b, c: &stepAgent{}, d: d}
	f.cB = node(t, "c", f.c, "", store())
	f.dB = node(t, "d", d, "", store())
	reachD := f.dB.IngressAddr()
	if dAddr != nil {
		reachD = dAddr(reachD)
	}
	f.bB = node(t, "b", f.b, peerYAML(map[string]string{"c": f.cB.IngressAddr(), "d": reachD})+bYAML, store())
	return f
}

// deadLetters lists a Baton's dead letters.
func deadLetters(t *testing.T, b *baton) deadletter.Page {
	t.Helper()
	var page deadletter.Page
	if st := adminGet(t, b.AdminAddr(), "/v1/deadletters", &page); st != http.StatusOK {
		t.Fatalf("listing dead letters at %s: %d", b.AdminAddr(), st)
	}
	return page
}

// eventually retries check until it passes or five seconds pass.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	eventuallyWithin(t, 5*time.Second, what, check)
}

// eventuallyWithin is eventually with its own deadline, for a wait that
// spans a store's restart.
func eventuallyWithin(t *testing.T, within time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestChainResumesWhereItFailed is A → B → {C, then D} on one Redis, with
// D failing (500) on its first run. The client, A's agent, sends no key;
// it gets a 5xx naming the dead letter where the chain stopped and the key
// its handoff carried, and resumes by re-sending with that key, after an
// operator replayed the dead letter or without. B re-runs with different
// bodies: its call to C is answered from C's window, so C's side effect
// ran once, and D completed once.
func TestChainResumesWhereItFailed(t *testing.T) {
	t.Parallel()
	for _, replayFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("dlq replay first: %v", replayFirst), func(t *testing.T) {
			t.Parallel()
			store := sharedStore(t)
			f := startFan(t, store, &stepAgent{answer: failOnce}, "retry: {attempts: 2, backoff: 5ms}\n", nil)
			c, d, bAgent, cB, dB, bB := f.c, f.d, f.b, f.cB, f.dB, f.bB
			aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

			resp := send(t, aB.EgressAddr(), "b", "POST", "/work", `{"task":"pay vendor-17"}`, http.Header{
				"Content-Type": {"application/json"}, "Traceparent": {tp}})
			dl, key := resp.Header.Get("Baton-Dead-Letter"), resp.Header.Get("Idempotency-Key")
			if resp.StatusCode != http.StatusBadGateway || dl == "" || key == "" {
				t.Fatalf("first run: %d, Baton-Dead-Letter %q, Idempotency-Key %q; want 502 naming both", resp.StatusCode, dl, key)
			}
			if n := d.runs.Load(); n != 1 {
				t.Errorf("D ran %d times for its first failure, want 1 (a 500 is not retried)", n)
			}
			owner := adminRecord(t, bB.AdminAddr(), dl)
			if owner.From != "b" || owner.To != "d" || owner.State != record.Dead || owner.Status != 500 {
				t.Fatalf("the dead letter named is %s→%s %s %d, want b→d dead 500", owner.From, owner.To, owner.State, owner.Status)
			}
			if page := deadLetters(t, bB); page.Total != 1 || page.Records[0].ID != dl {
				t.Errorf("b lists %d dead letter(s), want just %s", page.Total, dl)
			}
			for _, b := range []*baton{aB, cB, dB} {
				if page := deadLetters(t, b); page.Total != 0 {
					t.Errorf("%s lists %d dead letter(s), want none: the failure is listed once, at b", b.AdminAddr(), page.Total)
				}
			}

			if replayFirst {
				var res deadletter.ReplayResult
				if st := adminPost(t, bB.AdminAddr(), "/v1/deadletters/"+dl+"/replay", &res); st != 200 || res.Status != 200 {
					t.Fatalf("replay: %d %+v", st, res)
				}
			}
			resp = send(t, aB.EgressAddr(), "b", "POST", "/work", `{"task":"pay vendor-17"}`, http.Header{
				"Content-Type": {"application/json"}, "Traceparent": {tp}, "Idempotency-Key": {key}})
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("resumed: %d %s", resp.StatusCode, b)
			}
			if bAgent.runs.Load() != 2 || c.runs.Load() != 1 || d.done.Load() != 1 {
				t.Errorf("b ran %d times, c %d, d completed %d; want 2, 1, 1", bAgent.runs.Load(), c.runs.Load(), d.done.Load())
			}
			eventually(t, "the dead letter is resolved and unlisted", func() bool {
				r := adminRecord(t, bB.AdminAddr(), dl)
				return r.State == record.Delivered && deadLetters(t, bB).Total == 0
			})

			// The trace tells where the chain stopped and how it resumed.
			v := waitTrace(t, aB.AdminAddr(), traceID, func(v records.TraceView) bool {
				n := 0
				for _, r := range v.Records {
					if r.Side == record.Egress && r.From == "b" && r.To == "c" && r.State == record.Delivered {
						n++
					}
				}
				return n == 2
			})
			var stopped, replayedAtC, positional int
			for _, r := range v.Records {
				if r.Side == record.Egress && r.From == "a" && r.StoppedAt == dl {
					stopped++
				}
				if r.Side == record.Egress && r.From == "b" {
					if r.KeySource != record.KeyFromPosition || r.Correlation == "" || r.Position == 0 {
						t.Errorf("b's handoff %s: key %s by %q at position %d; want a positional key", r.ID, r.KeySource, r.Correlation, r.Position)
					}
					positional++
				}
				if r.Side == record.Egress && r.To == "c" && strings.Contains(r.Outcome, "another body") {
					replayedAtC++
				}
			}
			if stopped != 1 || replayedAtC != 1 || positional < 3 {
				t.Errorf("trace: %d of a's records stopped at %s (want 1), %d of b's re-run calls to c answered from c's window "+
					"with another body (want 1), %d positional keys", stopped, dl, replayedAtC, positional)
			}
			if err := record.Verify(entries(v), v.Tail); err != nil {
				t.Errorf("chain: %v", err)
			}
		})
	}
}

// TestChainDeadPeerResumesWithAutoReplay: D's Baton is down (connection
// refused). B's call to D is dead-lettered after its retries; when D's
// Baton is back, auto_replay delivers the dead letter without other traffic
// to probe it, and the client's re-send with the key its Baton returned
// completes the chain without running C or D again.
func TestChainDeadPeerResumesWithAutoReplay(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	var up func()
	f := startFan(t, store, &stepAgent{},
		"retry: {attempts: 2, backoff: 5ms}\nedges: [{from: a}, {to: c}, {to: d, auto_replay: true, breaker: {open_for: 100ms}}]\n",
		func(ingress string) (addr string) { addr, up = switchedAddr(t, ingress); return addr })
	c, d, bAgent, bB := f.c, f.d, f.b, f.bB
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

	resp := send(t, aB.EgressAddr(), "b", "POST", "/work", `{"task":"book"}`, http.Header{"Content-Type": {"application/json"}})
	dl, key := resp.Header.Get("Baton-Dead-Letter"), resp.Header.Get("Idempotency-Key")
	if resp.StatusCode != http.StatusBadGateway || dl == "" || key == "" {
		t.Fatalf("first run: %d, Baton-Dead-Letter %q, Idempotency-Key %q", resp.StatusCode, dl, key)
	}
	// auto_replay may already be at work on it (the breaker opens for only
	// 100ms): dead, or being replayed, after its 3 attempts.
	if r := adminRecord(t, bB.AdminAddr(), dl); r.To != "d" || (r.State != record.Dead && r.State != record.Replayed) || r.Attempts < 3 {
		t.Fatalf("dead letter %s: →%s %s after %d attempts; want →d dead (or being replayed) after 3", dl, r.To, r.State, r.Attempts)
	}

	up()
	eventually(t, "auto_replay delivers the dead letter", func() bool {
		return d.done.Load() == 1 && deadLetters(t, bB).Total == 0
	})
	resp = send(t, aB.EgressAddr(), "b", "POST", "/work", `{"task":"book"}`, http.Header{
		"Content-Type": {"application/json"}, "Idempotency-Key": {key}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resumed: %d", resp.StatusCode)
	}
	if c.runs.Load() != 1 || d.runs.Load() != 1 || bAgent.runs.Load() != 2 {
		t.Errorf("c ran %d, d %d, b %d times; want 1, 1, 2", c.runs.Load(), d.runs.Load(), bAgent.runs.Load())
	}
}

// TestChainEntryWithoutBaton: the client calls B's ingress with no Baton of
// its own and no key. B's Baton derives the key B's handling runs under and
// returns it, so that the client can resume the chain with it.
func TestChainEntryWithoutBaton(t *testing.T) {
	t.Parallel()
	f := startFan(t, sharedStore(t), &stepAgent{answer: failOnce}, "", nil)
	c, d, bAgent, bB := f.c, f.d, f.b, f.bB

	resp := send(t, bB.IngressAddr(), "b", "POST", "/work", `{"task":"book"}`, http.Header{"Content-Type": {"application/json"}})
	dl, key := resp.Header.Get("Baton-Dead-Letter"), resp.Header.Get("Idempotency-Key")
	if resp.StatusCode != http.StatusBadGateway || dl == "" || key == "" {
		t.Fatalf("first run: %d, Baton-Dead-Letter %q, Idempotency-Key %q", resp.StatusCode, dl, key)
	}
	resp = send(t, bB.IngressAddr(), "b", "POST", "/work", `{"task":"book, again"}`, http.Header{
		"Content-Type": {"application/json"}, "Idempotency-Key": {key}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotency-Key") != key {
		t.Fatalf("resumed: %d, key %q; want 200 and %q", resp.StatusCode, resp.Header.Get("Idempotency-Key"), key)
	}
	if c.runs.Load() != 1 || d.done.Load() != 1 || bAgent.runs.Load() != 2 {
		t.Errorf("c ran %d, d completed %d, b ran %d times; want 1, 1, 2", c.runs.Load(), d.done.Load(), bAgent.runs.Load())
	}
}

// TestChainLeafFailureIsNotAmplified: A → B → C → D → E, and E fails: its
// agent answers 503 (its own failure: final, tried once), or is not running
// (E's Baton refuses before it: D's Baton retries that, 1 + 2 times). D's
// Baton dead-letters it; every Baton above gets the failure naming that
// dead letter and neither retries nor dead-letters it again: every other
// agent ran once, and one dead letter is listed, at D. Another agent's
// Baton refuses to act on it, naming the owner.
func TestChainLeafFailureIsNotAmplified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		down         bool // E's agent is not listening
		wantAttempts int  // d's tries of the handoff to E
	}{
		{name: "the leaf agent answers 503", wantAttempts: 1},
		{name: "the leaf agent is down", down: true, wantAttempts: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := sharedStore(t)
			e := &stepAgent{answer: func(int64) int { return http.StatusServiceUnavailable }}
			var eB *baton
			if tc.down {
				eB = startBaton(t, "agent: e\nupstream: http://"+closedAddr(t)+"\n", store())
			} else {
				eB = node(t, "e", e, "", store())
			}
			leafChain(t, store, eB, e, tc.down, tc.wantAttempts)
		})
	}
}

// leafChain runs A → B → C → D → E, E being eB, and checks that E's
// failure is tried and dead-lettered at D only.
func leafChain(t *testing.T, store func() state.Store, eB *baton, e *stepAgent, down bool, wantAttempts int) {
	t.Helper()
	names := []string{"d", "c", "b"}
	next, batons, agents := map[string]string{"e": eB.IngressAddr()}, map[string]*baton{"e": eB}, map[string]*stepAgent{}
	for i, name := range names {
		step := "e"
		if i > 0 {
			step = names[i-1]
		}
		agents[name] = &stepAgent{steps: []string{step}, otel: true}
		batons[name] = node(t, name, agents[name], peerYAML(map[string]string{step: next[step]})+"retry: {backoff: 5ms}\n", store())
		next[name] = batons[name].IngressAddr()
	}
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": next["b"]})+"retry: {backoff: 5ms}\n", store())

	resp := send(t, aB.EgressAddr(), "b", "POST", "/work", `{}`, http.Header{"Content-Type": {"application/json"}})
	dl := resp.Header.Get("Baton-Dead-Letter")
	if resp.StatusCode < 500 || dl == "" {
		t.Fatalf("the client got %d naming %q; want a 5xx naming the dead letter", resp.StatusCode, dl)
	}
	if n := e.runs.Load(); !down && n != 1 {
		t.Errorf("E ran %d times, want 1 (its own failure is final)", n)
	}
	if r := adminRecord(t, batons["d"].AdminAddr(), dl); r.Attempts != wantAttempts {
		t.Errorf("d tried E %d times, want %d", r.Attempts, wantAttempts)
	}
	for name, a := range agents {
		if n := a.runs.Load(); n != 1 {
			t.Errorf("%s ran %d times, want 1", name, n)
		}
	}
	if page := deadLetters(t, batons["d"]); page.Total != 1 || page.Records[0].ID != dl || page.Records[0].To != "e" {
		t.Fatalf("d lists %+v, want just %s (d→e)", page.Records, dl)
	}
	for _, name := range []string{"a", "b", "c"} {
		b := aB
		if name != "a" {
			b = batons[name]
		}
		if page := deadLetters(t, b); page.Total != 0 {
			t.Errorf("%s lists %d dead letter(s), want none", name, page.Total)
		}
	}
	// The dead letter is d's: b's Baton refuses to replay, drop or show it,
	// or to list d's edges, and says whose it is.
	for _, req := range []struct{ method, path string }{
		{"POST", "/v1/deadletters/" + dl + "/replay"}, {"DELETE", "/v1/deadletters/" + dl},
		{"GET", "/v1/deadletters/" + dl}, {"GET", "/v1/deadletters?edge=d%E2%86%92e"},
	} {
		st, doc := adminProblem(t, req.method, batons["b"].AdminAddr(), req.path)
		if st != http.StatusMisdirectedRequest || !strings.HasSuffix(doc["type"].(string), "#not-this-agent") || doc["owner"] != "d" {
			t.Errorf("%s %s at b: %d %v; want 421 not-this-agent naming d", req.method, req.path, st, doc)
		}
	}
}

// TestDuplicatesInFlightAreNoDeadLetters: while B's agent works on a
// handoff, the same handoff (same key) arrives again and again; each
// duplicate is answered 409 request-in-flight, which is not a failure of
// the handoff and never becomes a dead letter.
func TestDuplicatesInFlightAreNoDeadLetters(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	release := make(chan struct{})
	var calls atomic.Int64
	ag := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-release
		io.WriteString(w, "done")
	}))
	t.Cleanup(ag.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	bB := startBaton(t, "agent: b\nupstream: "+ag.URL+"\n", store())
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()})+
		"retry: {attempts: 1, backoff: 1ms, max_backoff: 1ms}\n", store())
	hdr := http.Header{"Idempotency-Key": {`"order-42"`}, "Content-Type": {"application/json"}}
	first := make(chan int)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+aB.EgressAddr()+"/pay", strings.NewReader(`{"n":1}`))
		req.Host, req.Header = "b", hdr.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	eventually(t, "b's agent has the first request", func() bool { return calls.Load() == 1 })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", "http://"+aB.EgressAddr()+"/pay", strings.NewReader(`{"n":1}`))
			req.Host, req.Header = "b", hdr.Clone()
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict || resp.Header.Get("Baton-Dead-Letter") != "" {
				t.Errorf("a duplicate in flight: %d %v; want 409 and no dead letter", resp.StatusCode, resp.Header)
			}
		}()
	}
	wg.Wait()
	close(release)
	if st := <-first; st != http.StatusOK {
		t.Errorf("the first: %d", st)
	}
	if page := deadLetters(t, aB); page.Total != 0 {
		t.Errorf("a lists %d dead letter(s) after a duplicate storm, want none", page.Total)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("b's agent ran %d times, want 1", n)
	}
}

// switchedAddr returns an address that refuses connections until up is
// called, and from then on forwards them to target: a peer that is down,
// then back at the same address.
func switchedAddr(t *testing.T, target string) (addr string, up func()) {
	t.Helper()
	fd, addr := boundSocket(t)
	var once sync.Once
	closed := make(chan struct{})
	t.Cleanup(func() {
		once.Do(func() { syscall.Close(fd) })
		close(closed)
	})
	return addr, func() {
		once.Do(func() {
			if err := syscall.Listen(fd, 128); err != nil {
				t.Fatal(err)
			}
			// The os.File owns fd from here: closing it (never fd itself,
			// whose number its finalizer would close again, maybe another
			// socket's by then) leaves the listener's own copy.
			f := os.NewFile(uintptr(fd), "switched")
			l, err := net.FileListener(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			go func() { <-closed; l.Close() }()
			go forward(l, target)
		})
	}
}

// forward copies each connection accepted on l to a new one to target.
func forward(l net.Listener, target string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer out.Close()
			go func() { io.Copy(out, in); out.(*net.TCPConn).CloseWrite() }()
			io.Copy(in, out)
		}()
	}
}

// adminProblem makes an admin request and decodes its problem document.
func adminProblem(t *testing.T, method, admin, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+admin+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc := map[string]any{"type": ""}
	json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc
}

func redisStoreWithPrefix(t testing.TB, url, prefix string) state.Store {
	t.Helper()
	s, err := state.NewRedis(config.Redis{URL: url, Prefix: prefix,
		DialTimeout: config.Duration(5 * time.Second), OpTimeout: config.Duration(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

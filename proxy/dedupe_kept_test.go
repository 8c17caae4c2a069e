package proxy_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
	"github.com/redis/go-redis/v9"
)

// TestDedupeAnswerKeptWhileStoreDown: the agent answers while Redis is
// down, so its Baton cannot store the answer in the window. The answer is
// not lost: a resend meanwhile is answered from the process, and once
// Redis is back the answer is written there, where another Baton sharing
// the window finds it. The agent runs once.
func TestDedupeAnswerKeptWhileStoreDown(t *testing.T) {
	t.Parallel()
	srv, store := durableRedis(t)
	var runs atomic.Int64
	got, answer := make(chan struct{}), make(chan struct{})
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(got)
			<-answer
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"booked":true}`)
	})
	p := dedupePair(t, agent, store, "dedupe: {lease: 1s}\n")
	send := func(addr string) *http.Response {
		req, _ := http.NewRequest("POST", "http://"+addr+"/book", strings.NewReader(`{"order":1}`))
		req.Header.Set("Baton-Agent", "analyst")
		req.Header.Set("Idempotency-Key", "order-1")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	first := make(chan *http.Response, 1)
	go func() { first <- send(p.b.IngressAddr()) }()
	<-got
	srv.Kill()
	close(answer)
	if resp := <-first; resp.StatusCode != http.StatusCreated {
		t.Fatalf("the agent's answer during the outage: %d", resp.StatusCode)
	}
	// The lease (1s) lapses while Redis is down; a resend to this Baton is
	// answered from what it kept.
	time.Sleep(1200 * time.Millisecond)
	resp := send(p.b.IngressAddr())
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a resend during the outage: %d %v, want the kept answer replayed", resp.StatusCode, resp.Header)
	}

	srv.Restart(t)
	other := startBaton(t, "agent: summarizer\nupstream: http://127.0.0.1:1\n", store)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := send(other.IngressAddr())
		if resp.StatusCode == http.StatusCreated && resp.Header.Get("Idempotent-Replayed") == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis is back, but another Baton on the window answers %d: the kept answer was not written", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the agent ran %d times, want 1", n)
	}
	if !strings.Contains(p.b.log.String(), "kept in this process") {
		t.Error("the kept write was not logged")
	}
}

// TestDedupeReleaseKeptWhileStoreDown: the agent fails while Redis is
// down, so its Baton cannot release the claim. When Redis is back, the
// resend is delivered at once, not refused as in flight until the lease
// lapses.
func TestDedupeReleaseKeptWhileStoreDown(t *testing.T) {
	t.Parallel()
	srv, store := durableRedis(t)
	var runs atomic.Int64
	got, answer := make(chan struct{}), make(chan struct{})
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(got)
			<-answer
			http.Error(w, "booking system down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	p := dedupePair(t, agent, store, "dedupe: {lease: 1m}\n")
	first := make(chan *http.Response, 1)
	go func() { first <- post(t, p.b.IngressAddr(), "order-2", `{}`) }()
	<-got
	srv.Kill()
	close(answer)
	if resp := <-first; resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the agent's failure: %d", resp.StatusCode)
	}
	srv.Restart(t)
	// The restarted Redis holds the claim (its lease is a minute); the
	// resend takes it over, or finds it released.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := post(t, p.b.IngressAddr(), "order-2", `{}`)
		if resp.StatusCode == http.StatusCreated {
			break
		}
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("the resend once Redis is back: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond) // the store's client reconnecting
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the agent ran %d times, want 2 (failed, then resent)", n)
	}
}

// durableRedis is killableRedis with every write on disk before it is
// answered: Kill then Restart keeps the windows.
func durableRedis(t *testing.T) (*redistest.Server, state.Store) {
	t.Helper()
	srv := redistest.StartDurable(t)
	store, err := state.NewRedis(config.Redis{URL: srv.URL(), DialTimeout: config.Duration(200 * time.Millisecond),
		OpTimeout: config.Duration(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	return srv, store
}

// TestDedupeClaimWhoseReplyWasLost: the store makes a claim but its reply
// never reaches the Baton (it times out waiting). The request is refused
// with 503, retryable, and the claim that stands in the store is no
// obstacle to the resend: it is delivered, not refused as in flight for the
// length of a lease.
func TestDedupeClaimWhoseReplyWasLost(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	gate := redistest.NewGate(t, opts.Addr)
	agent, agentURL := newKeyedAgent(t, func(int64) bool { return false })
	b := startBaton(t, holderConfig(agentURL, "127.0.0.1:0", "redis://"+gate.Addr, prefix, ", op_timeout: 300ms"), nil)

	warmed := warmPool(t, b.IngressAddr())
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	claims, _ := rdb.Keys(context.Background(), prefix+"idem:*").Result()
	for _, k := range claims { // the warm-up's answers
		rdb.Del(context.Background(), k)
	}
	gate.Hold()
	st, _, err := sendKeyed(b.IngressAddr(), "lost-reply-1")
	if err != nil || st != 503 {
		t.Fatalf("the claim's reply held: %d %v, want 503 store-unavailable", st, err)
	}
	if n, err := rdb.Keys(context.Background(), prefix+"idem:*").Result(); err != nil || len(n) != 1 {
		t.Fatalf("the claim is not in the store (%v, %v): the test would show nothing", n, err)
	}
	gate.Open()
	st, body, err := sendKeyed(b.IngressAddr(), "lost-reply-1")
	if err != nil || st != 200 || body != "done" {
		t.Fatalf("the resend: %d %q %v, want it delivered", st, body, err)
	}
	if n := agent.calls.Load() - warmed; n != 1 {
		t.Errorf("agent ran %d times, want once", n)
	}
}

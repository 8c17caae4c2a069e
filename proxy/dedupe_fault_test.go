package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

func TestDedupeRedisKilledFailsClosedThenResumes(t *testing.T) {
	t.Parallel()
	srv, store := killableRedis(t)
	agent := &counting{}
	p := dedupePair(t, agent, store, "")

	if resp := post(t, p.a.EgressAddr(), "k1", `{}`); resp.StatusCode != 201 {
		t.Fatalf("before the outage: %d", resp.StatusCode)
	}
	srv.Kill()
	for _, key := range []string{"k1", "k2"} {
		// Straight to the receiver: its own answer.
		req, _ := http.NewRequest("POST", "http://"+p.b.IngressAddr()+"/pay", strings.NewReader("{}"))
		req.Header.Set("Baton-Agent", "analyst")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" ||
			!strings.HasSuffix(readProblem(t, resp).Type, "#store-unavailable") {
			t.Errorf("%s during the outage: %d", key, resp.StatusCode)
		}
		resp.Body.Close()
		// Through the sender's Baton, the receiver's answer passes through
		// and the handoff is dead-lettered for a later replay.
		resp = post(t, p.a.EgressAddr(), key, `{}`)
		if resp.StatusCode != 503 || resp.Header.Get("Baton-Dead-Letter") == "" {
			t.Errorf("%s through the sender during the outage: %d %v", key, resp.StatusCode, resp.Header)
		}
	}
	if n := agent.total.Load(); n != 1 {
		t.Errorf("the agent got %d deliveries; during a fail-closed outage it must get none", n)
	}
	srv.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := post(t, p.a.EgressAddr(), "k3", `{}`)
		if resp.StatusCode == 201 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis is back but Baton still answers %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := agent.total.Load(); n != 2 {
		t.Errorf("agent deliveries %d, want 2", n)
	}
}

func TestDedupeFailOpenDelivers(t *testing.T) {
	t.Parallel()
	srv, store := killableRedis(t)
	agent := &counting{}
	p := dedupePair(t, agent, store, "dedupe: {on_store_error: fail_open}\n")
	srv.Kill()
	if resp := post(t, p.a.EgressAddr(), "k1", `{}`); resp.StatusCode != 201 {
		t.Errorf("fail_open during the outage: %d", resp.StatusCode)
	}
	if !strings.Contains(p.b.log.String(), `"dedupe":"store_error"`) {
		t.Error("the store error was not logged on the access line")
	}
}

func newAgent(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptestServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// killableRedis starts a throwaway redis-server of the test's own, to kill
// and restart, and a store on it that gives up quickly while it is down.
func killableRedis(t *testing.T) (*redistest.Server, state.Store) {
	t.Helper()
	srv := redistest.Start(t)
	store, err := state.NewRedis(config.Redis{URL: srv.URL(), DialTimeout: config.Duration(200 * time.Millisecond),
		OpTimeout: config.Duration(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	return srv, store
}

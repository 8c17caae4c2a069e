package proxy_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
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

// TestDedupeLeaseLapsesAfterBatonDies kills a real Baton process with
// SIGKILL while its agent works: its claim stays in Redis, unrenewed. A
// duplicate through another Baton sharing the window is refused while the
// lease runs and delivered once it lapses.
func TestDedupeLeaseLapsesAfterBatonDies(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	var calls atomic.Int64
	hang := make(chan struct{})
	agentSrv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-hang // the first delivery never completes: its Baton dies
			return
		}
		io.WriteString(w, "done")
	})
	ag := newAgent(t, agentSrv)
	t.Cleanup(func() { close(hang) }) // before the agent server closes
	cfg := "agent: summarizer\nupstream: " + ag + "\nlisten: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}\n" +
		"store: {redis: {url: " + url + ", prefix: '" + prefix + "'}}\ndedupe: {lease: 1500ms}\n"

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+cfg)
	out, _ := child.StdoutPipe()
	child.Stderr = io.Discard
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		t.Fatalf("child Baton: %q %v", line, err)
	}
	ingress := strings.TrimSpace(strings.TrimPrefix(line, "ready "))

	send := func(addr string) (int, error) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/pay", strings.NewReader("{}"))
		req.Header.Set("Baton-Agent", "analyst")
		req.Header.Set("Idempotency-Key", "lease-1")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	go send(ingress) // reaches the agent, then its Baton is killed
	for calls.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()

	other := startBaton(t, cfg, nil)
	killedAt := time.Now()
	if st, err := send(other.IngressAddr()); err != nil || st != 409 {
		t.Fatalf("duplicate while the dead Baton's lease runs: %d %v", st, err)
	}
	for {
		st, err := send(other.IngressAddr())
		if err != nil {
			t.Fatal(err)
		}
		if st == 200 {
			break
		}
		if st != 409 || time.Since(killedAt) > 10*time.Second {
			t.Fatalf("after the lease: %d", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if calls.Load() != 2 {
		t.Errorf("agent ran %d times, want 2 (the dead Baton's and one after the lease)", calls.Load())
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

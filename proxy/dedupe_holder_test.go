package proxy_test

// Claims die with their holder: real Baton processes, killed with SIGKILL
// or paused with SIGSTOP, on a real Redis and the shipped defaults (a
// 30 s dedupe lease, a 3 s holder timeout).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state/redistest"
)

// childBaton is a Baton in a process of its own, to kill or pause.
type childBaton struct {
	cmd     *exec.Cmd
	ingress string
	log     *syncBuffer
}

// startChild starts a Baton process configured by cfg (YAML) and waits
// until it serves.
func startChild(t *testing.T, cfg string) *childBaton {
	t.Helper()
	c := &childBaton{cmd: exec.Command(os.Args[0], "-test.run=^$"), log: &syncBuffer{}}
	c.cmd.Env = append(os.Environ(), childEnv+"="+cfg)
	out, _ := c.cmd.StdoutPipe()
	c.cmd.Stderr = c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		t.Fatalf("child Baton: %q %v\n%s", line, err, c.log)
	}
	c.ingress = strings.TrimSpace(strings.TrimPrefix(line, "ready "))
	return c
}

func (c *childBaton) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

// freePort returns a loopback address no one listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// keyedAgent answers "done" except to the calls hang holds, and counts
// every call.
type keyedAgent struct {
	calls atomic.Int64
	hang  func(n int64) bool
	block chan struct{}
}

func newKeyedAgent(t *testing.T, hang func(n int64) bool) (*keyedAgent, string) {
	a := &keyedAgent{hang: hang, block: make(chan struct{})}
	url := newAgent(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := a.calls.Add(1); a.hang(n) {
			<-a.block // its Baton dies meanwhile
			return
		}
		io.WriteString(w, "done")
	}))
	t.Cleanup(func() { close(a.block) }) // before the agent's server closes
	return a, url
}

// waitCalls waits until the agent has been called n times.
func (a *keyedAgent) waitCalls(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); a.calls.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent was called %d times in 10s, want %d", a.calls.Load(), n)
		}
	}
}

// sendKeyed sends one handoff with an Idempotency-Key to a Baton's ingress.
func sendKeyed(addr, key string) (int, string, error) {
	req, _ := http.NewRequest("POST", "http://"+addr+"/pay", strings.NewReader("{}"))
	req.Header.Set("Baton-Agent", "analyst")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// warmPool sends handoffs to a Baton's ingress at once, so that its pool
// of Redis connections holds several ready ones: a request made while a
// gate holds Redis's replies then takes one and sends its command at once,
// instead of waiting on a new connection's handshake, whose reply the gate
// holds too. It returns how many handoffs reached the agent.
func warmPool(t *testing.T, addr string) int64 {
	t.Helper()
	const n = 4
	errs := make(chan error, n)
	for i := range n {
		go func() {
			st, _, err := sendKeyed(addr, "warm-up-"+strconv.Itoa(i))
			if err == nil && st != 200 {
				err = fmt.Errorf("warm-up: %d", st)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// waitForClaim waits until Redis holds a claim under prefix.
func waitForClaim(t *testing.T, rdb *redis.Client, prefix string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		keys, err := rdb.Keys(context.Background(), prefix+"idem:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the Baton's claim did not reach Redis in 10s")
		}
	}
}

// holderConfig is a Baton for agent summarizer on the defaults, but for
// where it listens and its store.
func holderConfig(agent, ingress, redisURL, prefix, extra string) string {
	return "agent: summarizer\nupstream: " + agent + "\nlisten: {egress: 127.0.0.1:0, ingress: " + ingress +
		", admin: 127.0.0.1:0}\nstore: {redis: {url: " + redisURL + ", prefix: '" + prefix + "'" + extra + "}}\n"
}

// TestDedupeRestartedBatonFreesItsClaims: a Baton SIGKILLed while its agent
// works leaves a claim in Redis with 30 s of lease; started again on the
// same ingress, it frees its previous process's claims before it serves,
// so the first resend is delivered.
func TestDedupeRestartedBatonFreesItsClaims(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	agent, agentURL := newKeyedAgent(t, func(n int64) bool { return n == 1 })
	cfg := holderConfig(agentURL, freePort(t), url, prefix, "")

	first := startChild(t, cfg)
	go sendKeyed(first.ingress, "restart-1")
	agent.waitCalls(t, 1)
	first.kill(t)

	again := startChild(t, cfg)
	st, body, err := sendKeyed(again.ingress, "restart-1")
	if err != nil || st != 200 || body != "done" {
		t.Fatalf("first resend after the restart: %d %q %v\n%s", st, body, err, again.log)
	}
	if n := agent.calls.Load(); n != 2 {
		t.Errorf("agent ran %d times, want 2 (the killed Baton's and the resend)", n)
	}
	if !strings.Contains(again.log.String(), "previous process freed") {
		t.Errorf("the restarted Baton did not log freeing its predecessor's claims:\n%s", again.log)
	}
	if st, body, _ := sendKeyed(again.ingress, "restart-1"); st != 200 || body != "done" {
		t.Errorf("a further resend was not answered from the window: %d %q", st, body)
	}
	if n := agent.calls.Load(); n != 2 {
		t.Errorf("agent ran %d times after a further resend, want 2", n)
	}
}

// TestDedupeDeadBatonsClaimTakenOver: a resend that reaches another Baton
// of the same agent while the killed one's claim stands is refused as in
// flight until the dead holder's mark lapses, then delivered: seconds, not
// the 30 s lease.
func TestDedupeDeadBatonsClaimTakenOver(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	agent, agentURL := newKeyedAgent(t, func(n int64) bool { return n == 1 })
	cfg := holderConfig(agentURL, "127.0.0.1:0", url, prefix, "")
	if lease := mustDefaults(t).DedupeFor("analyst").Lease.D(); lease < 30*time.Second {
		t.Fatalf("the default lease is %v: this test shows a dead holder's claim freed well before it", lease)
	}

	dying := startChild(t, cfg)
	go sendKeyed(dying.ingress, "takeover-1")
	agent.waitCalls(t, 1)
	dying.kill(t)
	killedAt := time.Now()

	other := startBaton(t, cfg, nil)
	if st, _, err := sendKeyed(other.IngressAddr(), "takeover-1"); err != nil || st != 409 {
		t.Fatalf("resend while the dead Baton's mark lasts: %d %v", st, err)
	}
	for {
		st, body, err := sendKeyed(other.IngressAddr(), "takeover-1")
		if err != nil {
			t.Fatal(err)
		}
		if st == 200 && body == "done" {
			break
		}
		if st != 409 || time.Since(killedAt) > 10*time.Second {
			t.Fatalf("%v after the kill: %d %q", time.Since(killedAt), st, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("delivered %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	if n := agent.calls.Load(); n != 2 {
		t.Errorf("agent ran %d times, want 2 (the dead Baton's and one after its claim was freed)", n)
	}
	if l := other.log.String(); !strings.Contains(l, "dead holder taken over") || !strings.Contains(l, `"dedupe":"taken_over"`) {
		t.Errorf("the takeover was not logged:\n%s", l)
	}
}

// TestDedupePausedBatonIsFenced: a Baton whose claim was made in Redis is
// paused (SIGSTOP) before it hears so; another Baton of the agent takes the
// claim over once the paused one's mark lapses, and completes. Resumed, the
// paused Baton must not deliver: the agent runs once, and the window keeps
// the one answer.
func TestDedupePausedBatonIsFenced(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	agent, agentURL := newKeyedAgent(t, func(int64) bool { return false })
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	gate := redistest.NewGate(t, opts.Addr)

	// The paused Baton reaches Redis through the gate. Its op_timeout is
	// long so that the claim's reply, held through the pause, is still
	// read when it resumes (as after a pause between the reply's arrival
	// and its reading).
	paused := startChild(t, holderConfig(agentURL, "127.0.0.1:0", "redis://"+gate.Addr, prefix, ", op_timeout: 1m"))
	other := startBaton(t, holderConfig(agentURL, "127.0.0.1:0", url, prefix, ""), nil)

	warmed := warmPool(t, paused.ingress)
	claims, _ := rdb.Keys(context.Background(), prefix+"idem:*").Result()
	for _, k := range claims { // the warm-up's answers: out of the way of waitForClaim
		rdb.Del(context.Background(), k)
	}
	gate.Hold()
	answer := make(chan string, 1)
	go func() {
		st, body, err := sendKeyed(paused.ingress, "fence-1")
		if err != nil {
			answer <- err.Error()
			return
		}
		answer <- http.StatusText(st) + " " + body
	}()
	waitForClaim(t, rdb, prefix)
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()

	for {
		st, body, err := sendKeyed(other.IngressAddr(), "fence-1")
		if err != nil {
			t.Fatal(err)
		}
		if st == 200 && body == "done" {
			break
		}
		if st != 409 || time.Since(pausedAt) > 15*time.Second {
			t.Fatalf("%v into the pause: %d %q", time.Since(pausedAt), st, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("taken over %v into the pause", time.Since(pausedAt).Round(time.Millisecond))

	gate.Open()
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-answer:
		if !strings.HasPrefix(got, http.StatusText(http.StatusConflict)) {
			t.Errorf("the resumed Baton answered %q, want 409 in flight", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the resumed Baton did not answer")
	}
	if n := agent.calls.Load() - warmed; n != 1 {
		t.Errorf("agent ran %d times, want once", n)
	}
	for _, b := range []string{paused.ingress, other.IngressAddr()} {
		if st, body, err := sendKeyed(b, "fence-1"); err != nil || st != 200 || body != "done" {
			t.Errorf("resend to %s after the pause: %d %q %v", b, st, body, err)
		}
	}
	if n := agent.calls.Load() - warmed; n != 1 {
		t.Errorf("agent ran %d times after resends, want once", n)
	}
	if !strings.Contains(paused.log.String(), "holder mark lapsed") {
		t.Errorf("the resumed Baton did not log its lapsed mark:\n%s", paused.log)
	}
}

// mustDefaults returns the shipped configuration's defaults.
func mustDefaults(t *testing.T) *config.Config {
	t.Helper()
	c := &config.Config{Agent: "a", Upstream: "http://127.0.0.1:1"}
	c.ApplyDefaults()
	return c
}

package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// backends runs a test against the memory store and a real Redis.
func backends(t *testing.T, run func(t *testing.T, newStore func(t *testing.T) state.Store)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		run(t, func(t *testing.T) state.Store {
			return state.NewMemory(config.Memory{MaxEntries: 100_000, MaxBytes: 64 << 20})
		})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		url := redistest.Shared(t)
		run(t, func(t *testing.T) state.Store { return redisStore(t, url) })
	})
}

func redisStore(t *testing.T, url string) state.Store {
	t.Helper()
	s, err := state.NewRedis(config.Redis{URL: url, Prefix: redistest.Prefix(t, url),
		DialTimeout: config.Duration(5 * time.Second), OpTimeout: config.Duration(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dedupePair is analyst → summarizer where summarizer's Baton keeps the
// window in the store given.
func dedupePair(t *testing.T, agent http.Handler, store state.Store, extraB string) *pair {
	t.Helper()
	ag := httptest.NewServer(agent)
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n"+extraB, store)
	// The sender does not retry here, so that what the tests see is the
	// receiver's window alone.
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\nretry: {attempts: 0}\n", nil)
	return &pair{a: a, b: b, agent: ag}
}

// counting is an agent that counts deliveries per Idempotency-Key.
type counting struct {
	mu     sync.Mutex
	perKey map[string]int
	total  atomic.Int64
	hold   chan struct{} // when set, requests wait on it
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.total.Add(1)
	c.mu.Lock()
	if c.perKey == nil {
		c.perKey = map[string]int{}
	}
	c.perKey[r.Header.Get("Idempotency-Key")]++
	c.mu.Unlock()
	if c.hold != nil {
		<-c.hold
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Agent-Run", strconv.FormatInt(c.total.Load(), 10))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"echo":%q}`, body)
}

func post(t *testing.T, addr, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+"/pay", strings.NewReader(body))
	req.Host = "summarizer"
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestDedupeStorm(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newStore func(*testing.T) state.Store) {
		agent := &counting{hold: make(chan struct{})}
		p := dedupePair(t, agent, newStore(t), "")
		const n = 64
		var wg sync.WaitGroup
		statuses := make([]int, n)
		bodies := make([]string, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := post(t, p.a.EgressAddr(), "storm-1", `{"amount":100}`)
				b, _ := io.ReadAll(resp.Body)
				statuses[i], bodies[i] = resp.StatusCode, string(b)
				if resp.StatusCode == 409 && resp.Header.Get("Retry-After") == "" {
					t.Errorf("409 without Retry-After")
				}
			}()
		}
		// Let the one delivered request finish once all the others have
		// been answered 409 (they return while it is held).
		deadline := time.Now().Add(10 * time.Second)
		for agent.total.Load() < 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		close(agent.hold)
		wg.Wait()
		if got := agent.total.Load(); got != 1 {
			t.Fatalf("agent ran %d times for one key, want 1", got)
		}
		ok := 0
		for i, s := range statuses {
			switch s {
			case 201:
				ok++
				if bodies[i] != `{"echo":"{\"amount\":100}"}` {
					t.Errorf("body %q", bodies[i])
				}
			case 409:
			default:
				t.Errorf("caller %d got %d: %s", i, s, bodies[i])
			}
		}
		if ok < 1 {
			t.Error("nobody got the agent's response")
		}
		// A later retry gets the replay.
		resp := post(t, p.a.EgressAddr(), "storm-1", `{"amount":100}`)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" ||
			string(b) != `{"echo":"{\"amount\":100}"}` || resp.Header.Get("X-Agent-Run") != "1" {
			t.Errorf("replay: %d %v %s", resp.StatusCode, resp.Header, b)
		}
		if agent.total.Load() != 1 {
			t.Errorf("the replay reached the agent")
		}
	})
}

func TestDedupeManyKeysRandomDuplicates(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newStore func(*testing.T) state.Store) {
		agent := &counting{}
		p := dedupePair(t, agent, newStore(t), "")
		const requests, keys, workers = 10_000, 1_000, 32
		// Every key at least once, then random duplicates, in random order.
		plan := make([]int, 0, requests)
		for k := 0; k < keys; k++ {
			plan = append(plan, k)
		}
		rng := mrand.New(mrand.NewPCG(1, 2))
		for len(plan) < requests {
			plan = append(plan, rng.IntN(keys))
		}
		rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })

		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
		work := make(chan int)
		var wg sync.WaitGroup
		var replayed, bad atomic.Int64
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range work {
					for attempt := 0; ; attempt++ {
						req, _ := http.NewRequest("POST", "http://"+p.a.EgressAddr()+"/pay", strings.NewReader(`{"k":`+strconv.Itoa(k)+`}`))
						req.Host = "summarizer"
						req.Header.Set("Idempotency-Key", "key-"+strconv.Itoa(k))
						resp, err := client.Do(req)
						if err != nil {
							bad.Add(1)
							break
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == 409 && attempt < 1000 {
							time.Sleep(time.Millisecond) // in flight: retry, as Retry-After says
							continue
						}
						if resp.StatusCode != 201 {
							if bad.Add(1) < 5 {
								b, _ := io.ReadAll(resp.Body)
								t.Logf("key %d: %d %s", k, resp.StatusCode, b)
							}
						}
						if resp.Header.Get("Idempotent-Replayed") == "true" {
							replayed.Add(1)
						}
						break
					}
				}
			}()
		}
		for _, k := range plan {
			work <- k
		}
		close(work)
		wg.Wait()
		if bad.Load() != 0 {
			t.Errorf("%d requests failed", bad.Load())
		}
		agent.mu.Lock()
		defer agent.mu.Unlock()
		if len(agent.perKey) != keys {
			t.Errorf("agent saw %d distinct keys, want %d", len(agent.perKey), keys)
		}
		for k, n := range agent.perKey {
			if n != 1 {
				t.Errorf("key %s delivered %d times", k, n)
			}
		}
		if got := replayed.Load(); got != requests-keys {
			t.Errorf("%d replays, want %d", got, requests-keys)
		}
	})
}

func TestDedupeRefusals(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newStore func(*testing.T) state.Store) {
		agent := &counting{}
		p := dedupePair(t, agent, newStore(t), "dedupe: {require_key: true}\n")

		if resp := post(t, p.a.EgressAddr(), "k-1", `{"a":1}`); resp.StatusCode != 201 {
			t.Fatalf("first: %d", resp.StatusCode)
		}
		// Same key, different body: 422.
		resp := post(t, p.a.EgressAddr(), "k-1", `{"a":2}`)
		if resp.StatusCode != 422 || readProblem(t, resp).Type != "https://github.com/batonproxy/baton/blob/main/docs/problems.md#idempotency-key-mismatch" {
			t.Errorf("mismatch: %d", resp.StatusCode)
		}
		// No key where required: 400. (Straight to ingress: the sender's
		// Baton would derive one.)
		req, _ := http.NewRequest("POST", "http://"+p.b.IngressAddr()+"/pay", strings.NewReader("{}"))
		req.Header.Set("Baton-Agent", "analyst")
		r2, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Body.Close()
		if r2.StatusCode != 400 || !strings.HasSuffix(readProblem(t, r2).Type, "#idempotency-key-required") {
			t.Errorf("missing key: %d", r2.StatusCode)
		}
		// GET is not covered: never deduplicated, never refused.
		req, _ = http.NewRequest("GET", "http://"+p.b.IngressAddr()+"/status", nil)
		r3, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		r3.Body.Close()
		if r3.StatusCode != 201 {
			t.Errorf("GET: %d", r3.StatusCode)
		}
		if agent.total.Load() != 2 {
			t.Errorf("agent ran %d times, want 2 (first POST and the GET)", agent.total.Load())
		}
	})
}

func TestDedupeA2AErrorsAreJSONRPC(t *testing.T) {
	t.Parallel()
	agent := &counting{hold: make(chan struct{})}
	p := dedupePair(t, agent, nil, "")
	msg := `{"jsonrpc":"2.0","id":"req-7","method":"SendMessage","params":{"message":{"messageId":"m-9","role":"user","parts":[{"text":"x"}]}}}`
	first := make(chan struct{})
	go func() {
		defer close(first)
		post(t, p.a.EgressAddr(), "", msg)
	}()
	for agent.total.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	resp := post(t, p.a.EgressAddr(), "", msg) // same message id while the first runs
	close(agent.hold)
	<-first
	var rpc struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Error   struct {
			Code int `json:"code"`
			Data struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rpc); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || rpc.JSONRPC != "2.0" || rpc.ID != "req-7" || rpc.Error.Code != -32052 ||
		rpc.Error.Data.Status != 409 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("in-flight A2A duplicate: HTTP %d %+v", resp.StatusCode, rpc)
	}
}

func TestDedupeAgentFailureReleasesKey(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newStore func(*testing.T) state.Store) {
		var calls atomic.Int64
		agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch calls.Add(1) {
			case 1: // the agent dies mid-request: no response at all
				conn, _, _ := http.NewResponseController(w).Hijack()
				conn.Close()
			case 2: // the agent says it failed
				http.Error(w, "boom", 500)
			default:
				io.WriteString(w, "done")
			}
		})
		p := dedupePair(t, agent, newStore(t), "")
		for i, want := range []int{502, 500, 200, 200} {
			resp := post(t, p.a.EgressAddr(), "fail-1", `{}`)
			if resp.StatusCode != want {
				t.Errorf("attempt %d: %d, want %d", i+1, resp.StatusCode, want)
			}
		}
		if calls.Load() != 3 {
			t.Errorf("agent ran %d times, want 3 (the last attempt is a replay)", calls.Load())
		}
	})
}

func TestDedupeReplayErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "charged, then crashed", http.StatusServiceUnavailable)
	})
	p := dedupePair(t, agent, nil, "edges: [{from: analyst, dedupe: {replay_errors: true}}]\n")
	for i := 0; i < 3; i++ {
		resp := post(t, p.a.EgressAddr(), "err-1", `{}`)
		if resp.StatusCode != 503 {
			t.Errorf("attempt %d: %d", i, resp.StatusCode)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("agent ran %d times with replay_errors, want 1", calls.Load())
	}
}

func TestDedupeStreamReplayedByteForByte(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newStore func(*testing.T) state.Store) {
		var calls atomic.Int64
		events := []string{"event: a\ndata: 1\n\n", "data: two\ndata: lines\n\n", ": comment\n\n", "data: \u00e9t\u00e9\n\n"}
		agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Stream", "yes")
			for _, e := range events {
				io.WriteString(w, e)
				w.(http.Flusher).Flush()
			}
		})
		p := dedupePair(t, agent, newStore(t), "dedupe: {max_response_bytes: 1024}\n")
		first := post(t, p.a.EgressAddr(), "sse-1", `{}`)
		b1, _ := io.ReadAll(first.Body)
		second := post(t, p.a.EgressAddr(), "sse-1", `{}`)
		b2, _ := io.ReadAll(second.Body)
		if !bytes.Equal(b1, b2) || string(b1) != strings.Join(events, "") {
			t.Errorf("replayed stream differs:\n%q\n%q", b1, b2)
		}
		if second.Header.Get("Content-Type") != "text/event-stream" || second.Header.Get("X-Stream") != "yes" ||
			second.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replayed headers %v", second.Header)
		}
		if calls.Load() != 1 {
			t.Errorf("agent ran %d times", calls.Load())
		}
	})
}

func TestDedupeStreamPastCapNotRetained(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	chunk := strings.Repeat("x", 100)
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 20; i++ {
			io.WriteString(w, "data: "+chunk+"\n\n")
			w.(http.Flusher).Flush()
		}
	})
	p := dedupePair(t, agent, nil, "dedupe: {max_response_bytes: 512}\n")
	first := post(t, p.a.EgressAddr(), "big-1", `{}`)
	if b, _ := io.ReadAll(first.Body); len(b) != 20*(len(chunk)+8) {
		t.Errorf("first response cut to %d bytes", len(b))
	}
	second := post(t, p.a.EgressAddr(), "big-1", `{}`)
	if second.StatusCode != 409 || !strings.HasSuffix(readProblem(t, second).Type, "#response-not-retained") {
		t.Errorf("duplicate of an oversized stream: %d", second.StatusCode)
	}
	if calls.Load() != 1 {
		t.Errorf("agent ran %d times", calls.Load())
	}
}

func TestDedupeClientGoneStillStoresResponse(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int64
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-release
		io.WriteString(w, "paid")
	})
	p := dedupePair(t, agent, nil, "")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+p.b.IngressAddr()+"/pay", strings.NewReader("{}"))
	req.Header.Set("Baton-Agent", "analyst")
	req.Header.Set("Idempotency-Key", "gone-1")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for calls.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	cancel() // the caller gives up while the agent works
	if err := <-done; err == nil {
		t.Fatal("the cancelled request completed")
	}
	close(release)
	// The retry gets the stored answer, not a second payment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r2 := post(t, p.a.EgressAddr(), "gone-1", `{}`)
		b, _ := io.ReadAll(r2.Body)
		if r2.StatusCode == 200 && string(b) == "paid" && r2.Header.Get("Idempotent-Replayed") == "true" {
			break
		}
		if r2.StatusCode != 409 || time.Now().After(deadline) {
			t.Fatalf("retry after the client left: %d %s", r2.StatusCode, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if calls.Load() != 1 {
		t.Errorf("agent ran %d times", calls.Load())
	}
}

// TestPositionalKeyMismatch: a key a sending Baton derived from a call's
// position names a step of its agent's work, so a re-run of the step with
// another body gets the step's stored answer, marked Baton-Key-Mismatch.
// An agent cannot claim that for its own key: Baton-Key-Source is a
// Baton's header, stripped at egress, and the agent's key reused with
// another body is still 422.
func TestPositionalKeyMismatch(t *testing.T) {
	t.Parallel()
	agent := &counting{}
	p := dedupePair(t, agent, nil, "")

	// An agent's key, and a forged Baton-Key-Source.
	if resp := post(t, p.a.EgressAddr(), "k-1", `{"a":1}`); resp.StatusCode != 201 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", "http://"+p.a.EgressAddr()+"/pay", strings.NewReader(`{"a":2}`))
	req.Host = "summarizer"
	req.Header.Set("Idempotency-Key", "k-1")
	req.Header.Set("Baton-Key-Source", "position")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 422 {
		t.Errorf("the agent's key with another body and a forged Baton-Key-Source: %d, want 422", resp.StatusCode)
	}

	// A positional key, as a sending Baton sends it (this pair is unsigned).
	positional := func(body string) *http.Response {
		req, _ := http.NewRequest("POST", "http://"+p.b.IngressAddr()+"/pay", strings.NewReader(body))
		req.Header.Set("Baton-Agent", "analyst")
		req.Header.Set("Idempotency-Key", `"bp-00000000000000000000000000000001"`)
		req.Header.Set("Baton-Key-Source", "position")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first := positional(`{"step":1,"run":1}`)
	again := positional(`{"step":1,"run":2}`)
	if first.StatusCode != 201 || again.StatusCode != 201 || again.Header.Get("Idempotent-Replayed") != "true" ||
		again.Header.Get("Baton-Key-Mismatch") != "body" {
		t.Errorf("a positional key re-run with another body: %d then %d %v; want the stored 201 replayed, marked",
			first.StatusCode, again.StatusCode, again.Header)
	}
	if n := agent.total.Load(); n != 2 {
		t.Errorf("the agent ran %d times, want 2 (k-1 once, the position once)", n)
	}
}

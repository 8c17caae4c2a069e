package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/state/redistest"
)

// BenchmarkJournal is what one call of an agent's to a local model server
// costs (a 4 KiB answer streamed as 8 Server-Sent Events), measured as the
// agent sees it, one call after another on a kept-alive connection:
//
//   - direct: the agent calls the model server itself, no Baton;
//   - off: through the Baton's egress, the host not journaled;
//   - miss: journaled, each call new (its answer appended to the journal);
//   - hit: journaled, each call answered from the journal (the re-run of a
//     handling whose first run made the same calls).
//
// Baton fingerprints every external answer, a replayed one too, as
// untrusted content (one store write per answer); the /untracked variants
// turn that off (taint.track: false) to show the journal's own cost.
//
// The journal is on a real Redis. appends/op and reads/op count the
// journal's store calls: a miss must cost at most one append, a hit none.
func BenchmarkJournal(b *testing.B) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := strings.Repeat("x", 500)
		for i := range 8 {
			fmt.Fprintf(w, "data: {\"i\":%d,\"t\":%q}\n\n", i, chunk)
			w.(http.Flusher).Flush()
		}
	}))
	b.Cleanup(model.Close)
	host := model.Listener.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	call := func(b *testing.B, addr, baggage string, i int) {
		body := `{"model":"m","stream":true}`
		if i >= 0 {
			body = fmt.Sprintf(`{"model":"m","stream":true,"n":%d}`, i)
		}
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if baggage != "" {
			req.Header.Set("Baggage", baggage)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n < 4000 {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}

	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			call(b, host, "", -1)
		}
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	})
	for _, name := range []string{"off", "miss", "hit", "off/untracked", "hit/untracked"} {
		mode, untracked := strings.CutSuffix(name, "/untracked")
		b.Run(name, func(b *testing.B) {
			yaml := "external: {allow: [" + host + "]}\nlog_level: warn\n"
			if untracked {
				yaml += "taint: {track: false}\n"
			}
			if mode != "off" {
				yaml += "journal: {hosts: [" + host + "], max_handling_bytes: 4294967296}\n"
			}
			h := holdHandlings(b, yaml)
			if mode == "hit" {
				// The first run makes the calls the timed re-run makes.
				bg := h.begin("k-bench")
				for range b.N {
					call(b, h.b.EgressAddr(), bg, -1)
				}
				h.end(http.StatusInternalServerError)
			}
			appends, reads := h.store.counts()
			bg := h.begin("k-bench")
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime()
			for i := range b.N {
				n := -1
				if mode == "miss" {
					n = i
				}
				call(b, h.b.EgressAddr(), bg, n)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
			a2, r2 := h.store.counts()
			b.ReportMetric(float64(a2-appends)/float64(b.N), "appends/op")
			b.ReportMetric(float64(r2-reads)/float64(b.N), "reads/op")
			h.end(http.StatusOK)
		})
	}
}

// heldHandlings is a Baton whose agent holds each inbound handoff open
// until told how to answer, so that a benchmark can make the calls of a
// handling from its own goroutine.
type heldHandlings struct {
	b       *baton
	store   *watchedStore
	baggage chan string
	answer  chan int
	done    chan struct{}
	tb      testing.TB
}

func holdHandlings(tb testing.TB, yaml string) *heldHandlings {
	h := &heldHandlings{baggage: make(chan string), answer: make(chan int), tb: tb}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		h.baggage <- r.Header.Get("Baggage")
		w.WriteHeader(<-h.answer)
	}))
	tb.Cleanup(agent.Close)
	h.store = &watchedStore{Store: redisStoreWithPrefix(tb, redistest.Shared(tb), "bench:"+randomSpan()+":")}
	h.b = startBaton(tb, "agent: b\nupstream: "+agent.URL+"\n"+yaml, h.store)
	return h
}

// begin delivers the inbound handoff with key and returns the baggage the
// agent got with it, while the agent holds it.
func (h *heldHandlings) begin(key string) string {
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		req, _ := http.NewRequest("POST", "http://"+h.b.IngressAddr()+"/work", strings.NewReader(`{"task":"t"}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case bg := <-h.baggage:
		return bg
	case <-time.After(10 * time.Second):
		h.tb.Fatal("the handoff did not reach the agent")
		return ""
	}
}

// end has the agent answer the held handoff with status.
func (h *heldHandlings) end(status int) {
	h.answer <- status
	<-h.done
}

package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/journal"
	"github.com/batonproxy/baton/records"
)

// modelServer streams an OpenAI-shaped chat completion as Server-Sent
// Events: a random word per call (a model's answer differs on every call),
// then a usage chunk and [DONE]. Each call is charged.
type modelServer struct {
	calls atomic.Int64
	// gate, when set, is waited on after the first chunk: the test holds
	// the stream open to see the chunk arrive before it ends. After five
	// seconds the stream goes on, and gateTimedOut says it did.
	gate         chan struct{}
	gateTimedOut atomic.Bool
}

func (m *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	m.calls.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Set-Cookie", "session=model-secret")
	word := randomSpan()
	chunks := []string{
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Plan: "}}],"usage":null}`,
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + word + `"}}],"usage":null}`,
		`{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":57,"completion_tokens":17,"total_tokens":74}}`,
		`[DONE]`,
	}
	for i, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
		if i == 0 && m.gate != nil {
			select {
			case <-m.gate:
			case <-time.After(5 * time.Second):
				m.gateTimedOut.Store(true)
			}
		}
	}
}

// searchServer answers a search with a random result; each call is charged.
type searchServer struct{ calls atomic.Int64 }

func (s *searchServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"query":%q,"results":["%s"]}`, r.URL.Query().Get("q"), randomSpan())
}

// plannerAgent is B: for each handoff it streams a plan from the model,
// searches, and hands the plan and the sources to c. It keeps what it sent
// and received on each run.
type plannerAgent struct {
	egress        string
	model, search string // host:port

	mu      sync.Mutex
	streams [][]byte // the model's stream as read, per run
	replay  []string // Baton-Journal-Replayed on the model's answer, per run
	toC     [][]byte // the body sent to c, per run
}

func (a *plannerAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	task, _ := io.ReadAll(r.Body)
	call := func(method, host, path string, body []byte) (*http.Response, error) {
		req, _ := http.NewRequest(method, "http://"+a.egress+path, bytes.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-live-0123456789")
		if tp := r.Header.Get("Traceparent"); len(tp) == 55 {
			req.Header.Set("Traceparent", tp[:36]+randomSpan()+tp[52:])
		}
		req.Header.Set("Baggage", r.Header.Get("Baggage"))
		return http.DefaultTransport.RoundTrip(req)
	}
	fail := func(what string, err error) { http.Error(w, what+": "+fmt.Sprint(err), http.StatusBadGateway) }

	prompt, _ := json.Marshal(map[string]any{"model": "m-1", "stream": true,
		"messages": []map[string]string{{"role": "user", "content": string(task)}}})
	resp, err := call("POST", a.model, "/v1/chat/completions", prompt)
	if err != nil {
		fail("model", err)
		return
	}
	var stream bytes.Buffer
	var plan strings.Builder
	sc := bufio.NewScanner(io.TeeReader(resp.Body, &stream))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(data), &chunk)
		for _, c := range chunk.Choices {
			plan.WriteString(c.Delta.Content)
		}
	}
	resp.Body.Close()
	replayed := resp.Header.Get(journal.HeaderReplayed)

	resp, err = call("GET", a.search, "/search?q=trip", nil)
	if err != nil {
		fail("search", err)
		return
	}
	sources, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	toC, _ := json.Marshal(map[string]any{"plan": plan.String(), "sources": json.RawMessage(sources)})
	a.mu.Lock()
	a.streams, a.replay, a.toC = append(a.streams, stream.Bytes()), append(a.replay, replayed), append(a.toC, toC)
	a.mu.Unlock()
	resp, err = call("POST", "c", "/act", toC)
	if err != nil {
		fail("c", err)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// actAgent is C: it counts its runs and keeps the bodies it was given.
type actAgent struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (a *actAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.bodies = append(a.bodies, b)
	a.mu.Unlock()
	w.Write([]byte(`{"done":true}`))
}

// TestJournalResumedAgentPaysNothingTwice is A → B → C on one Redis, where
// B streams a plan from a model server and searches before handing to C,
// and C's Baton is down on the first run. The client resumes the chain with
// the key it was given: with B's calls journaled, the model server and the
// search API are not called again, B's model stream is the same bytes,
// B's body to C is byte-identical to the first run's, and C ran once.
// Without the journal, the same resume calls both again and B sends C
// another plan: the control that shows what the journal changes.
func TestJournalResumedAgentPaysNothingTwice(t *testing.T) {
	t.Parallel()
	for _, journal := range []bool{true, false} {
		t.Run(fmt.Sprintf("journal %v", journal), func(t *testing.T) {
			t.Parallel()
			store := sharedStore(t)
			model, search := &modelServer{}, &searchServer{}
			ms, ss := httptest.NewServer(model), httptest.NewServer(search)
			t.Cleanup(ms.Close)
			t.Cleanup(ss.Close)
			mHost, sHost := ms.Listener.Addr().String(), ss.Listener.Addr().String()

			c := &actAgent{}
			cs := httptest.NewServer(c)
			t.Cleanup(cs.Close)
			cB := startBaton(t, "agent: c\nupstream: "+cs.URL+"\n", store())
			cAddr, up := switchedAddr(t, cB.IngressAddr())

			b := &plannerAgent{model: mHost, search: sHost}
			bs := httptest.NewServer(b)
			t.Cleanup(bs.Close)
			yaml := "agent: b\nupstream: " + bs.URL + "\n" + peerYAML(map[string]string{"c": cAddr}) +
				"retry: {attempts: 1, backoff: 5ms}\nexternal: {allow: [" + mHost + ", " + sHost + "]}\n"
			if journal {
				yaml += "journal: {hosts: [" + mHost + ", " + sHost + "]}\n"
			}
			bB := startBaton(t, yaml, store())
			b.egress = bB.EgressAddr()
			aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

			task := `{"task":"plan the offsite"}`
			hdr := http.Header{"Content-Type": {"application/json"}, "Traceparent": {tp}}
			resp := send(t, aB.EgressAddr(), "b", "POST", "/work", task, hdr)
			dl, key := resp.Header.Get("Baton-Dead-Letter"), resp.Header.Get("Idempotency-Key")
			if resp.StatusCode != http.StatusBadGateway || dl == "" || key == "" {
				t.Fatalf("first run: %d, Baton-Dead-Letter %q, Idempotency-Key %q; want 502 naming both", resp.StatusCode, dl, key)
			}
			if model.calls.Load() != 1 || search.calls.Load() != 1 {
				t.Fatalf("first run: model called %d times, search %d; want 1, 1", model.calls.Load(), search.calls.Load())
			}

			up()
			hdr.Set("Idempotency-Key", key)
			resp = send(t, aB.EgressAddr(), "b", "POST", "/work", task, hdr)
			if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
				t.Fatalf("resumed: %d %s", resp.StatusCode, body)
			}

			b.mu.Lock()
			defer b.mu.Unlock()
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(b.toC) != 2 || len(c.bodies) != 1 {
				t.Fatalf("b ran %d times, c %d; want 2, 1", len(b.toC), len(c.bodies))
			}
			if !bytes.Equal(c.bodies[0], b.toC[1]) {
				t.Errorf("c was given %s, b sent %s", c.bodies[0], b.toC[1])
			}
			same := bytes.Equal(b.toC[0], b.toC[1])
			if !journal {
				if same || model.calls.Load() != 2 || search.calls.Load() != 2 {
					t.Errorf("without the journal: model called %d times, search %d, same body to c %v; want 2, 2, false",
						model.calls.Load(), search.calls.Load(), same)
				}
				return
			}
			if model.calls.Load() != 1 || search.calls.Load() != 1 {
				t.Errorf("after the resume the model was called %d times, search %d; want 1, 1 (answered from the journal)",
					model.calls.Load(), search.calls.Load())
			}
			if !same {
				t.Errorf("b's body to c differs between runs:\n%s\n%s", b.toC[0], b.toC[1])
			}
			if !bytes.Equal(b.streams[0], b.streams[1]) || b.replay[0] != "" || b.replay[1] != "true" {
				t.Errorf("model stream: first %q (replayed %q), resumed %q (replayed %q); want the same bytes, the second replayed",
					b.streams[0], b.replay[0], b.streams[1], b.replay[1])
			}

			// B's receipts say what the journal did on each run.
			v := waitTrace(t, aB.AdminAddr(), traceID, func(v records.TraceView) bool {
				n := 0
				for _, r := range v.Records {
					if r.Side == record.Ingress && r.To == "b" && r.Journal != nil {
						n++
					}
				}
				return n == 2
			})
			var got []record.JournalSummary
			for _, r := range v.Records {
				if r.Side == record.Ingress && r.To == "b" {
					got = append(got, *r.Journal)
				}
			}
			first, second := got[0], got[1]
			if first.Misses != 2 || first.Journaled != 2 || first.Hits != 0 {
				t.Errorf("first run's journal: %+v; want 2 misses, both journaled", first)
			}
			if second.Hits != 2 || second.Misses != 0 || second.SavedTokens != 74 || second.SavedBytes == 0 {
				t.Errorf("resumed run's journal: %+v; want 2 hits saving 74 tokens", second)
			}
		})
	}
}

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

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/deadletter"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
const traceID = "0af7651916cd43dd8448eb211c80319c"

func deadLetterID(t *testing.T, resp *http.Response) string {
	t.Helper()
	if id := resp.Header.Get("Baton-Dead-Letter"); id != "" {
		return id
	}
	var pd struct {
		RecordID string `json:"record_id"`
	}
	json.NewDecoder(resp.Body).Decode(&pd)
	if pd.RecordID == "" {
		t.Fatalf("status %d names no dead letter", resp.StatusCode)
	}
	return pd.RecordID
}

func TestRecordsAndReceiptsFormOneChain(t *testing.T) {
	t.Parallel()
	store := state.NewMemory(config.Memory{})
	var got seen
	ag := httptest.NewServer(got.handler(200, "ok"))
	t.Cleanup(ag.Close)
	// Both Batons share one store, as Batons sharing a Redis do.
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n", store)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\n", store)
	send(t, a.EgressAddr(), "summarizer", "POST", "/work", `{"n":1}`, http.Header{"Traceparent": {tp}})

	v := waitTrace(t, a.AdminAddr(), traceID, func(v records.TraceView) bool {
		return len(v.Records) == 2 && v.Records[0].State == record.Delivered && v.Records[1].State == record.Delivered
	})
	var eg, in record.Record
	for _, r := range v.Records {
		if r.Side == record.Egress {
			eg = r
		} else {
			in = r
		}
	}
	if eg.From != "analyst" || eg.To != "summarizer" || eg.Status != 200 || eg.Attempts != 1 || eg.Key == "" ||
		eg.RequestDigest == "" || !eg.Replayable || eg.Hop != 1 {
		t.Errorf("egress record %+v", eg)
	}
	if in.ParentID != eg.ID || in.Key != eg.Key || in.Status != 200 || in.RequestDigest != eg.RequestDigest {
		t.Errorf("receipt %+v does not match the delegation record %s", in, eg.ID)
	}
	if err := record.Verify(entries(v), v.Tail); err != nil {
		t.Errorf("chain: %v", err)
	}
	// The checkpoint: the outbound request as sent.
	full := adminRecord(t, a.AdminAddr(), eg.ID)
	if full.Request == nil || string(full.Request.Body) != `{"n":1}` || full.Request.Header.Get("Baton-Agent") != "analyst" ||
		full.Request.Header.Get("Idempotency-Key") == "" {
		t.Errorf("checkpoint %+v", full.Request)
	}
}

func entries(v records.TraceView) [][]byte {
	out := make([][]byte, len(v.Entries))
	for i, e := range v.Entries {
		out[i] = []byte(e)
	}
	return out
}

// TestReplayOfDeliveredWorkIsHarmless: the first try reached the agent, but
// the sender gave up before the answer (per-try timeout) and dead-lettered
// it. The replay is answered from the receiver's dedupe window: the agent
// runs once.
func TestReplayOfDeliveredWorkIsHarmless(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newStore func(*testing.T) state.Store) {
		peer := &flaky{hold: 300 * time.Millisecond}
		ag := httptest.NewServer(peer)
		t.Cleanup(ag.Close)
		b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n", newStore(t))
		a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
			b.IngressAddr()+"}}\nretry: {attempts: 0, per_try_timeout: 50ms}\n", newStore(t))
		resp := send(t, a.EgressAddr(), "summarizer", "POST", "/pay", `{"amount":5}`, nil)
		if resp.StatusCode != 504 {
			t.Fatalf("first: %d", resp.StatusCode)
		}
		id := deadLetterID(t, resp)
		if rec := adminRecord(t, a.AdminAddr(), id); rec.State != record.Dead {
			t.Fatalf("record %s is %s", id, rec.State)
		}
		// The agent finishes the first request meanwhile; replay until the
		// window has its answer (409 while it is still in flight).
		deadline := time.Now().Add(5 * time.Second)
		var res deadletter.ReplayResult
		for {
			if st := adminPost(t, a.AdminAddr(), "/v1/deadletters/"+id+"/replay", &res); st != 200 {
				t.Fatalf("replay: %d", st)
			}
			if res.Status == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replay result %+v", res)
			}
			// While the first try still runs the receiver answers 409 with
			// Retry-After: the replay is dead-lettered again.
			time.Sleep(50 * time.Millisecond)
		}
		if res.Response != "done" || res.Record.State != record.Delivered {
			t.Errorf("replay result %+v", res)
		}
		if n := peer.calls.Load(); n != 1 {
			t.Errorf("the agent ran %d times, want 1", n)
		}
		for {
			rec := adminRecord(t, a.AdminAddr(), id) // the outcome is written off the request path
			if rec.State == record.Delivered && rec.Status == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the replay the record is %s %d", rec.State, rec.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
		var page deadletter.Page
		adminGet(t, a.AdminAddr(), "/v1/deadletters", &page)
		if page.Total != 0 {
			t.Errorf("%d dead letters left after a successful replay", page.Total)
		}
	})
}

func TestDeadLetterAPI(t *testing.T) {
	t.Parallel()
	peer := &flaky{}
	peer.down.Store(true)
	p := resilientPair(t, peer, "retry: {attempts: 0}\nbreaker: {failures: 100}\n")
	t.Run("list, filter, drop", func(t *testing.T) {
		ids := map[string]string{}
		for _, host := range []string{"summarizer", "summarizer"} {
			resp := send(t, p.a.EgressAddr(), host, "POST", "/", "{}", nil)
			ids[deadLetterID(t, resp)] = host
		}
		var page deadletter.Page
		if st := adminGet(t, p.a.AdminAddr(), "/v1/deadletters?edge=analyst→summarizer&limit=1", &page); st != 200 ||
			page.Total != 2 || len(page.Records) != 1 || page.Records[0].Request != nil {
			t.Fatalf("page %d %+v", st, page)
		}
		if st := adminGet(t, p.a.AdminAddr(), "/v1/deadletters?edge=analyst→nobody", &page); st != 200 || page.Total != 0 {
			t.Errorf("filter by another edge: %d %d", st, page.Total)
		}
		for id := range ids {
			req, _ := http.NewRequest("DELETE", "http://"+p.a.AdminAddr()+"/v1/deadletters/"+id, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 204 {
				t.Fatalf("drop: %v %v", resp, err)
			}
			resp.Body.Close()
		}
		adminGet(t, p.a.AdminAddr(), "/v1/deadletters", &page)
		if page.Total != 0 {
			t.Errorf("%d left after dropping", page.Total)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			want         int
		}{
			{"GET", "/v1/records/nope", 404},
			{"GET", "/v1/traces/xyz", 400},
			{"GET", "/v1/traces/" + strings.Repeat("a", 32), 404},
			{"GET", "/v1/deadletters?limit=0", 400},
			{"POST", "/v1/deadletters/" + strings.Repeat("a", 32) + ".0000000000000000/replay", 404},
		} {
			req, _ := http.NewRequest(tc.method, "http://"+p.a.AdminAddr()+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			resp.Body.Close()
		}
		// Replaying a delivered record is refused.
		peer.down.Store(false)
		send(t, p.a.EgressAddr(), "summarizer", "POST", "/", "{}", http.Header{"Traceparent": {tp}})
		v := waitTrace(t, p.a.AdminAddr(), traceID, func(v records.TraceView) bool {
			return len(v.Records) > 0 && v.Records[0].State == record.Delivered
		})
		if st := adminPost(t, p.a.AdminAddr(), "/v1/deadletters/"+v.Records[0].ID+"/replay", nil); st != 409 {
			t.Errorf("replaying a delivered record: %d", st)
		}
	})
}

func TestRecordsSurviveRestartWithRedis(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	var got seen
	ag := httptest.NewServer(got.handler(200, "ok"))
	t.Cleanup(ag.Close)
	cfg := "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: " + ag.URL + "}}\n" +
		"store: {redis: {url: " + url + ", prefix: '" + prefix + "'}}\n"
	first := startBaton(t, cfg, nil)
	send(t, first.EgressAddr(), "summarizer", "POST", "/", `{"a":1}`, http.Header{"Traceparent": {tp}})
	waitTrace(t, first.AdminAddr(), traceID, func(v records.TraceView) bool {
		return len(v.Records) == 1 && v.Records[0].State == record.Delivered
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	second := startBaton(t, cfg, nil)
	send(t, second.EgressAddr(), "summarizer", "POST", "/", `{"a":2}`, http.Header{"Traceparent": {tp}})
	v := waitTrace(t, second.AdminAddr(), traceID, func(v records.TraceView) bool {
		return len(v.Records) == 2 && v.Records[0].State == record.Delivered && v.Records[1].State == record.Delivered
	})
	if err := record.Verify(entries(v), v.Tail); err != nil {
		t.Errorf("the chain across the restart: %v", err)
	}
}

// A handoff dead-lettered while the store is down is kept, logged, and
// stored (listed) once the store answers again: a failure is never only in
// the log while the Baton runs.
func TestDeadLetteringWithRedisDownLosesNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfg := "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {gone: {url: http://" + closedAddr(t) + "}}\n" +
		"retry: {attempts: 0}\nstore: {redis: {url: " + srv.URL() + ", op_timeout: 300ms, dial_timeout: 200ms}}\n"
	a := startBaton(t, cfg, nil)
	srv.Kill()
	resp := send(t, a.EgressAddr(), "gone", "POST", "/", `{"x":1}`, nil)
	id := deadLetterID(t, resp)
	if resp.StatusCode != 502 {
		t.Errorf("status %d", resp.StatusCode)
	}
	logs := a.log.String()
	for _, want := range []string{`"msg":"record not stored"`, `"record_id":"` + id + `"`, `"request_digest":"sha-256=:`,
		`"msg":"dead letter not stored yet: kept, to be stored when the store answers"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s", want)
		}
	}
	srv.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rec record.Record
		if st := adminGet(t, a.AdminAddr(), "/v1/deadletters/"+id, &rec); st == http.StatusOK && rec.State == record.Dead &&
			rec.Replayable && rec.Request != nil && string(rec.Request.Body) == `{"x":1}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letter %s not listed 10s after the store came back", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var page deadletter.Page
	if adminGet(t, a.AdminAddr(), "/v1/deadletters", &page); page.Total != 1 || page.Records[0].ID != id {
		t.Fatalf("dead letters listed: %+v", page)
	}
}

// TestChainResumesAtC: analyst → summarizer → reviewer, where reviewer
// fails until it recovers. summarizer's handoff is dead-lettered; the replay
// resumes the chain at reviewer without running analyst's or summarizer's
// work again.
func TestChainResumesAtC(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, newStore func(*testing.T) state.Store) {
		c := &flaky{}
		c.down.Store(true)
		cAgent := httptest.NewServer(c)
		t.Cleanup(cAgent.Close)
		cB := startBaton(t, "agent: reviewer\nupstream: "+cAgent.URL+"\n", newStore(t))

		var bRuns atomic.Int64
		var bEgress string
		bAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			bRuns.Add(1)
			body, _ := io.ReadAll(r.Body)
			req, _ := http.NewRequest("POST", "http://"+bEgress+"/review", strings.NewReader("flagged:"+string(body)))
			req.Host = "reviewer"
			req.Header.Set("Traceparent", r.Header.Get("Traceparent"))
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			resp.Body.Close()
			w.Header().Set("X-Next", resp.Header.Get("Baton-Dead-Letter"))
			w.WriteHeader(http.StatusAccepted) // summarizer's own work is done
		}))
		t.Cleanup(bAgent.Close)
		bB := startBaton(t, "agent: summarizer\nupstream: "+bAgent.URL+"\npeers: {reviewer: {url: http://"+cB.IngressAddr()+
			"}}\nretry: {attempts: 1, backoff: 1ms}\n", newStore(t))
		bEgress = bB.EgressAddr()
		aB := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
			bB.IngressAddr()+"}}\n", newStore(t))

		resp := send(t, aB.EgressAddr(), "summarizer", "POST", "/analyse", `{"threshold":0.05}`, http.Header{"Traceparent": {tp}})
		dead := resp.Header.Get("X-Next")
		if resp.StatusCode != 202 || dead == "" {
			t.Fatalf("A→B: %d, dead letter %q", resp.StatusCode, dead)
		}
		c.down.Store(false) // reviewer recovers
		var res deadletter.ReplayResult
		if st := adminPost(t, bB.AdminAddr(), "/v1/deadletters/"+dead+"/replay", &res); st != 200 || res.Status != 200 {
			t.Fatalf("replay: %d %+v", st, res)
		}
		if bRuns.Load() != 1 {
			t.Errorf("summarizer ran %d times, want 1", bRuns.Load())
		}
		if c.calls.Load() != 2 {
			t.Errorf("reviewer got %d calls, want 2 (its failure, final: an agent's own 503 is not retried; the replay)", c.calls.Load())
		}
		v := waitTrace(t, bB.AdminAddr(), traceID, func(v records.TraceView) bool {
			for _, r := range v.Records {
				if r.ID == dead && r.State == record.Delivered {
					return true
				}
			}
			return false
		})
		var sawReplayed bool
		for _, e := range record.Decode(entries(v)) {
			sawReplayed = sawReplayed || (e.RecordID() == dead && e.State() == record.Replayed)
		}
		if !sawReplayed {
			t.Error("the chain does not show dead → replayed → delivered")
		}
		if err := record.Verify(entries(v), v.Tail); err != nil {
			t.Error(err)
		}
	})
}

func TestRecordsDisabled(t *testing.T) {
	t.Parallel()
	var got seen
	ag := httptest.NewServer(got.handler(200, "ok"))
	t.Cleanup(ag.Close)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: "+ag.URL+
		"}, gone: {url: http://"+closedAddr(t)+"}}\nrecords: {enabled: false}\nretry: {attempts: 0}\n", nil)
	if resp := send(t, a.EgressAddr(), "summarizer", "POST", "/", "{}", http.Header{"Traceparent": {tp}}); resp.StatusCode != 200 {
		t.Fatalf("handoff: %d", resp.StatusCode)
	}
	if st := adminGet(t, a.AdminAddr(), "/v1/traces/"+traceID, nil); st != 404 {
		t.Errorf("trace with records off: %d", st)
	}
	resp := send(t, a.EgressAddr(), "gone", "POST", "/", "{}", nil)
	if resp.StatusCode != 502 || !strings.Contains(a.log.String(), "dead letter not stored") {
		t.Errorf("dead letter with records off: %d, logged: %v", resp.StatusCode, strings.Contains(a.log.String(), "dead letter not stored"))
	}
}

// TestCheckpointWrittenBeforeForwarding: while the peer still works, the
// delegation record already exists, in state sent, with the request.
func TestCheckpointWrittenBeforeForwarding(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan struct{})
	ag := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	}))
	t.Cleanup(ag.Close)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: "+ag.URL+"}}\n", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		send(t, a.EgressAddr(), "summarizer", "POST", "/", `{"in":"flight"}`, http.Header{"Traceparent": {tp}})
	}()
	<-arrived
	var v records.TraceView
	if st := adminGet(t, a.AdminAddr(), "/v1/traces/"+traceID, &v); st != 200 || len(v.Records) != 1 || v.Records[0].State != record.Sent {
		t.Fatalf("while in flight: %d %+v", st, v.Records)
	}
	if rec := adminRecord(t, a.AdminAddr(), v.Records[0].ID); rec.Request == nil || string(rec.Request.Body) != `{"in":"flight"}` {
		t.Errorf("checkpoint while in flight: %+v", rec.Request)
	}
	close(release)
	<-done
}

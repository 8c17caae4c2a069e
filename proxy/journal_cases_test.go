package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/journal"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// caller makes one call through the agent's Baton, as the agent handling
// the current handoff: baggage passed on, as OpenTelemetry does. It reads
// the answer, but for a call that accepts text/event-stream: the caller
// reads and closes that one.
type caller func(method, host, path, body string, hdr http.Header) (*http.Response, []byte)

// journalRig is one Baton, b, whose agent runs script for each inbound
// handoff and answers with the status it returns. The store is a real one,
// watched: the journal's appends and reads are counted.
type journalRig struct {
	b      *baton
	store  *watchedStore
	reader *sdkmetric.ManualReader
	trace  string // the trace id handle sends
	runs   atomic.Int64
	script func(run int, call caller) int
	// baggage is what the agent received with the handoff it is handling,
	// for a script whose client sends its own requests.
	baggage atomic.Pointer[string]
	t       *testing.T
}

// newJournalRig starts the rig's Baton with yaml, as agent b unless yaml
// names another.
func newJournalRig(t *testing.T, yaml string, store state.Store, script func(run int, call caller) int) *journalRig {
	t.Helper()
	g := &journalRig{store: &watchedStore{Store: store}, reader: sdkmetric.NewManualReader(), script: script, t: t,
		trace: randomSpan() + randomSpan()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(g.reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	agent := httptest.NewServer(g)
	t.Cleanup(agent.Close)
	if !strings.HasPrefix(yaml, "agent: ") {
		yaml = "agent: b\n" + yaml
	}
	g.b = startBatonWith(t, "upstream: "+agent.URL+"\n"+yaml, g.store,
		func(o *proxy.Options) { o.MeterProvider = mp })
	return g
}

func (g *journalRig) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	bg := r.Header.Get("Baggage")
	g.baggage.Store(&bg)
	call := func(method, host, path, body string, hdr http.Header) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, "http://"+g.b.EgressAddr()+path, strings.NewReader(body))
		req.Host = host
		for k, v := range hdr {
			req.Header[k] = v
		}
		if req.Header.Get("Baggage") == "" {
			req.Header.Set("Baggage", r.Header.Get("Baggage"))
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			g.t.Errorf("%s %s%s: %v", method, host, path, err)
			return &http.Response{Header: http.Header{}}, nil
		}
		if req.Header.Get("Accept") == "text/event-stream" {
			return resp, nil // a stream: the script reads it
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	w.WriteHeader(g.script(int(g.runs.Add(1)), call))
}

// handle delivers the inbound handoff with key to b, as agent a's Baton
// would (unsigned: b trusts no keys), and returns the agent's status.
func (g *journalRig) handle(key string) int {
	g.t.Helper()
	resp := send(g.t, g.b.IngressAddr(), "b", "POST", "/work", `{"task":"t"}`, http.Header{
		"Idempotency-Key": {key}, "Baton-Agent": {"a"}, "Traceparent": {"00-" + g.trace + "-" + randomSpan() + "-01"}})
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// receipts returns the journal summaries of b's receipts, oldest first, once
// there are n.
func (g *journalRig) receipts(n int) []record.JournalSummary {
	g.t.Helper()
	var out []record.JournalSummary
	waitTrace(g.t, g.b.AdminAddr(), g.trace, func(v records.TraceView) bool {
		out = out[:0]
		for _, r := range v.Records {
			if r.Side == record.Ingress && r.Journal != nil {
				out = append(out, *r.Journal)
			}
		}
		return len(out) == n
	})
	return out
}

// journalCalls reads baton.journal.calls by result.
func (g *journalRig) journalCalls() map[string]int64 {
	g.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := g.reader.Collect(context.Background(), &rm); err != nil {
		g.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || !strings.HasPrefix(m.Name, "baton.journal.") {
				continue
			}
			for _, dp := range sum.DataPoints {
				k := m.Name
				if v, ok := dp.Attributes.Value("result"); ok {
					k += "/" + v.AsString()
				}
				if v, ok := dp.Attributes.Value("reason"); ok {
					k += "/" + v.AsString()
				}
				out[k] += dp.Value
			}
		}
	}
	return out
}

// watchedStore passes every call to a real store and keeps what the
// journal appends and how often it reads.
type watchedStore struct {
	state.Store
	mu      sync.Mutex
	appends [][]byte
	reads   int
}

func (s *watchedStore) Append(ctx context.Context, key string, val []byte, ttl time.Duration) (int64, error) {
	if strings.HasPrefix(key, "journal/") {
		s.mu.Lock()
		s.appends = append(s.appends, bytes.Clone(val))
		s.mu.Unlock()
	}
	return s.Store.Append(ctx, key, val, ttl)
}

func (s *watchedStore) Range(ctx context.Context, key string, start, stop int64) ([][]byte, error) {
	if strings.HasPrefix(key, "journal/") {
		s.mu.Lock()
		s.reads++
		s.mu.Unlock()
	}
	return s.Store.Range(ctx, key, start, stop)
}

func (s *watchedStore) counts() (appends, reads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.appends), s.reads
}

// counter is an external service that charges each call and answers what
// reply says for it.
type counter struct {
	calls atomic.Int64
	reply func(n int64, w http.ResponseWriter, r *http.Request)
	srv   *httptest.Server
}

func newCounter(t *testing.T, reply func(n int64, w http.ResponseWriter, r *http.Request)) *counter {
	c := &counter{reply: reply}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c.reply(c.calls.Add(1), w, r)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *counter) host() string { return c.srv.Listener.Addr().String() }

func numbered(n int64, w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "answer %d", n) }

func journalYAML(hosts ...string) string {
	list := strings.Join(hosts, ", ")
	return "external: {allow: [" + list + "]}\njournal: {hosts: [" + list + "]}\n"
}

func failFirst(run int) int {
	if run == 1 {
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

// TestJournalAnswersEachOccurrence: two identical calls in one handling
// get their own answers, and the re-run gets each again, in order, with no
// call going out. Each miss costs one append, each handling one read.
func TestJournalAnswersEachOccurrence(t *testing.T) {
	t.Parallel()
	search := newCounter(t, numbered)
	var got [3][]string
	g := newJournalRig(t, journalYAML(search.host()), state.NewMemory(config.Memory{MaxEntries: 10000, MaxBytes: 8 << 20}), func(run int, call caller) int {
		for range 2 {
			resp, b := call("GET", search.host(), "/search?q=same", "", nil)
			got[run] = append(got[run], string(b)+" replayed="+resp.Header.Get(journal.HeaderReplayed))
		}
		return failFirst(run)
	})
	if st := g.handle("k-1"); st != 500 {
		t.Fatalf("first run: %d", st)
	}
	if st := g.handle("k-1"); st != 200 {
		t.Fatalf("re-run: %d", st)
	}
	want1 := []string{"answer 1 replayed=", "answer 2 replayed="}
	want2 := []string{"answer 1 replayed=true", "answer 2 replayed=true"}
	if fmt.Sprint(got[1]) != fmt.Sprint(want1) || fmt.Sprint(got[2]) != fmt.Sprint(want2) {
		t.Errorf("first run got %q, re-run %q; want %q then %q", got[1], got[2], want1, want2)
	}
	if n := search.calls.Load(); n != 2 {
		t.Errorf("search called %d times, want 2", n)
	}
	if appends, reads := g.store.counts(); appends != 2 || reads != 2 {
		t.Errorf("the journal appended %d entries and read %d times; want 2 (one per miss) and 2 (one per handling)", appends, reads)
	}
	rs := g.receipts(2)
	if rs[0].Misses != 2 || rs[0].Journaled != 2 || rs[1].Hits != 2 || rs[1].SavedBytes != int64(len("answer 1answer 2")) {
		t.Errorf("receipts: %+v", rs)
	}
	m := g.journalCalls()
	if m["baton.journal.calls/hit"] != 2 || m["baton.journal.calls/miss"] != 2 || m["baton.journal.saved"] != 16 || m["baton.journal.written"] == 0 {
		t.Errorf("metrics: %v", m)
	}
}

// TestJournalKeepsSecretsOut: credentials take part in a call's digest but
// are never stored, nor is the answer's cookie; a call with another key is
// another call.
func TestJournalKeepsSecretsOut(t *testing.T) {
	t.Parallel()
	model := newCounter(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Set-Cookie", "session=cookie-secret")
		w.Header().Set("X-Request-Id", fmt.Sprint("req-", n))
		numbered(n, w, nil)
	})
	token := "Bearer sk-live-first"
	var replayed []http.Header
	g := newJournalRig(t, journalYAML(model.host()), sharedStore(t)(), func(run int, call caller) int {
		resp, _ := call("POST", model.host(), "/v1/messages", `{"prompt":"p"}`, http.Header{
			"Authorization": {token}, "X-Api-Key": {"key-secret"}, "Content-Type": {"application/json"}})
		replayed = append(replayed, resp.Header)
		return http.StatusInternalServerError
	})
	g.handle("k-2")
	g.handle("k-2")
	if n := model.calls.Load(); n != 1 {
		t.Fatalf("model called %d times with the same key, want 1", n)
	}
	if h := replayed[1]; h.Get("Set-Cookie") != "" || h.Get("X-Request-Id") != "req-1" || h.Get(journal.HeaderReplayed) != "true" {
		t.Errorf("replayed answer's headers: %v; want the answer's own without its cookie", h)
	}
	token = "Bearer sk-live-second"
	g.handle("k-2")
	if n := model.calls.Load(); n != 2 {
		t.Errorf("model called %d times after the key changed, want 2: another key is another call", n)
	}
	g.store.mu.Lock()
	defer g.store.mu.Unlock()
	for _, e := range g.store.appends {
		for _, secret := range []string{"sk-live", "key-secret", "cookie-secret"} {
			if bytes.Contains(e, []byte(secret)) {
				t.Errorf("a journal entry holds %q: %q", secret, e)
			}
		}
	}
}

// TestJournalWhatIsNotJournaled: an answer that says "try again" (a 503,
// a 409 with Retry-After) is not journaled, and the agent's retry takes its
// occurrence; nor is an answer over the entry cap, or one that would take
// the handling past its cap; the receipt says why. A HEAD answer is
// replayed with its Content-Length.
func TestJournalWhatIsNotJournaled(t *testing.T) {
	t.Parallel()
	flaky := newCounter(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		switch {
		case n == 1 && r.URL.Path == "/x":
			w.WriteHeader(http.StatusServiceUnavailable)
		case n <= 3 && r.URL.Path == "/busy":
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusConflict)
		case r.Method == http.MethodHead:
			w.Header().Set("Content-Length", "1234")
			return
		}
		numbered(n, w, r)
	})
	big := newCounter(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		size := 4096
		if r.URL.Path == "/medium" {
			size = 900
		}
		w.Write(bytes.Repeat([]byte("x"), size))
	})
	var answers []string
	hosts := flaky.host() + ", " + big.host()
	yaml := "external: {allow: [" + hosts + "]}\njournal: {hosts: [" + hosts + "], max_entry_bytes: 1024, max_handling_bytes: 1024}\n"
	g := newJournalRig(t, yaml, sharedStore(t)(), func(run int, call caller) int {
		for _, path := range []string{"/x", "/busy"} {
			resp, b := call("GET", flaky.host(), path, "", nil)
			for resp.StatusCode >= 409 { // the agent retries
				resp, b = call("GET", flaky.host(), path, "", nil)
			}
			answers = append(answers, fmt.Sprint(path, " ", string(b), " ", resp.Header.Get(journal.HeaderReplayed)))
		}
		resp, _ := call("HEAD", flaky.host(), "/h", "", nil)
		answers = append(answers, fmt.Sprint("HEAD ", resp.ContentLength, " ", resp.Header.Get(journal.HeaderReplayed)))
		call("GET", big.host(), "/big", "", nil)
		call("GET", big.host(), "/medium", "", nil)
		return failFirst(run)
	})
	g.handle("k-3")
	g.handle("k-3")
	want := "[/x answer 2  /busy answer 4  HEAD 1234  /x answer 2 true /busy answer 4 true HEAD 1234 true]"
	if fmt.Sprint(answers) != want || flaky.calls.Load() != 5 {
		t.Errorf("flaky called %d times, answers %q; want 5 and %s", flaky.calls.Load(), answers, want)
	}
	if n := big.calls.Load(); n != 4 {
		t.Errorf("the large answers were fetched %d times, want 4 (neither journaled)", n)
	}
	rs := g.receipts(2)
	notes := strings.Join(rs[0].Skipped, "; ")
	for _, note := range []string{"status 503 says to try again", "status 409 with Retry-After says to try again",
		"max_entry_bytes (1024)", "max_handling_bytes (1024)"} {
		if !strings.Contains(notes, note) {
			t.Errorf("first receipt's notes lack %q: %q", note, notes)
		}
	}
	m := g.journalCalls()
	if m["baton.journal.unjournaled/status"] != 2 || m["baton.journal.unjournaled/entry_cap"] != 2 || m["baton.journal.unjournaled/handling_cap"] != 2 {
		t.Errorf("metrics: %v", m)
	}
}

// TestJournalStreamsWhileJournaling: on a miss the answer streams to the
// agent as it comes (the model holds its stream open until the agent has
// the first event); the whole stream is journaled and replayed.
func TestJournalStreamsWhileJournaling(t *testing.T) {
	t.Parallel()
	model := &modelServer{gate: make(chan struct{})}
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)
	host := ms.Listener.Addr().String()
	var streams, replayed []string
	g := newJournalRig(t, journalYAML(host), sharedStore(t)(), func(run int, call caller) int {
		resp, _ := call("POST", host, "/v1/chat/completions", `{"stream":true}`, http.Header{
			"Accept": {"text/event-stream"}, "Content-Type": {"application/json"}})
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		first, _ := br.ReadString('\n')
		if run == 1 {
			close(model.gate)
		}
		rest, _ := io.ReadAll(br)
		streams = append(streams, first+string(rest))
		replayed = append(replayed, resp.Header.Get(journal.HeaderReplayed))
		return failFirst(run)
	})
	g.handle("k-4")
	g.handle("k-4")
	if model.gateTimedOut.Load() {
		t.Fatal("the first event did not reach the agent while the model held the stream open: the journal buffered it")
	}
	if model.calls.Load() != 1 || len(streams) != 2 || streams[0] != streams[1] || !strings.HasSuffix(streams[0], "data: [DONE]\n\n") {
		t.Errorf("model called %d times; streams %q", model.calls.Load(), streams)
	}
	if fmt.Sprint(replayed) != "[ true]" {
		t.Errorf("Baton-Journal-Replayed per run: %q", replayed)
	}
	if rs := g.receipts(2); rs[1].SavedTokens != 74 {
		t.Errorf("re-run's receipt: %+v; want 74 tokens saved (the stream's usage chunk)", rs[1])
	}
}

// TestJournalAgentStopsReadingEarly: an agent that stops reading a stream
// before its end (a client that stops at the event it waits for, and
// closes the answer, and its connection, before the rest) still has the
// whole answer journaled: Baton reads the rest, and the re-run is answered
// from the journal.
func TestJournalAgentStopsReadingEarly(t *testing.T) {
	t.Parallel()
	// The model holds its stream after the first event until the agent has
	// closed it.
	model := &modelServer{gate: make(chan struct{})}
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)
	host := ms.Listener.Addr().String()
	var replayed []string
	g := newJournalRig(t, journalYAML(host), sharedStore(t)(), func(run int, call caller) int {
		resp, _ := call("POST", host, "/v1/chat/completions", `{"stream":true}`, http.Header{
			"Accept": {"text/event-stream"}, "Content-Type": {"application/json"}})
		first, _ := bufio.NewReader(resp.Body).ReadString('\n')
		resp.Body.Close() // before the end: the connection closes
		if run == 1 {
			time.Sleep(50 * time.Millisecond) // Baton sees the agent gone
			close(model.gate)
		}
		if !strings.HasPrefix(first, "data: ") {
			t.Errorf("run %d: the first line %q", run, first)
		}
		replayed = append(replayed, resp.Header.Get(journal.HeaderReplayed))
		return failFirst(run)
	})
	g.handle("k-early")
	g.handle("k-early")
	if n := model.calls.Load(); n != 1 {
		t.Errorf("the model was called %d times, want 1: the answer the agent stopped reading was not journaled", n)
	}
	if fmt.Sprint(replayed) != "[ true]" {
		t.Errorf("Baton-Journal-Replayed per run: %q", replayed)
	}
}

// TestJournalPeerWithoutBaton: an edge to a peer that runs no Baton, with
// journal: true, is answered from the journal on the re-run: the peer's
// side effect is not made twice.
func TestJournalPeerWithoutBaton(t *testing.T) {
	t.Parallel()
	legacy := newCounter(t, numbered)
	var got []string
	g := newJournalRig(t, "peers: {legacy: {url: "+legacy.srv.URL+"}}\nedges: [{from: a}, {to: legacy, journal: true}]\n",
		sharedStore(t)(), func(run int, call caller) int {
			resp, b := call("POST", "legacy", "/book", `{"seat":"12A"}`, http.Header{"Content-Type": {"application/json"}})
			got = append(got, fmt.Sprint(resp.StatusCode, " ", string(b), " ", resp.Header.Get(journal.HeaderReplayed)))
			return failFirst(run)
		})
	g.handle("k-5")
	g.handle("k-5")
	if n := legacy.calls.Load(); n != 1 || fmt.Sprint(got) != "[200 answer 1  200 answer 1 true]" {
		t.Errorf("legacy booked %d times, agent got %q; want once, the same answer replayed", n, got)
	}
}

// TestJournalFailsOpen: a call made outside any handling, and a call made
// while the store is down, go out as if there were no journal, and are
// counted as bypassing it.
func TestJournalFailsOpen(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	search := newCounter(t, numbered)
	var got []string
	g := newJournalRig(t, journalYAML(search.host()), redisStoreWithPrefix(t, srv.URL(), "j:"), func(run int, call caller) int {
		// Not tied to the handling: no baton.handling baggage, and a trace of
		// its own (a call with no trace at all would be the one handling's
		// in flight).
		_, b := call("GET", search.host(), "/alone", "", http.Header{"Baggage": {"other=1"},
			"Traceparent": {"00-5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a-5a5a5a5a5a5a5a5a-01"}})
		got = append(got, string(b))
		srv.Kill()
		_, b = call("GET", search.host(), "/q", "", nil)
		got = append(got, string(b))
		return http.StatusOK
	})
	g.handle("k-6")
	if fmt.Sprint(got) != "[answer 1 answer 2]" {
		t.Errorf("agent got %q, want both calls answered by the search", got)
	}
	if m := g.journalCalls(); m["baton.journal.calls/bypass"] != 2 {
		t.Errorf("metrics: %v; want 2 bypasses", m)
	}
}

// TestJournalMetricsDocumented: a hit, a miss and an answer not journaled
// export the journal's series under the names docs/metrics.md gives.
func TestJournalMetricsDocumented(t *testing.T) {
	t.Parallel()
	api := newCounter(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"n":%d,"usage":{"input_tokens":10,"output_tokens":5}}`, n)
	})
	var egress atomic.Pointer[string]
	runs := atomic.Int64{}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, path := range []string{"/v1/messages", "/busy"} {
			req, _ := http.NewRequest("POST", "http://"+*egress.Load()+path, strings.NewReader(`{}`))
			req.Host = api.host()
			req.Header.Set("Baggage", r.Header.Get("Baggage"))
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		w.WriteHeader(failFirst(int(runs.Add(1))))
	}))
	t.Cleanup(agent.Close)
	b := startMetered(t, "agent: b\nupstream: "+agent.URL+"\n"+journalYAML(api.host()))
	addr := b.EgressAddr()
	egress.Store(&addr)
	for range 2 {
		resp := send(t, b.IngressAddr(), "b", "POST", "/work", `{}`, http.Header{"Idempotency-Key": {"k-7"}})
		io.Copy(io.Discard, resp.Body)
	}
	s := scrapeMetrics(t, b.AdminAddr())
	dest := map[string]string{"destination": api.host()}
	s.check(t, "b", []expect{
		{"baton_journal_calls_total", map[string]string{"destination": api.host(), "result": "hit"}, 1},
		{"baton_journal_calls_total", map[string]string{"destination": api.host(), "result": "miss"}, 3},
		{"baton_journal_saved_tokens_total", dest, 15},
		{"baton_journal_unjournaled_total", map[string]string{"destination": api.host(), "reason": "status"}, 2},
	})
	names := []string{"baton_journal_calls_total", "baton_journal_saved_bytes_total", "baton_journal_saved_tokens_total",
		"baton_journal_written_bytes_total", "baton_journal_unjournaled_total"}
	for _, name := range names {
		if s[name] == nil {
			t.Errorf("%s is not exported", name)
		}
	}
	documented(t, names...)
}

// TestJournalIsPerAgent: two agents on one store handle handoffs with the
// same key and make the same call with the same credentials; neither is
// answered from the other's journal.
func TestJournalIsPerAgent(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	search := newCounter(t, numbered)
	var got []string
	script := func(run int, call caller) int {
		_, b := call("GET", search.host(), "/q", "", http.Header{"Authorization": {"Bearer shared"}})
		got = append(got, string(b))
		return http.StatusInternalServerError
	}
	b := newJournalRig(t, journalYAML(search.host()), store(), script)
	c := newJournalRig(t, "agent: c\n"+journalYAML(search.host()), store(), script)
	b.handle("k-same")
	c.handle("k-same")
	b.handle("k-same")
	if fmt.Sprint(got) != "[answer 1 answer 2 answer 1]" || search.calls.Load() != 2 {
		t.Errorf("answers %q after %d calls; want c's own answer, and b's re-run answered from b's journal", got, search.calls.Load())
	}
}

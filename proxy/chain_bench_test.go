package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// BenchmarkChainHops is one request through a chain of three Batons in
// this process: the client, as agent A, calls B through A's Baton; B's agent
// calls C through B's Baton, forwarding traceparent and baggage as an
// agent instrumented with OpenTelemetry does (so that B's call gets its key
// by position); C's agent answers. Each op is two handoffs, four Baton hops,
// with records and dedupe windows on, on the memory store: what the chain
// costs in CPU and allocations per request, the agents included.
func BenchmarkChainHops(b *testing.B) { chainHops(b, chainCaller(b, true)) }

// BenchmarkChainHopsForwardingNothing is BenchmarkChainHops with a B that
// forwards no trace context: its call is tied to the one handling in flight
// at its Baton, which writes the traceparent it continues.
func BenchmarkChainHopsForwardingNothing(b *testing.B) { chainHops(b, chainCaller(b, false)) }

// BenchmarkChainHopsRedis is BenchmarkChainHopsForwardingNothing with the
// three Batons on one Redis (a private redis-server), as a mesh shares one:
// the chain's records, dedupe windows and fingerprints are Redis round
// trips, one request at a time (ns/op is the chain's latency).
func BenchmarkChainHopsRedis(b *testing.B) {
	chainHops(b, chainCallerOn(b, false, storesOn(b, redistest.Start(b).URL(), "")))
}

// BenchmarkChainHopsRedisDistant is BenchmarkChainHopsRedis with Redis
// across a network: behind a proxy that delays every request and reply by
// 250µs (redistest.Distant), which Go's timers round up to about a
// millisecond each way on Linux (redis-rtt-µs reports the median of 100
// PINGs; 2.4 ms on a 2-core machine). Each round trip on a request's path
// shows in its latency, as it does in a mesh whose Redis is far away. The
// proxy runs in this process: its CPU is in cpu-µs/op.
func BenchmarkChainHopsRedisDistant(b *testing.B) {
	url := redistest.Distant(b, redistest.Start(b).URL(), 250*time.Microsecond)
	rtt := redisRTT(b, url)
	chainHops(b, chainCallerOn(b, false, storesOn(b, url, "")))
	b.ReportMetric(float64(rtt.Microseconds()), "redis-rtt-µs")
}

// BenchmarkHopTwoBatonsRedisDistant is BenchmarkHopTwoBatons with B's
// store a Redis as far away as BenchmarkChainHopsRedisDistant's: one
// request at a time, B keeping the fingerprints of the text it receives
// from A (an unsigned peer's) while it claims the dedupe window, then
// keeping the answer; ns/op is the request's latency.
func BenchmarkHopTwoBatonsRedisDistant(b *testing.B) {
	url := redistest.Distant(b, redistest.Start(b).URL(), 250*time.Microsecond)
	rtt := redisRTT(b, url)
	ag := benchAgent(b)
	bB := startBaton(b, "agent: b\nupstream: "+ag.URL+"\nlog_level: warn\nedges: [{from: a}]", redisStoreWithPrefix(b, url, ""))
	aB := hopBaton(b, "agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: http://"+bB.IngressAddr()+"}}\nedges: [{to: b}]")
	runHops(b, "http://"+aB.EgressAddr()+"/task", "b")
	b.ReportMetric(float64(rtt.Microseconds()), "redis-rtt-µs")
}

// redisRTT is the median of 100 PINGs to the Redis at url.
func redisRTT(b *testing.B, url string) time.Duration {
	s := redisStoreWithPrefix(b, url, "")
	defer s.Close()
	rtts := make([]time.Duration, 100)
	for i := range rtts {
		start := time.Now()
		if err := s.Ping(context.Background()); err != nil {
			b.Fatal(err)
		}
		rtts[i] = time.Since(start)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}

// chainHops runs call, one request through a chain, b.N times, and reports
// its allocations and the process's CPU per request.
func chainHops(b *testing.B, call func() error) {
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

// chainCaller starts BenchmarkChainHops's chain and returns one request
// through it, its answer read whole and checked.
func chainCaller(tb testing.TB, forward bool) func() error {
	return chainCallerOn(tb, forward, benchMemory)
}

// chainCallerOn is chainCaller with each Baton's store made by store.
func chainCallerOn(tb testing.TB, forward bool, store func() state.Store) func() error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	cAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"ok":true}`)
	}))
	tb.Cleanup(cAgent.Close)
	var bEgress atomic.Pointer[string]
	bAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		req, _ := http.NewRequest("POST", "http://"+*bEgress.Load()+"/step", strings.NewReader(`{"step":1}`))
		req.Host = "c"
		req.Header.Set("Content-Type", "application/json")
		if forward {
			req.Header.Set("Traceparent", r.Header.Get("Traceparent"))
			if bg := r.Header.Get("Baggage"); bg != "" {
				req.Header.Set("Baggage", bg)
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}))
	tb.Cleanup(bAgent.Close)
	cB := startBaton(tb, "agent: c\nupstream: "+cAgent.URL+"\nlog_level: warn\n", store())
	bB := startBaton(tb, "agent: b\nupstream: "+bAgent.URL+"\nlog_level: warn\npeers: {c: {url: http://"+cB.IngressAddr()+"}}\n", store())
	egress := bB.EgressAddr()
	bEgress.Store(&egress)
	aB := startBaton(tb, "agent: a\nupstream: http://127.0.0.1:1\nlog_level: warn\npeers: {b: {url: http://"+bB.IngressAddr()+"}}\n", store())
	return poster("http://"+aB.EgressAddr()+"/work", "b", `{"task":"x"}`)
}

// benchMemory is a Baton's memory store in the benchmarks: large enough
// that nothing is evicted during a run.
func benchMemory() state.Store {
	return state.NewMemory(config.Memory{MaxEntries: 1 << 20, MaxBytes: 256 << 20})
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureCalls runs call b.N times, warmed up already, and reports its
// allocations and the process's CPU per call (cpu-µs/op).
func measureCalls(b *testing.B, call func()) {
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		call()
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

//go:build !race

package proxy_test

import (
	"runtime"
	"testing"
)

// TestRequestPathAllocs guards the allocations of the request path: one
// request through one Baton, through two, and through a chain of three
// (BenchmarkHop's, BenchmarkHopTwoBatons' and BenchmarkChainHops' requests,
// every default on, the memory store), counted as the process's heap
// allocations per request, the client and the agents included. Counts are
// stable where times are not: a change that adds allocations to every
// request fails here. If they buy a feature, raise the ceiling in the same
// change and say what for; when a change removes some, lower it.
//
// The race detector changes allocation counts (sync.Pool drops items), so
// this file is built without it; make test runs it in a pass of its own.
func TestRequestPathAllocs(t *testing.T) {
	bareAgent := benchAgent(t)
	bare := allocsPerRequest(t, hopCaller(bareAgent.URL+"/task", ""))

	cases := []struct {
		name    string
		ceiling float64
		call    func() func() error
	}{
		{"one Baton (egress to the peer's agent)", 236, func() func() error {
			ag := benchAgent(t)
			bt := hopBaton(t, "agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: "+ag.URL+"}}\nedges: [{to: b}]")
			return hopCaller("http://"+bt.EgressAddr()+"/task", "b")
		}},
		{"two Batons (egress, ingress, agent)", 412, func() func() error {
			ag := benchAgent(t)
			bB := hopBaton(t, "agent: b\nupstream: "+ag.URL+"\nedges: [{from: a}]")
			aB := hopBaton(t, "agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: http://"+bB.IngressAddr()+"}}\nedges: [{to: b}]")
			return hopCaller("http://"+aB.EgressAddr()+"/task", "b")
		}},
		{"a chain of three Batons (two handoffs, four hops)", 818, func() func() error {
			return chainCaller(t, true)
		}},
	}
	for _, c := range cases {
		n := allocsPerRequest(t, c.call())
		t.Logf("%s: %.0f allocations per request (the bare client and agent: %.0f)", c.name, n, bare)
		if n > c.ceiling {
			t.Errorf("%s: %.0f allocations per request, over the ceiling of %.0f. Find what added them "+
				"(go test ./proxy -run XXX -bench BenchmarkHop -memprofile mem.out -memprofilerate 1); if they buy a "+
				"feature, raise the ceiling in proxy/allocs_test.go and say what for", c.name, n, c.ceiling)
		}
	}
}

// allocsPerRequest is the process's heap allocations per call, the least
// of three rounds of 500 after 200 to warm connections and pools: the
// least, because a background task (a ticker, a collection's sweep) can
// only add to a round.
func allocsPerRequest(t *testing.T, call func() error) float64 {
	t.Helper()
	for range 200 {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	const n = 500
	least := -1.0
	var before, after runtime.MemStats
	for range 3 {
		runtime.ReadMemStats(&before)
		for range n {
			if err := call(); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		if per := float64(after.Mallocs-before.Mallocs) / n; least < 0 || per < least {
			least = per
		}
	}
	return least
}

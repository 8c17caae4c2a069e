package proxy

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/batonproxy/baton/config"
)

func TestOpenTime(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	// rMid picks the factor 1: no jitter. rTop is the largest r below 1.
	const rLow, rMid = 0.0, 0.5
	rTop := math.Nextafter(1, 0)
	tests := []struct {
		name          string
		openFor, most time.Duration
		failedProbes  int
		r             float64
		want          time.Duration
	}{
		{name: "first opening", openFor: 100 * ms, most: 400 * ms, r: rMid, want: 100 * ms},
		{name: "one failed probe doubles it", openFor: 100 * ms, most: 400 * ms, failedProbes: 1, r: rMid, want: 200 * ms},
		{name: "two double it twice", openFor: 100 * ms, most: 400 * ms, failedProbes: 2, r: rMid, want: 400 * ms},
		{name: "the cap holds", openFor: 100 * ms, most: 400 * ms, failedProbes: 3, r: rMid, want: 400 * ms},
		{name: "the cap holds after days of failed probes", openFor: 100 * ms, most: 400 * ms, failedProbes: 1 << 20, r: rMid, want: 400 * ms},
		{name: "a cap between doublings", openFor: 100 * ms, most: 300 * ms, failedProbes: 2, r: rMid, want: 300 * ms},
		{name: "jitter: 20% shorter at the least", openFor: 100 * ms, most: 400 * ms, r: rLow, want: 80 * ms},
		{name: "jitter: under 20% longer at the most", openFor: 100 * ms, most: 400 * ms, r: rTop, want: 120 * ms},
		{name: "jitter on a doubling", openFor: 100 * ms, most: 400 * ms, failedProbes: 1, r: rLow, want: 160 * ms},
		{name: "jitter never past the cap", openFor: 100 * ms, most: 400 * ms, failedProbes: 2, r: rTop, want: 400 * ms},
		{name: "jitter under the cap", openFor: 100 * ms, most: 400 * ms, failedProbes: 2, r: rLow, want: 320 * ms},
		{name: "a fixed open time", openFor: 100 * ms, most: 100 * ms, failedProbes: 3, r: rLow, want: 80 * ms},
		{name: "the defaults, doubled past the cap", openFor: time.Second, most: 30 * time.Second, failedProbes: 5, r: rMid, want: 30 * time.Second},
		{name: "no overflow near the largest duration", openFor: time.Duration(math.MaxInt64 / 3), most: math.MaxInt64, failedProbes: 3, r: rTop, want: math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := openTime(tt.openFor, tt.most, tt.failedProbes, tt.r)
			// rTop leaves a factor a hair below 1.2.
			if d := got - tt.want; d < -time.Microsecond || d > 0 {
				t.Errorf("openTime(%s, %s, %d, %g) = %s, want %s", tt.openFor, tt.most, tt.failedProbes, tt.r, got, tt.want)
			}
		})
	}
}

// TestOpenTimeJitter draws open times as the breaker does: each within
// ±20% of its doubling, never past the cap, and spread over that range.
func TestOpenTimeJitter(t *testing.T) {
	t.Parallel()
	const openFor, most = time.Second, 30 * time.Second
	for probes, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, most} {
		lo, hi := most, time.Duration(0)
		for range 1000 {
			d := openTime(openFor, most, probes, rand.Float64())
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < base*8/10 || hi > min(base*12/10, most) {
			t.Errorf("after %d failed probes: open times from %s to %s, want within ±20%% of %s and at most %s", probes, lo, hi, base, most)
		}
		// 1000 draws leave gaps at the ends of well under 1% of the range.
		if probes < 5 && (lo > base*82/100 || hi < base*118/100) {
			t.Errorf("after %d failed probes: open times from %s to %s, want spread over ±20%% of %s", probes, lo, hi, base)
		}
	}
}

// BenchmarkBreakerExecute is the cost of a closed breaker on a try: bare
// gobreaker, and breaker around it.
func BenchmarkBreakerExecute(b *testing.B) {
	bc := config.Breaker{Failures: 5, OpenFor: config.Duration(time.Second), MaxOpenFor: config.Duration(30 * time.Second), HalfOpenRequests: 1}
	resp := &http.Response{StatusCode: http.StatusOK}
	try := func() (*http.Response, error) { return resp, nil }
	wrapped := newBreaker("peer", bc, func(gobreaker.State, gobreaker.State, time.Duration) {})
	for _, bm := range []struct {
		name    string
		execute func(func() (*http.Response, error)) (*http.Response, error)
	}{
		{name: "gobreaker", execute: wrapped.cb.Execute},
		{name: "breaker", execute: wrapped.Execute},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bm.execute(try)
			}
		})
		b.Run(bm.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bm.execute(try)
				}
			})
		})
	}
}

// TestBreakerWatchesUnreachablePeer: a breaker opened by a peer that could
// not be reached lets the next try through as soon as the peer accepts a
// connection again, long before the open time it chose; one opened by
// failures the peer answered keeps its open time.
func TestBreakerWatchesUnreachablePeer(t *testing.T) {
	t.Parallel()
	bc := config.Breaker{Failures: 1, OpenFor: config.Duration(50 * time.Millisecond),
		MaxOpenFor: config.Duration(time.Minute), HalfOpenRequests: 1}
	var up atomic.Bool
	var reached atomic.Int64
	b := newBreaker("p", bc, func(gobreaker.State, gobreaker.State, time.Duration) {})
	b.reach = func(context.Context) error {
		if up.Load() {
			return nil
		}
		return errors.New("connection refused")
	}
	b.reached = func() { reached.Add(1) }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	try := func(err error) {
		b.Execute(func() (*http.Response, error) { b.tried(err); return nil, err })
	}
	waitUnheld := func() {
		for end := time.Now().Add(10 * time.Second); b.held(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the breaker held open for more than 10s")
			}
		}
	}
	// Open, and let five probes fail: the hold grows to 1.6s, ±20%.
	try(refused)
	for range 5 {
		waitUnheld()
		time.Sleep(time.Millisecond) // past gobreaker's own open time too
		try(refused)
	}
	chosen := b.until.Load()
	if !b.held() || time.Duration(chosen)-time.Since(b.born) < time.Second {
		t.Fatalf("the breaker does not hold open for a second or more after failed probes (held %v)", b.held())
	}
	up.Store(true)
	waitUnheld()
	if at := int64(time.Since(b.born)); at >= chosen {
		t.Errorf("the hold ended at its chosen time, not when the peer was reachable again")
	}
	if reached.Load() != 1 {
		t.Errorf("reached was told %d times, want once", reached.Load())
	}
	b.Execute(func() (*http.Response, error) { b.tried(nil); return nil, nil })
	if s := b.State(); s != gobreaker.StateClosed {
		t.Errorf("the probe succeeded and the breaker is %v", s)
	}

	// A peer that answers with failures is not watched: the hold stands.
	bc.OpenFor = config.Duration(2 * time.Second)
	b2 := newBreaker("q", bc, func(gobreaker.State, gobreaker.State, time.Duration) {})
	b2.reach = b.reach
	b2.Execute(func() (*http.Response, error) { b2.tried(nil); return nil, errPeerStatus })
	time.Sleep(4 * reachEvery)
	if !b2.held() {
		t.Error("a breaker opened by the peer's failure answers let tries through when the peer was reachable")
	}
}

// TestPingIsAnsweredByTheServer: the breaker's ping of a peer is OPTIONS *,
// which the peer's HTTP server answers itself, its handler (the agent's
// path) never seeing it; nothing listening is an error.
func TestPingIsAnsweredByTheServer(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { seen.Add(1) }))
	u, _ := url.Parse(srv.URL + "/base/")
	if err := ping(context.Background(), http.DefaultTransport, u); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("the ping reached the handler %d times", n)
	}
	srv.Close()
	if err := ping(context.Background(), http.DefaultTransport, u); err == nil {
		t.Error("a ping of a closed server succeeded")
	}
}

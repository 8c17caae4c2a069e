package state_test

import (
	"crypto/rand"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// BenchmarkMemoryClaimSwap measures one lease cycle on the memory store:
// Claim a key, Swap it to its final value, Release it.
func BenchmarkMemoryClaimSwap(b *testing.B) {
	m := state.NewMemory(config.Memory{MaxEntries: config.DefaultMemoryEntries, MaxBytes: config.DefaultMemoryBytes})
	b.Cleanup(func() { _ = m.Close() })
	benchClaimSwap(b, m)
}

// BenchmarkRedisClaimSwap is the same cycle against the shared Redis: three
// round trips (SET NX GET, EVALSHA, EVALSHA).
func BenchmarkRedisClaimSwap(b *testing.B) {
	url := redistest.Shared(b)
	r := newRedis(b, config.Redis{URL: url, Prefix: testPrefix(b, url)})
	benchClaimSwap(b, r)
}

func benchClaimSwap(b *testing.B, s state.Store) {
	token := []byte("holder-7f3a9c2e4b1d")
	final := []byte(`{"state":"done","by":"agent-b"}`)
	var goroutines atomic.Int64
	cycle := func(b *testing.B, keys []string, i int) {
		ctx := b.Context()
		k := keys[i%len(keys)]
		if ok, _, err := s.Claim(ctx, k, token, time.Minute); err != nil || !ok {
			b.Fatalf("Claim = %v, %v", ok, err)
		}
		if ok, err := s.Swap(ctx, k, token, final, time.Minute); err != nil || !ok {
			b.Fatalf("Swap = %v, %v", ok, err)
		}
		if ok, err := s.Release(ctx, k, final); err != nil || !ok {
			b.Fatalf("Release = %v, %v", ok, err)
		}
	}
	keysFor := func(g int64) []string {
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = "bench:{" + strconv.FormatInt(g, 10) + "}:" + strconv.Itoa(i)
		}
		return keys
	}
	b.Run("serial", func(b *testing.B) {
		keys := keysFor(goroutines.Add(1))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			cycle(b, keys, i)
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			keys := keysFor(goroutines.Add(1))
			for i := 0; pb.Next(); i++ {
				cycle(b, keys, i)
			}
		})
	})
}

// BenchmarkMemoryAppendChained is a handoff record's first write on a full
// memory store (the steady state of a busy Baton): a new trace's chain
// entry, its tail, the record and its checkpoint, evicting the oldest.
func BenchmarkMemoryAppendChained(b *testing.B) {
	m := state.NewMemory(config.Memory{MaxEntries: config.DefaultMemoryEntries, MaxBytes: config.DefaultMemoryBytes})
	b.Cleanup(func() { _ = m.Close() })
	entry := make([]byte, 700)
	rec := make([]byte, 600)
	cp := make([]byte, 1100)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		t := "{" + strconv.FormatInt(int64(1e15+i), 16) + "0000000000000000}"
		_, err := m.AppendChained(b.Context(), []state.Link{{Log: t + ":chain", Seq: 1, Entry: entry,
			Attach: []state.KV{{Key: "rec:x", Val: rec}, {Key: "cp:x", Val: cp}}, TTL: 7 * 24 * time.Hour}})
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRedisAppendChained writes handoff records' chain entries to the
// shared Redis as record.Book does: new traces, a 700-byte entry, and a
// 1100-byte checkpoint on every other link (the delegation record's). It
// reports Redis's own CPU per link (INFO's used_cpu_sys + used_cpu_user),
// which is what a Baton's records cost the Redis it shares. The TTL is the
// default retention, so that no key expires during the run (the prefix's
// keys are removed after it).
func BenchmarkRedisAppendChained(b *testing.B) {
	url := redistest.Shared(b)
	r := newRedis(b, config.Redis{URL: url, Prefix: testPrefix(b, url)})
	entry := make([]byte, 700)
	cp := make([]byte, 1100)
	for _, batch := range []int{1, 16} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			links := make([]state.Link, batch)
			run := rand.Text()[:8]
			n := 0
			cpu0 := redisCPU(b, r)
			b.ReportAllocs()
			for b.Loop() {
				for i := range links {
					n++
					links[i] = state.Link{Log: "{" + run + strconv.Itoa(n) + "}:records", Seq: 1, Entry: entry, TTL: 7 * 24 * time.Hour}
					if n%2 == 0 {
						links[i].Attach = []state.KV{{Key: "cp:x", Val: cp}}
					}
				}
				res, err := r.AppendChained(b.Context(), links)
				if err != nil || !res[0].OK {
					b.Fatalf("AppendChained = %+v, %v", res, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/link")
			b.ReportMetric((redisCPU(b, r)-cpu0)*1e6/float64(n), "redis-µs/link")
		})
	}
}

// redisCPU returns the CPU seconds the Redis server has used.
func redisCPU(b *testing.B, r *state.Redis) float64 {
	info, err := r.Client().Info(b.Context(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu %s: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

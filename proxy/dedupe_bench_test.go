package proxy_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// countHook counts the round trips go-redis makes for the dedupe window (a
// pipeline counts once), telling them by the window's "idem:" keys.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if touchesWindow(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if touchesWindow(c) {
				h.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

func touchesWindow(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.Contains(s, "idem:{") {
			return true
		}
	}
	return false
}

// TestDedupeRedisRoundTrips checks the window's cost: two round trips for a
// first delivery (claim, then store the response), one for a duplicate.
func TestDedupeRedisRoundTrips(t *testing.T) {
	t.Parallel()
	store := redisStore(t, redistest.Shared(t)).(*state.Redis)
	hook := &countHook{}
	store.Client().AddHook(hook)
	agent := &counting{}
	p := dedupePair(t, agent, store, "")
	// Warm up: the connection's handshake and the first load of each
	// script are one-off costs, not per request.
	post(t, p.a.EgressAddr(), "rt-warm", `{}`)
	post(t, p.a.EgressAddr(), "rt-warm", `{}`)
	hook.n.Store(0)
	if resp := post(t, p.a.EgressAddr(), "rt-1", `{}`); resp.StatusCode != 201 {
		t.Fatal(resp.StatusCode)
	}
	if n := hook.n.Load(); n != 2 {
		t.Errorf("first delivery took %d Redis round trips, want 2", n)
	}
	hook.n.Store(0)
	post(t, p.a.EgressAddr(), "rt-1", `{}`)
	if n := hook.n.Load(); n != 1 {
		t.Errorf("a replay took %d Redis round trips, want 1", n)
	}
}

// BenchmarkDedupeWindow measures claim + complete (a first delivery through
// the middleware, to a handler that answers at once) against the memory store
// and a real Redis, and reports p50 and p99 per request.
func BenchmarkDedupeWindow(b *testing.B) {
	for _, backend := range []string{"memory", "redis"} {
		b.Run(backend, func(b *testing.B) {
			var store state.Store
			if backend == "memory" {
				store = state.NewMemory(config.Memory{MaxEntries: 1 << 20, MaxBytes: 256 << 20})
			} else {
				url := redistest.Shared(b)
				s, err := state.NewRedis(config.Redis{URL: url, Prefix: redistest.Prefix(b, url)})
				if err != nil {
					b.Fatal(err)
				}
				store = s
			}
			defer store.Close()
			pol := &middleware.DedupePolicy{Methods: []string{"POST"}, Window: time.Minute, Lease: 10 * time.Second, MaxResponseBytes: 1 << 20}
			// A holder as a Baton runs one: its mark renewed every second.
			holder := state.NewHolder(store, state.DefaultHolderTimeout, slog.New(slog.DiscardHandler))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			holder.Begin(ctx, "")
			go holder.Run(ctx)
			h := middleware.Dedupe(store, holder, func(string) *middleware.DedupePolicy { return pol }, slog.New(slog.DiscardHandler))(
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"ok":true}`)
				}))
			body := strings.Repeat("x", 512)
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := httptest.NewRequest("POST", "/pay", strings.NewReader(body))
				r.Header.Set("Idempotency-Key", "k"+strconv.Itoa(i))
				in := &middleware.Info{Side: middleware.Ingress, From: "analyst", To: "summarizer"}
				r = r.WithContext(middleware.WithInfo(r.Context(), in))
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, r)
				lat = append(lat, time.Since(start))
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

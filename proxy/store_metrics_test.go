package proxy

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// storeSeries reads baton.store.duration counts and baton.store.errors by
// op.
func storeSeries(t *testing.T, r *sdkmetric.ManualReader) (calls, errs map[string]int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	calls, errs = map[string]int64{}, map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				if m.Name == "baton.store.duration" {
					for _, dp := range d.DataPoints {
						op, _ := dp.Attributes.Value("op")
						calls[op.AsString()] += int64(dp.Count)
					}
				}
			case metricdata.Sum[int64]:
				if m.Name == "baton.store.errors" {
					for _, dp := range d.DataPoints {
						op, _ := dp.Attributes.Value("op")
						errs[op.AsString()] += dp.Value
					}
				}
			}
		}
	}
	return calls, errs
}

func measuredFixture(t *testing.T, s state.Store) (state.Store, *sdkmetric.ManualReader, *int) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := middleware.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	indexed := 0
	return measureStore(s, m, func() { indexed++ }), r, &indexed
}

// TestMeasuredStoreLabelsEachOp calls every operation once on a real
// memory store: each is timed under its own op, and a missing key is no
// error.
func TestMeasuredStoreLabelsEachOp(t *testing.T) {
	t.Parallel()
	mem := state.NewMemory(config.Memory{})
	defer mem.Close()
	s, r, indexed := measuredFixture(t, mem)
	ctx := context.Background()
	ttl := time.Minute
	steps := map[string]func() error{
		"claim": func() error { _, _, err := s.Claim(ctx, "c", []byte("v"), ttl); return err },
		"claim_many": func() error {
			_, err := s.ClaimMany(ctx, []state.ClaimOp{{Key: "cm", Val: []byte("v"), TTL: ttl}})
			return err
		},
		"renew":   func() error { _, err := s.Renew(ctx, "c", []byte("v"), ttl); return err },
		"swap":    func() error { _, err := s.Swap(ctx, "c", []byte("v"), []byte("w"), ttl); return err },
		"release": func() error { _, err := s.Release(ctx, "c", []byte("w")); return err },
		"set":     func() error { return s.Set(ctx, "k", []byte("v"), ttl) },
		"delete":  func() error { return s.Delete(ctx, "k") },
		"append":  func() error { _, err := s.Append(ctx, "l", []byte("x"), ttl); return err },
		"range":   func() error { _, err := s.Range(ctx, "l", 0, -1); return err },
		"append_counting": func() error {
			_, err := s.AppendCounting(ctx, "l", []byte("y"), ttl, state.Counts{Key: "n", Deltas: []state.Scored{{Member: "m", Score: 1}}, TTL: ttl})
			return err
		},
		"index_add": func() error { return s.IndexAdd(ctx, "i", "m", 1, ttl) },
		"index_incr": func() error {
			_, err := s.IndexIncr(ctx, "n", []state.Scored{{Member: "m", Score: 2}}, ttl)
			return err
		},
		"index_range":    func() error { _, err := s.IndexRange(ctx, "i", 0, 10, 0, 0); return err },
		"index_remove":   func() error { return s.IndexRemove(ctx, "i", "m") },
		"index_count":    func() error { _, err := s.IndexCount(ctx, "i"); return err },
		"append_chained": func() error { _, err := s.AppendChained(ctx, nil); return err },
		"read_chain":     func() error { _, err := s.ReadChain(ctx, "ch"); return err },
		"chain_tails":    func() error { _, err := s.ChainTails(ctx, []string{"ch"}); return err },
		"attached": func() error {
			if _, err := s.Attached(ctx, "ch", "absent"); !errors.Is(err, state.ErrNotFound) {
				return err
			}
			return nil
		},
		"mark_add":    func() error { return s.MarkAdd(ctx, "mk", []uint64{1}, "v", ttl, 8) },
		"mark_lookup": func() error { _, err := s.MarkLookup(ctx, "mk", []uint64{1}); return err },
		"ping":        func() error { return s.Ping(ctx) },
		"touch":       func() error { _, err := s.Touch(ctx, "c", ttl); return err },
		"get": func() error {
			if _, err := s.Get(ctx, "absent"); !errors.Is(err, state.ErrNotFound) {
				return err
			}
			return nil
		},
	}
	if len(steps) != len(storeOpNames) {
		t.Fatalf("%d steps for %d ops", len(steps), len(storeOpNames))
	}
	for op, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	calls, errs := storeSeries(t, r)
	for _, op := range storeOpNames {
		if calls[op] != 1 || errs[op] != 0 {
			t.Errorf("op %s: %d calls, %d errors; want 1 and 0", op, calls[op], errs[op])
		}
	}
	if *indexed != 4 {
		t.Errorf("index changes heard %d times, want 4 (add, incr, append counting, remove)", *indexed)
	}
}

// TestMeasuredStoreCountsErrors points a Redis store at an address that
// refuses connections: every call fails and is counted.
func TestMeasuredStoreCountsErrors(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rs, err := state.NewRedis(config.Redis{URL: "redis://" + addr, DialTimeout: config.Duration(200 * time.Millisecond),
		OpTimeout: config.Duration(200 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	s, r, _ := measuredFixture(t, rs)
	ctx := context.Background()
	if _, err := s.ClaimMany(ctx, []state.ClaimOp{{Key: "k", Val: []byte("v"), TTL: time.Second}}); err == nil {
		t.Fatal("a claim on a refused address succeeded")
	}
	if _, err := s.Get(ctx, "k"); err == nil || errors.Is(err, state.ErrNotFound) {
		t.Fatalf("get on a refused address: %v", err)
	}
	calls, errs := storeSeries(t, r)
	for _, op := range []string{"claim_many", "get"} {
		if calls[op] != 1 || errs[op] != 1 {
			t.Errorf("op %s: %d calls, %d errors; want 1 and 1", op, calls[op], errs[op])
		}
	}
	if errs["swap"] != 0 {
		t.Errorf("swap: %d errors without a call", errs["swap"])
	}
}

// TestMeasuredStoreTellsInProcess: the wrapper passes on whether the store
// is in-process, which decides how the record book writes to it.
func TestMeasuredStoreTellsInProcess(t *testing.T) {
	mem := state.NewMemory(config.Memory{})
	t.Cleanup(func() { mem.Close() })
	red, err := state.NewRedis(config.Redis{URL: redistest.Shared(t), Prefix: "baton-test-inprocess:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { red.Close() })
	for _, tc := range []struct {
		name  string
		store state.Store
		want  bool
	}{{"memory", mem, true}, {"redis", red, false}} {
		s, r, _ := measuredFixture(t, tc.store)
		ip, ok := s.(record.InProcess)
		if got := ok && ip.InProcess(); got != tc.want {
			t.Errorf("%s: measured store in-process = %v, want %v", tc.name, got, tc.want)
		}
		if !ok {
			continue
		}
		// Extend reaches the in-process store, timed as append_chained.
		err := ip.Extend("{t}:records", time.Hour, func(string) ([]byte, []state.KV) { return []byte("e1"), nil })
		calls, _ := storeSeries(t, r)
		if tc.want {
			c, rerr := tc.store.ReadChain(t.Context(), "{t}:records")
			if err != nil || rerr != nil || len(c.Entries) != 1 || calls["append_chained"] != 1 {
				t.Errorf("%s: Extend = %v; chain %q, %v; append_chained timed %d times", tc.name, err, c.Entries, rerr, calls["append_chained"])
			}
		} else if err == nil {
			t.Errorf("%s: Extend on a store that is not in-process succeeded", tc.name)
		}
	}
}

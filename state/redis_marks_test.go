package state_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state/redistest"
)

// TestRedisMarkSetTTL: a mark set's TTL is set by a Baton's first add, then
// at most once an eighth of the TTL (to the TTL and an eighth, so that what
// was added between two refreshes is kept the whole TTL), and at once on a
// set an add made anew: after the newer generation was rotated out, or the
// set lapsed. Commands are counted on a private Redis.
func TestRedisMarkSetTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	addr := strings.TrimPrefix(srv.URL(), "redis://")
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	pexpires := func() int {
		t.Helper()
		return redistest.Commands(t, rc)["pexpire"]
	}
	const ttl = 8 * time.Hour
	const key = "taint:{agent}"
	cur, prev := "p:taint:{agent}:m0", "p:taint:{agent}:m1"
	pttl := func(k string) time.Duration {
		t.Helper()
		d, err := rc.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := newRedis(t, config.Redis{URL: srv.URL(), Prefix: "p:"})
	b := newRedis(t, config.Redis{URL: srv.URL(), Prefix: "p:"}) // another Baton of the agent

	if err := a.MarkAdd(ctx, key, []uint64{1, 2}, "src", ttl, 8); err != nil {
		t.Fatal(err)
	}
	if d := pttl(cur); d <= ttl || d > ttl+ttl/8 {
		t.Fatalf("after the first add the set's TTL is %v, want over %v and at most %v", d, ttl, ttl+ttl/8)
	}
	before := pexpires()
	if err := a.MarkAdd(ctx, key, []uint64{3}, "src", ttl, 8); err != nil {
		t.Fatal(err)
	}
	if n := pexpires() - before; n != 0 {
		t.Errorf("a second add within an eighth of the TTL sent %d PEXPIRE, want none", n)
	}
	// Another Baton's first add sets it too: it has not set it yet.
	if err := b.MarkAdd(ctx, key, []uint64{4}, "src", ttl, 8); err != nil {
		t.Fatal(err)
	}
	if n := pexpires() - before; n != 1 {
		t.Errorf("another Baton's first add sent %d PEXPIRE, want 1", n)
	}

	// The set lapses (here: deleted); a's next add makes it anew and gives
	// it a TTL, though a's refresh is not due.
	if err := rc.Del(ctx, cur).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.MarkAdd(ctx, key, []uint64{5}, "src", ttl, 8); err != nil {
		t.Fatal(err)
	}
	if d := pttl(cur); d <= ttl {
		t.Fatalf("a set made anew has TTL %v, want over %v (-1: none)", d, ttl)
	}

	// Four members reach half the bound of 8: the newer generation becomes
	// the older, with its TTL; the next add makes the newer anew, with one.
	if err := a.MarkAdd(ctx, key, []uint64{6, 7, 8}, "src", ttl, 8); err != nil {
		t.Fatal(err)
	}
	if n, _ := rc.Exists(ctx, cur).Result(); n != 0 {
		t.Fatalf("the newer generation was not rotated out at half the bound")
	}
	if d := pttl(prev); d <= ttl {
		t.Fatalf("the older generation's TTL is %v, want over %v", d, ttl)
	}
	if err := b.MarkAdd(ctx, key, []uint64{9}, "src", ttl, 8); err != nil {
		t.Fatal(err)
	}
	if d := pttl(cur); d <= ttl {
		t.Fatalf("the newer generation made after a rotation has TTL %v, want over %v", d, ttl)
	}
	vals, err := b.MarkLookup(ctx, key, []uint64{1, 5, 9, 42})
	if err != nil {
		t.Fatal(err)
	}
	if vals[0] != "" || vals[1] != "src" || vals[2] != "src" || vals[3] != "" {
		t.Errorf("lookup = %q, want [\"\" src src \"\"] (1 went with the lapsed set)", vals)
	}
}

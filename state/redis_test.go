package state_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
	"github.com/batonproxy/baton/state/storetest"
)

func TestRedis(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := testPrefix(t, url)
	storetest.Run(t, func(t *testing.T) state.Store {
		return newRedis(t, config.Redis{URL: url, Prefix: prefix})
	})
}

// TestRedisBatched runs the contract suite with every request-path command
// going through the autopipeliner, as it does when callers overlap.
func TestRedisBatched(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := testPrefix(t, url)
	storetest.Run(t, func(t *testing.T) state.Store {
		r := newRedis(t, config.Redis{URL: url, Prefix: prefix})
		state.AlwaysBatch(r)
		return r
	})
}

// TestRedisCluster runs the contract suite through a cluster client against
// a one-node Redis Cluster: scripts, MULTI and key routing must all work
// when every key is hashed to a slot.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	srv := redistest.StartCluster(t)
	// Two addresses (the same node twice) is how the config asks for Cluster.
	cfg := config.Redis{Addrs: []string{srv.Addr, srv.Addr}}
	storetest.Run(t, func(t *testing.T) state.Store { return newRedis(t, cfg) })
}

// TestRedisKeepsHashTags checks, on a real cluster node, that prefixing
// keeps a key's hash tag deciding its slot, so keys of one trace stay
// together and multi-key scripts over them are legal.
func TestRedisKeepsHashTags(t *testing.T) {
	t.Parallel()
	srv := redistest.StartCluster(t)
	r := newRedis(t, config.Redis{Addrs: []string{srv.Addr, srv.Addr}, Prefix: "p:"})
	c := r.Client()
	tests := []struct {
		name, key, tag string
	}{
		{"tag first", "{trace-1}:claim", "trace-1"},
		{"tag inside", "idem:{trace-1}:step/2", "trace-1"},
		{"first tag wins", "{a}{b}", "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if got := r.Key(tc.key); got != "p:"+tc.key {
				t.Fatalf("Key(%q) = %q, want the prefix in front", tc.key, got)
			}
			slot, err := c.ClusterKeySlot(ctx, r.Key(tc.key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			want, err := c.ClusterKeySlot(ctx, tc.tag).Result()
			if err != nil {
				t.Fatal(err)
			}
			if slot != want {
				t.Fatalf("slot of %q = %d, want %d (the slot of its tag %q)", r.Key(tc.key), slot, want, tc.tag)
			}
		})
	}
	t.Run("multi-key script over one trace", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		if err := r.Set(ctx, "a:{trace-2}", []byte("1"), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Append(ctx, "b:{trace-2}", []byte("e"), time.Minute); err != nil {
			t.Fatal(err)
		}
		keys := []string{r.Key("a:{trace-2}"), r.Key("b:{trace-2}")}
		n, err := c.Eval(ctx, `return redis.call('EXISTS', KEYS[1], KEYS[2])`, keys).Int64()
		if err != nil || n != 2 {
			t.Fatalf("EXISTS over both keys = %d, %v; want 2 (no CROSSSLOT)", n, err)
		}
	})
}

// TestRedisServerDown kills Redis under a live store: operations must fail
// within the op timeout rather than hang, and once Redis is back the same
// store must work again without being rebuilt.
func TestRedisServerDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const opTimeout = 300 * time.Millisecond
	r := newRedis(t, config.Redis{
		URL:         srv.URL(),
		DialTimeout: config.Duration(opTimeout),
		OpTimeout:   config.Duration(opTimeout),
	})
	ctx := t.Context()
	if err := r.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatalf("Set before the kill: %v", err)
	}
	srv.Kill()
	ops := []struct {
		name string
		run  func(context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, err := r.Get(ctx, "k"); return err }},
		{"Claim", func(ctx context.Context) error { _, _, err := r.Claim(ctx, "c", []byte("v"), time.Minute); return err }},
		{"Swap", func(ctx context.Context) error { _, err := r.Swap(ctx, "c", []byte("v"), []byte("w"), 0); return err }},
		{"Append", func(ctx context.Context) error { _, err := r.Append(ctx, "l", []byte("v"), 0); return err }},
		{"IndexRange", func(ctx context.Context) error { _, err := r.IndexRange(ctx, "i", 0, 1, 0, 0); return err }},
		{"Ping", r.Ping},
	}
	// Sequential on purpose: each op meets the dead server in a different
	// state of the client's pool (stale connection, failed dials, fast fail).
	for _, op := range ops {
		// The bound is generous: it tells "bounded by the op timeout" from
		// "stuck in dial retries and backoff", not fast from slow.
		const bound = opTimeout + 2*time.Second
		began := time.Now()
		err := op.run(ctx)
		took := time.Since(began)
		t.Logf("%s with Redis down: %v after %v", op.name, err, took)
		if took > bound {
			t.Errorf("%s with Redis down took %v, want under %v", op.name, took, bound)
		}
		if err == nil {
			t.Errorf("%s with Redis down: no error", op.name)
		} else if !strings.HasPrefix(err.Error(), "state: redis: ") {
			t.Errorf("%s error %q lacks the state: redis: prefix", op.name, err)
		}
	}
	srv.Restart(t)
	stop := time.Now().Add(30 * time.Second)
	for {
		err := r.Set(ctx, "k", []byte("again"), 0)
		if err == nil {
			break
		}
		if time.Now().After(stop) {
			t.Fatalf("store still failing 30s after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ok, _, err := r.Claim(ctx, "c", []byte("v"), time.Minute); err != nil || !ok {
		t.Fatalf("Claim after the restart = %v, %v", ok, err)
	}
	if got, err := r.Get(ctx, "k"); err != nil || string(got) != "again" {
		t.Fatalf("Get after the restart = %q, %v", got, err)
	}
}

func TestRedisContextCanceled(t *testing.T) {
	t.Parallel()
	r := newRedis(t, config.Redis{URL: redistest.Shared(t), Prefix: testPrefix(t, "")})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a canceled context: %v, want context.Canceled", err)
	}
}

func TestNewRedisRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  config.Redis
		want string
	}{
		{"nothing to connect to", config.Redis{}, "set url"},
		{"url and addrs", config.Redis{URL: "redis://h:6379", Addrs: []string{"h:6379"}}, "not both"},
		{"bad scheme", config.Redis{URL: "http://h:6379"}, "scheme"},
		{"malformed url hides password", config.Redis{URL: "redis://user:s3cret@h:port:x"}, "malformed URL"},
		{"braces in prefix", config.Redis{URL: "redis://h:6379", Prefix: "{baton}:"}, "must not contain"},
		{"db with cluster", config.Redis{Addrs: []string{"a:1", "b:1"}, DB: 2}, "only db 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := state.NewRedis(tc.cfg)
			if err == nil {
				_ = r.Close()
				t.Fatal("NewRedis succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "state: redis: ") {
				t.Fatalf("error %q, want it to start with state: redis: and mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error %q leaks the password", err)
			}
		})
	}
}

func TestOpenRedis(t *testing.T) {
	t.Parallel()
	s, err := state.Open(config.Store{Redis: &config.Redis{URL: redistest.Shared(t), Prefix: testPrefix(t, "")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, ok := s.(*state.Redis); !ok {
		t.Fatalf("Open with redis = %T, want *state.Redis", s)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Open(config.Store{Redis: &config.Redis{}}); err == nil {
		t.Fatal("Open with an empty redis section succeeded")
	}
}

// newRedis builds a store that the test closes when it ends.
func newRedis(t testing.TB, cfg config.Redis) *state.Redis {
	t.Helper()
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = config.Duration(5 * time.Second)
	}
	r, err := state.NewRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// testPrefix returns a key prefix unique to this run, and when url is set
// deletes every key under it from that Redis once the test ends.
func testPrefix(t testing.TB, url string) string {
	t.Helper()
	if url == "" {
		return "test:" + rand.Text()[:12] + ":"
	}
	return redistest.Prefix(t, url)
}

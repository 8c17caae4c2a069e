package state

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is put in front of every key when config.Redis.Prefix is
// empty.
const DefaultPrefix = "baton:"

// Redis is the Store shared by several Batons, on Redis 7.0 or later through
// a go-redis UniversalClient. Every operation is a single command, a
// pipeline, a script or a MULTI block, bounded by the configured op timeout
// as well as by its context. After a network error or timeout its outcome is unknown: see
// noRetries for why the client does not replay it.
type Redis struct {
	client redis.UniversalClient
	// hot runs the single commands of the request path (claims, swaps,
	// gets) through go-redis's autopipeliner, which writes the commands of
	// concurrent requests to Redis together: one write and one read on each
	// side for many commands, instead of a round trip each. Nil when the
	// client has none; see do.
	hot       *redis.AutoPipeliner
	inflight  atomic.Int64 // callers of do and doAll
	prefix    string
	opTimeout time.Duration
	renew     *redis.Script
	swap      *redis.Script
	release   *redis.Script
	// markExpiries holds, per mark set, when this process last set its
	// TTL (unix nanoseconds): see markExpiry.
	marksMu      sync.Mutex
	markExpiries map[string]int64
}

// NewRedis builds the client cfg describes: a single node from cfg.URL,
// Sentinel from cfg.Addrs with cfg.MasterName, or Cluster from several
// cfg.Addrs. Username, Password and DB, when set, override the URL's.
// It does not contact Redis; use Ping for that.
func NewRedis(cfg config.Redis) (*Redis, error) {
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("state: redis: prefix %q must not contain { or }: it would override the hash tags in keys", prefix)
	}
	client, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	hot, err := client.AsyncAutoPipeline()
	if err != nil {
		hot = nil // the plain client serves
	}
	return &Redis{
		client:    client,
		hot:       hot,
		prefix:    prefix,
		opTimeout: cfg.OpTimeout.D(),
		renew:     redis.NewScript(renewScript),
		swap:      redis.NewScript(swapScript),
		release:   redis.NewScript(releaseScript),
	}, nil
}

// noRetries turns off go-redis's command retries. None of the store's writes
// is idempotent: a Claim, Swap or Release replayed after a lost reply would
// report failure for what in fact succeeded, and a replayed Append would log
// twice. Failing is the honest answer; callers decide whether to retry.
// Dials are still retried (the command was never sent) and stale pooled
// connections are discarded before use. A Cluster client still follows
// MOVED and ASK within its redirect budget, and go-redis spends that same
// budget replaying after network errors; turning it off would break
// resharding, so on Cluster a replay after a lost reply stays possible.
const noRetries = -1

// resp2 selects the RESP2 protocol: the store uses no RESP3 feature, and
// RESP3's push-notification handling costs go-redis extra reads per command.
const resp2 = 2

func newClient(cfg config.Redis) (redis.UniversalClient, error) {
	if cfg.URL != "" {
		if len(cfg.Addrs) > 0 {
			return nil, errors.New("state: redis: set url or addrs, not both")
		}
		opts, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("state: redis: parsing url: %w", redactURL(err))
		}
		if cfg.Username != "" {
			opts.Username = cfg.Username
		}
		if cfg.Password != "" {
			opts.Password = cfg.Password
		}
		if cfg.DB != 0 {
			opts.DB = cfg.DB
		}
		// Zero leaves what the URL says (dial_timeout=, pool_size=, ...) or
		// go-redis's default.
		if d := cfg.DialTimeout.D(); d > 0 {
			opts.DialTimeout = d
		}
		if d := cfg.OpTimeout.D(); d > 0 {
			opts.ReadTimeout, opts.WriteTimeout = d, d
		}
		if cfg.PoolSize > 0 {
			opts.PoolSize = cfg.PoolSize
		}
		opts.ContextTimeoutEnabled = true
		if opts.Protocol == 0 {
			opts.Protocol = resp2
		}
		if opts.MaxRetries == 0 { // the URL may ask for retries (max_retries=N)
			opts.MaxRetries = noRetries
		}
		return redis.NewClient(opts), nil
	}
	switch {
	case len(cfg.Addrs) == 0:
		return nil, errors.New("state: redis: set url (single node) or addrs (Sentinel or Cluster)")
	case len(cfg.Addrs) > 1 && cfg.MasterName == "" && cfg.DB != 0:
		return nil, fmt.Errorf("state: redis: db %d: Redis Cluster has only db 0", cfg.DB)
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 cfg.Addrs,
		MasterName:            cfg.MasterName,
		Username:              cfg.Username,
		Password:              cfg.Password,
		DB:                    cfg.DB,
		Protocol:              resp2,
		DialTimeout:           cfg.DialTimeout.D(),
		ReadTimeout:           cfg.OpTimeout.D(),
		WriteTimeout:          cfg.OpTimeout.D(),
		PoolSize:              cfg.PoolSize,
		MaxRetries:            noRetries,
		ContextTimeoutEnabled: true,
	}), nil
}

// redactURL drops the text of a URL syntax error, which may quote the
// userinfo and so the password. Other ParseURL errors name only the scheme,
// the database or a query option and are kept.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New("malformed URL (details withheld: they may contain the password)")
	}
	return err
}

// Client returns the underlying client, for callers that need specialised
// commands or scripts. Keys they build must start with Key's prefix.
func (r *Redis) Client() redis.UniversalClient { return r.client }

// Key returns the Redis key the store uses for key: the prefix, then key, so
// that a hash tag in key still selects the Cluster slot.
func (r *Redis) Key(key string) string { return r.prefix + key }

// Ping sends PING.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return wrapRedis("ping", err)
	}
	return nil
}

// Close closes the client and its connections.
func (r *Redis) Close() error {
	if err := r.client.Close(); err != nil {
		return wrapRedis("close", err)
	}
	return nil
}

// do runs one command of the request path through the autopipeliner and
// returns its error. The pipeliner keeps the client's settings (no replays,
// the op timeout on every socket read and write) but not the command's
// context once it is queued: do waits on ctx itself, so a caller that gives
// up, or reaches the op timeout, returns at once with the outcome unknown,
// as with a plain client. After a context error the command is still in
// flight and must not be read.
func (r *Redis) do(ctx context.Context, cmd redis.Cmder) error {
	defer r.inflight.Add(-1)
	if !r.batching() {
		return r.client.Process(ctx, cmd)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.hot.Submit(ctx, cmd).WaitContext(ctx)
}

// batching counts the caller in and tells whether its commands go through
// the autopipeliner: only when another caller's are in flight. A lone
// caller (a quiet sidecar) talks to Redis directly, without the hand-offs
// to and from the pipeliner's goroutines, which would double its latency;
// under load nearly every caller finds company and joins a batch.
func (r *Redis) batching() bool {
	return r.inflight.Add(1) > 1 && r.hot != nil
}

// doAll runs cmds as do does, together: they share the pipeliner's next
// write (one pipeline round trip on the plain client). It returns the first
// error.
func (r *Redis) doAll(ctx context.Context, cmds ...redis.Cmder) error {
	defer r.inflight.Add(-1)
	if !r.batching() {
		_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range cmds {
				_ = p.Process(ctx, c)
			}
			return nil
		})
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	futures := make([]redis.AutoFuture, len(cmds))
	for i, c := range cmds {
		futures[i] = r.hot.Submit(ctx, c)
	}
	var first error
	for _, f := range futures {
		if err := f.WaitContext(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// script runs s with one key through do: EVALSHA, and EVAL when Redis does
// not have the script yet (NOSCRIPT), as redis.Script.Run does. The command
// may be read only when the error is nil or a Redis reply.
func (r *Redis) script(ctx context.Context, s *redis.Script, src, key string, args ...any) (*redis.Cmd, error) {
	call := func(verb, body string) (*redis.Cmd, error) {
		a := make([]any, 0, 4+len(args))
		a = append(a, verb, body, 1, key)
		cmd := redis.NewCmd(ctx, append(a, args...)...)
		return cmd, r.do(ctx, cmd)
	}
	cmd, err := call("evalsha", s.Hash())
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd, err = call("eval", src)
	}
	return cmd, err
}

// op bounds one operation by the op timeout unless ctx already ends sooner.
// go-redis's own socket timeouts do not cover its dial retries and backoff,
// so without this a dead server could hold a request for seconds.
func (r *Redis) op(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.opTimeout <= 0 {
		return ctx, func() {}
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= r.opTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.opTimeout)
}

// wrapRedis names the operation and marks WRONGTYPE replies as ErrWrongKind.
// go-redis errors never carry the password.
func wrapRedis(op string, err error) error {
	if rerr, ok := errors.AsType[redis.Error](err); ok && strings.HasPrefix(rerr.Error(), "WRONGTYPE ") {
		return fmt.Errorf("state: redis: %s: %w (%w)", op, ErrWrongKind, err)
	}
	return fmt.Errorf("state: redis: %s: %w", op, err)
}

// millis converts a ttl to whole milliseconds for PEXPIRE and PX, rounding
// up so that a positive ttl never becomes "no expiry"; 0 means none.
func millis(ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

package state

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The compare scripts compare values as exact bytes (Lua strings are byte
// strings) and take the ttl in milliseconds, 0 meaning no expiry.
const (
	renewScript = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ms = tonumber(ARGV[2])
if ms > 0 then redis.call('PEXPIRE', KEYS[1], ms) else redis.call('PERSIST', KEYS[1]) end
return 1`

	swapScript = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ms = tonumber(ARGV[3])
if ms > 0 then redis.call('SET', KEYS[1], ARGV[2], 'PX', ms) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1`

	releaseScript = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`
)

// Claim is one round trip, SET key val NX PX ttl GET: a nil reply means the
// key was absent and is now ours, any other reply is the current value.
func (r *Redis) Claim(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, []byte, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	args := redis.SetArgs{Mode: "NX", Get: true}
	if ms := millis(ttl); ms > 0 {
		args.TTL = time.Duration(ms) * time.Millisecond
	}
	cur, err := r.client.SetArgs(ctx, r.Key(key), val, args).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return true, nil, nil
	case err != nil:
		return false, nil, wrapRedis("claim", err)
	}
	return false, []byte(cur), nil
}

// Renew runs a script that sets the TTL only if the value equals val.
func (r *Redis) Renew(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	return r.compare(ctx, "renew", r.renew, key, val, millis(ttl))
}

// Swap runs a script that replaces the value only if it equals prev.
func (r *Redis) Swap(ctx context.Context, key string, prev, next []byte, ttl time.Duration) (bool, error) {
	return r.compare(ctx, "swap", r.swap, key, prev, next, millis(ttl))
}

// Release runs a script that deletes key only if its value equals val.
func (r *Redis) Release(ctx context.Context, key string, val []byte) (bool, error) {
	return r.compare(ctx, "release", r.release, key, val)
}

// compare runs one of the compare scripts, which answer 1 when they acted.
func (r *Redis) compare(ctx context.Context, op string, s *redis.Script, key string, args ...any) (bool, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	n, err := s.Run(ctx, r.client, []string{r.Key(key)}, args...).Int64()
	if err != nil {
		return false, wrapRedis(op, err)
	}
	return n == 1, nil
}

// Get returns key's value or ErrNotFound.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	v, err := r.client.Get(ctx, r.Key(key)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrNotFound
	case err != nil:
		return nil, wrapRedis("get", err)
	}
	return v, nil
}

// Set writes key with SET, with PX when ttl > 0.
func (r *Redis) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if err := r.client.Set(ctx, r.Key(key), val, time.Duration(millis(ttl))*time.Millisecond).Err(); err != nil {
		return wrapRedis("set", err)
	}
	return nil
}

// Delete removes key with DEL.
func (r *Redis) Delete(ctx context.Context, key string) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if err := r.client.Del(ctx, r.Key(key)).Err(); err != nil {
		return wrapRedis("delete", err)
	}
	return nil
}

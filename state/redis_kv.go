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
	args := []any{"set", r.Key(key), val, "nx", "get"}
	if ms := millis(ttl); ms > 0 {
		args = append(args, "px", ms)
	}
	cmd := redis.NewStringCmd(ctx, args...)
	switch err := r.do(ctx, cmd); {
	case errors.Is(err, redis.Nil):
		return true, nil, nil
	case err != nil:
		return false, nil, wrapRedis("claim", err)
	}
	cur, _ := cmd.Bytes()
	return false, cur, nil
}

// Renew runs a script that sets the TTL only if the value equals val.
func (r *Redis) Renew(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	return r.compare(ctx, "renew", r.renew, renewScript, key, val, millis(ttl))
}

// Swap runs a script that replaces the value only if it equals prev.
func (r *Redis) Swap(ctx context.Context, key string, prev, next []byte, ttl time.Duration) (bool, error) {
	return r.compare(ctx, "swap", r.swap, swapScript, key, prev, next, millis(ttl))
}

// Release runs a script that deletes key only if its value equals val.
func (r *Redis) Release(ctx context.Context, key string, val []byte) (bool, error) {
	return r.compare(ctx, "release", r.release, releaseScript, key, val)
}

// compare runs one of the compare scripts, which answer 1 when they acted.
func (r *Redis) compare(ctx context.Context, op string, s *redis.Script, src, key string, args ...any) (bool, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	cmd, err := r.script(ctx, s, src, r.Key(key), args...)
	if err != nil {
		return false, wrapRedis(op, err)
	}
	n, err := cmd.Int64()
	if err != nil {
		return false, wrapRedis(op, err)
	}
	return n == 1, nil
}

// Get returns key's value or ErrNotFound.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	cmd := redis.NewStringCmd(ctx, "get", r.Key(key))
	err := r.do(ctx, cmd)
	var v []byte
	if err == nil {
		v, err = cmd.Bytes()
	}
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

// Touch sets key's expiry with PEXPIRE (PERSIST for no expiry), which
// answers whether the key exists.
func (r *Redis) Touch(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	var ok bool
	var err error
	if ms := millis(ttl); ms > 0 {
		ok, err = r.client.PExpire(ctx, r.Key(key), time.Duration(ms)*time.Millisecond).Result()
	} else {
		var n int64
		if n, err = r.client.Exists(ctx, r.Key(key)).Result(); err == nil && n > 0 {
			ok, err = true, r.client.Persist(ctx, r.Key(key)).Err()
		}
	}
	if err != nil {
		return false, wrapRedis("touch", err)
	}
	return ok, nil
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

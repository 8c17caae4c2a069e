package state

import (
	"context"
	"encoding/binary"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A mark set lives in two Redis hashes, key+":m0" (the newer generation) and
// key+":m1" (the older), whose fields are the members as 8 big-endian bytes.
// In Redis Cluster the caller puts a hash tag in key so that both share a
// slot (RENAME needs it); a key without one is wrapped in one whole.

func (r *Redis) markKeys(key string) (cur, prev string) {
	k := r.Key(key)
	if !strings.Contains(k, "{") {
		k = "{" + k + "}"
	}
	return k + ":m0", k + ":m1"
}

func markField(h uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h)
	return string(b[:])
}

// MarkAdd sends HSET, the TTL and HLEN together on the request path's
// autopipeliner (plain commands: a script's own cost is several times
// theirs); when the newer generation has reached max/2 members it is renamed
// over the older.
func (r *Redis) MarkAdd(ctx context.Context, key string, members []uint64, val string, ttl time.Duration, max int) error {
	if len(members) == 0 {
		return nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	cur, prev := r.markKeys(key)
	args := make([]any, 0, 2+2*len(members))
	args = append(args, "hset", cur)
	for _, h := range members {
		args = append(args, markField(h), val)
	}
	expire := redis.NewCmd(ctx, "persist", cur)
	if ms := millis(ttl); ms > 0 {
		expire = redis.NewCmd(ctx, "pexpire", cur, ms)
	}
	n := redis.NewIntCmd(ctx, "hlen", cur)
	if err := r.doAll(ctx, redis.NewIntCmd(ctx, args...), expire, n); err != nil {
		return wrapRedis("mark add", err)
	}
	if half := max / 2; half > 0 && n.Val() >= int64(half) {
		// Concurrent adders may both see the bound; a second RENAME finds
		// no newer generation (ERR no such key), which is harmless.
		if err := r.client.Rename(ctx, cur, prev).Err(); err != nil && err.Error() != "ERR no such key" {
			return wrapRedis("mark rotate", err)
		}
	}
	return nil
}

// MarksMayHold is always true: only a round trip could tell; see Store.
func (r *Redis) MarksMayHold(string) bool { return true }

// MarkLookup pipelines HMGET over both generations: one round trip.
func (r *Redis) MarkLookup(ctx context.Context, key string, members []uint64) ([]string, error) {
	out := make([]string, len(members))
	if len(members) == 0 {
		return out, nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	fields := make([]string, len(members))
	for i, h := range members {
		fields[i] = markField(h)
	}
	kc, kp := r.markKeys(key)
	cur := redis.NewSliceCmd(ctx, append([]any{"hmget", kc}, stringsToAny(fields)...)...)
	prev := redis.NewSliceCmd(ctx, append([]any{"hmget", kp}, stringsToAny(fields)...)...)
	if err := r.doAll(ctx, cur, prev); err != nil && err != redis.Nil {
		return nil, wrapRedis("mark lookup", err)
	}
	for _, gen := range [][]any{prev.Val(), cur.Val()} { // the newer wins
		for i, v := range gen {
			if s, ok := v.(string); ok && i < len(out) {
				out[i] = s
			}
		}
	}
	return out, nil
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

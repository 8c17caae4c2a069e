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

// markAddScript adds ARGV[3..] (field, value pairs) to the newer generation
// KEYS[1], sets its TTL to ARGV[1] milliseconds (0: none), and when it holds
// ARGV[2] members or more (0: no bound) renames it over the older KEYS[2].
// HSET takes the pairs a thousand at a time: Lua's unpack is bounded.
const markAddScript = `
for i = 3, #ARGV, 2000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 1999, #ARGV)))
end
local ms = tonumber(ARGV[1])
if ms > 0 then redis.call('PEXPIRE', KEYS[1], ms) else redis.call('PERSIST', KEYS[1]) end
local half = tonumber(ARGV[2])
if half > 0 and redis.call('HLEN', KEYS[1]) >= half then
  redis.call('RENAME', KEYS[1], KEYS[2])
end
return 1`

// MarkAdd is one script call (markAddScript) on the request path's
// autopipeliner: the add, the TTL and the rotation happen together.
func (r *Redis) MarkAdd(ctx context.Context, key string, members []uint64, val string, ttl time.Duration, max int) error {
	if len(members) == 0 {
		return nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	cur, prev := r.markKeys(key)
	args := make([]any, 0, 4+2*len(members))
	args = append(args, "evalsha", r.markAdd.Hash(), 2, cur, prev, millis(ttl), max/2)
	for _, h := range members {
		args = append(args, markField(h), val)
	}
	cmd := redis.NewCmd(ctx, args...)
	err := r.do(ctx, cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", markAddScript
		cmd = redis.NewCmd(ctx, args...)
		err = r.do(ctx, cmd)
	}
	if err != nil {
		return wrapRedis("mark add", err)
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

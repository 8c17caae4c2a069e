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

// MarkAdd sends HSET and HLEN together on the request path's autopipeliner
// (plain commands: a script's own cost is several times theirs), with the
// set's TTL when it is due (see markExpiry); when the newer generation has
// reached max/2 members it is renamed over the older.
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
	added := redis.NewIntCmd(ctx, args...)
	n := redis.NewIntCmd(ctx, "hlen", cur)
	expire := r.markExpiry(ctx, cur, ttl)
	var err error
	if expire != nil {
		if err = r.doAll(ctx, added, expire, n); err != nil {
			r.forgetMarkExpiry(cur) // it may not have been set
		}
	} else {
		err = r.doAll(ctx, added, n)
	}
	if err != nil {
		return wrapRedis("mark add", err)
	}
	if expire == nil && n.Val() == added.Val() {
		// This HSET made the set (a rotation had emptied the newer
		// generation, or the set had lapsed): it has no TTL yet.
		r.forgetMarkExpiry(cur)
		if err := r.client.Process(ctx, r.markExpiry(ctx, cur, ttl)); err != nil {
			return wrapRedis("mark add", err)
		}
	}
	if half := max / 2; half > 0 && n.Val() >= int64(half) {
		// Concurrent adders may both see the bound; a second RENAME finds
		// no newer generation (ERR no such key), which is harmless.
		if err := r.client.Rename(ctx, cur, prev).Err(); err != nil && err.Error() != "ERR no such key" {
			return wrapRedis("mark rotate", err)
		}
		r.forgetMarkExpiry(cur) // the next add makes it anew
	}
	return nil
}

// markExpiry returns the command that sets the mark set's TTL when this
// process last set it an eighth of ttl ago or more (or never), and nil when
// that is not due. The TTL set is ttl and an eighth, so that members added
// between two refreshes are kept at least ttl; a set whose members were
// last added ttl ago is gone within an eighth of ttl more. With ttl 0 (no
// expiry) the set is made persistent with every add.
func (r *Redis) markExpiry(ctx context.Context, cur string, ttl time.Duration) redis.Cmder {
	if millis(ttl) <= 0 {
		return redis.NewCmd(ctx, "persist", cur)
	}
	now := time.Now().UnixNano()
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	if last, ok := r.markExpiries[cur]; ok && now-last < int64(ttl/8) {
		return nil
	}
	if r.markExpiries == nil {
		r.markExpiries = make(map[string]int64, 1)
	}
	r.markExpiries[cur] = now
	return redis.NewCmd(ctx, "pexpire", cur, millis(ttl+ttl/8))
}

// forgetMarkExpiry makes the next add of the set at cur set its TTL.
func (r *Redis) forgetMarkExpiry(cur string) {
	r.marksMu.Lock()
	delete(r.markExpiries, cur)
	r.marksMu.Unlock()
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

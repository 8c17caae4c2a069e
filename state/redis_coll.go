package state

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Append sends RPUSH and PEXPIRE (PERSIST for no ttl) in one pipeline: one
// write, whose commands Redis runs one after the other (another client's
// command may come between, as between any two appends). No MULTI: its
// MULTI and EXEC would double the commands of every journaled call, to
// guard against a list whose TTL a connection cut between the two left
// unset, which the next append to it sets.
func (r *Redis) Append(ctx context.Context, key string, val []byte, ttl time.Duration) (int64, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	k := r.Key(key)
	pipe := r.client.Pipeline()
	n := pipe.RPush(ctx, k, val)
	expireCmd(ctx, pipe, k, ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, wrapRedis("append", err)
	}
	return n.Val(), nil
}

// AppendCounting sends Append's RPUSH and PEXPIRE and IndexIncr's ZINCRBYs
// and PEXPIRE in one pipeline, as Append sends its own (the two keys may be
// in different slots: on Cluster go-redis sends each node its part, in one
// round trip).
func (r *Redis) AppendCounting(ctx context.Context, key string, val []byte, ttl time.Duration, counts Counts) (int64, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	k, ck := r.Key(key), r.Key(counts.Key)
	pipe := r.client.Pipeline()
	n := pipe.RPush(ctx, k, val)
	expireCmd(ctx, pipe, k, ttl)
	for _, d := range counts.Deltas {
		pipe.ZIncrBy(ctx, ck, d.Score, d.Member)
	}
	expireCmd(ctx, pipe, ck, counts.TTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, wrapRedis("append counting", err)
	}
	return n.Val(), nil
}

// Range reads the log with LRANGE.
func (r *Redis) Range(ctx context.Context, key string, start, stop int64) ([][]byte, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	vals, err := r.client.LRange(ctx, r.Key(key), start, stop).Result()
	if err != nil {
		return nil, wrapRedis("range", err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// IndexAdd sends ZADD and PEXPIRE (PERSIST for no ttl) in one MULTI.
func (r *Redis) IndexAdd(ctx context.Context, key, member string, score float64, ttl time.Duration) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	k := r.Key(key)
	pipe := r.client.TxPipeline()
	pipe.ZAdd(ctx, k, redis.Z{Score: score, Member: member})
	expireCmd(ctx, pipe, k, ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return wrapRedis("index add", err)
	}
	return nil
}

// IndexIncr sends a ZINCRBY per delta and PEXPIRE (PERSIST for no ttl)
// in one pipeline: each ZINCRBY is atomic, and counters need no MULTI.
func (r *Redis) IndexIncr(ctx context.Context, key string, deltas []Scored, ttl time.Duration) ([]float64, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	k := r.Key(key)
	pipe := r.client.Pipeline()
	cmds := make([]*redis.FloatCmd, len(deltas))
	for i, d := range deltas {
		cmds[i] = pipe.ZIncrBy(ctx, k, d.Score, d.Member)
	}
	expireCmd(ctx, pipe, k, ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrapRedis("index incr", err)
	}
	out := make([]float64, len(deltas))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// IndexRange reads the index with ZRANGE key min max BYSCORE LIMIT offset
// count WITHSCORES; Redis orders equal scores by member.
func (r *Redis) IndexRange(ctx context.Context, key string, min, max float64, offset, count int64) ([]Scored, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if count <= 0 {
		count = -1 // LIMIT's "all the rest"
	}
	zs, err := r.client.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key:     r.Key(key),
		Start:   min,
		Stop:    max,
		ByScore: true,
		Offset:  offset,
		Count:   count,
	}).Result()
	if err != nil {
		return nil, wrapRedis("index range", err)
	}
	out := make([]Scored, len(zs))
	for i, z := range zs {
		m, _ := z.Member.(string)
		out[i] = Scored{Member: m, Score: z.Score}
	}
	return out, nil
}

// IndexRemove removes member with ZREM.
func (r *Redis) IndexRemove(ctx context.Context, key, member string) error {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if err := r.client.ZRem(ctx, r.Key(key), member).Err(); err != nil {
		return wrapRedis("index remove", err)
	}
	return nil
}

// IndexCount counts members with ZCARD.
func (r *Redis) IndexCount(ctx context.Context, key string) (int64, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	n, err := r.client.ZCard(ctx, r.Key(key)).Result()
	if err != nil {
		return 0, wrapRedis("index count", err)
	}
	return n, nil
}

// expireCmd queues the command that gives k its ttl: PEXPIRE, or PERSIST
// when ttl <= 0 means no expiry.
func expireCmd(ctx context.Context, pipe redis.Pipeliner, k string, ttl time.Duration) {
	if ms := millis(ttl); ms > 0 {
		pipe.PExpire(ctx, k, time.Duration(ms)*time.Millisecond)
		return
	}
	pipe.Persist(ctx, k)
}

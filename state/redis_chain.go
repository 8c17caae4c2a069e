package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// linkScript appends ARGV[3] to KEYS[1] only if the tail at KEYS[2] equals
// ARGV[1], then sets the tail to ARGV[2] and KEYS[3..] to ARGV[5..]; ARGV[4]
// is the TTL in milliseconds (0: none). It returns {1} or {0, tail}.
const linkScript = `
local cur = redis.call('GET', KEYS[2]) or ''
if cur ~= ARGV[1] then return {0, cur} end
local ms = tonumber(ARGV[4])
redis.call('RPUSH', KEYS[1], ARGV[3])
if ms > 0 then
  redis.call('PEXPIRE', KEYS[1], ms)
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ms)
else
  redis.call('SET', KEYS[2], ARGV[2])
end
for i = 3, #KEYS do
  if ms > 0 then redis.call('SET', KEYS[i], ARGV[i + 2], 'PX', ms) else redis.call('SET', KEYS[i], ARGV[i + 2]) end
end
return {1}`

// linkManyScript is linkScript for several links in one call, applied in
// order, each as linkScript would: the script's own cost (a good part of a
// link's) is paid once per batch. KEYS are each link's log, tail and set
// keys in turn; ARGV[1] is the number of links, then per link: its number of
// sets, prev, tail, entry, ttl in milliseconds, and its set values. It
// returns one reply per link, as linkScript's.
const linkManyScript = `
local out = {}
local k, a = 1, 2
for l = 1, tonumber(ARGV[1]) do
  local nsets, ms = tonumber(ARGV[a]), tonumber(ARGV[a + 4])
  local cur = redis.call('GET', KEYS[k + 1]) or ''
  if cur ~= ARGV[a + 1] then
    out[l] = {0, cur}
  else
    redis.call('RPUSH', KEYS[k], ARGV[a + 3])
    if ms > 0 then
      redis.call('PEXPIRE', KEYS[k], ms)
      redis.call('SET', KEYS[k + 1], ARGV[a + 2], 'PX', ms)
    else
      redis.call('SET', KEYS[k + 1], ARGV[a + 2])
    end
    for i = 1, nsets do
      if ms > 0 then
        redis.call('SET', KEYS[k + 1 + i], ARGV[a + 4 + i], 'PX', ms)
      else
        redis.call('SET', KEYS[k + 1 + i], ARGV[a + 4 + i])
      end
    end
    out[l] = {1}
  end
  k, a = k + 2 + nsets, a + 5 + nsets
end
return out`

// AppendChained writes the links in one round trip. On a single node or
// behind Sentinel it is one call of linkManyScript; on Cluster, where one
// script may touch only one hash slot (a trace's), it is one linkScript per
// link in a pipeline, which go-redis splits by node.
func (r *Redis) AppendChained(ctx context.Context, links []Link) ([]LinkResult, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	if _, cluster := r.client.(*redis.ClusterClient); !cluster && len(links) > 1 {
		return r.appendMany(ctx, links)
	}
	// Load the script once so that the pipeline can use EVALSHA; a NOSCRIPT
	// reply (after a restart or SCRIPT FLUSH) is retried below with EVAL.
	cmds := make([]*redis.Cmd, len(links))
	run := func(useEval bool) error {
		_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, l := range links {
				keys := make([]string, 0, 2+len(l.Sets))
				keys = append(keys, r.Key(l.Log), r.Key(tailKey(l.Log)))
				args := make([]any, 0, 4+len(l.Sets))
				args = append(args, l.Prev, l.Tail, l.Entry, strconv.FormatInt(millis(l.TTL), 10))
				for _, kv := range l.Sets {
					keys = append(keys, r.Key(kv.Key))
					args = append(args, kv.Val)
				}
				if useEval {
					cmds[i] = r.link.Eval(ctx, p, keys, args...)
				} else {
					cmds[i] = r.link.EvalSha(ctx, p, keys, args...)
				}
			}
			return nil
		})
		return err
	}
	err := run(false)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = run(true)
	}
	if err != nil && !isReplyError(cmds) {
		return nil, wrapRedis("append chained", err)
	}
	out := make([]LinkResult, len(links))
	for i, c := range cmds {
		v, err := c.Slice()
		switch {
		case err != nil:
			out[i].Err = wrapRedis("append chained", err)
		case len(v) == 1:
			out[i] = LinkResult{OK: true, Tail: links[i].Tail}
		case len(v) == 2:
			tail, _ := v[1].(string)
			out[i] = LinkResult{Tail: tail}
		default:
			out[i].Err = fmt.Errorf("state: redis: append chained: unexpected reply %v", v)
		}
	}
	return out, nil
}

// appendMany runs linkManyScript over links.
func (r *Redis) appendMany(ctx context.Context, links []Link) ([]LinkResult, error) {
	nkeys := 0
	for _, l := range links {
		nkeys += 2 + len(l.Sets)
	}
	keys := make([]string, 0, nkeys)
	args := make([]any, 0, 1+nkeys+3*len(links))
	args = append(args, len(links))
	for _, l := range links {
		keys = append(keys, r.Key(l.Log), r.Key(tailKey(l.Log)))
		args = append(args, len(l.Sets), l.Prev, l.Tail, l.Entry, millis(l.TTL))
		for _, kv := range l.Sets {
			keys = append(keys, r.Key(kv.Key))
			args = append(args, kv.Val)
		}
	}
	v, err := r.linkMany.Run(ctx, r.client, keys, args...).Slice()
	if err != nil {
		return nil, wrapRedis("append chained", err)
	}
	if len(v) != len(links) {
		return nil, fmt.Errorf("state: redis: append chained: %d replies for %d links", len(v), len(links))
	}
	out := make([]LinkResult, len(links))
	for i, reply := range v {
		res, _ := reply.([]any)
		switch {
		case len(res) == 1:
			out[i] = LinkResult{OK: true, Tail: links[i].Tail}
		case len(res) == 2:
			tail, _ := res[1].(string)
			out[i] = LinkResult{Tail: tail}
		default:
			out[i].Err = fmt.Errorf("state: redis: append chained: unexpected reply %v", reply)
		}
	}
	return out, nil
}

// isReplyError reports whether every failed command failed with a Redis
// error reply (per-link) rather than the connection (whole pipeline).
func isReplyError(cmds []*redis.Cmd) bool {
	for _, c := range cmds {
		if c == nil {
			return false
		}
		if err := c.Err(); err != nil {
			if _, ok := err.(redis.Error); !ok {
				return false
			}
		}
	}
	return true
}

// ClaimMany sends every claim (SET NX PX GET) in one pipeline: one round
// trip for the lot.
func (r *Redis) ClaimMany(ctx context.Context, ops []ClaimOp) ([]ClaimResult, error) {
	if len(ops) == 1 { // the common case: one command, autopipelined
		ok, cur, err := r.Claim(ctx, ops[0].Key, ops[0].Val, ops[0].TTL)
		if err != nil {
			return nil, err
		}
		return []ClaimResult{{OK: ok, Cur: cur}}, nil
	}
	ctx, cancel := r.op(ctx)
	defer cancel()
	cmds := make([]*redis.StatusCmd, len(ops))
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, op := range ops {
			args := redis.SetArgs{Mode: "NX", Get: true}
			if ms := millis(op.TTL); ms > 0 {
				args.TTL = time.Duration(ms) * time.Millisecond
			}
			cmds[i] = p.SetArgs(ctx, r.Key(op.Key), op.Val, args)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrapRedis("claim many", err)
	}
	out := make([]ClaimResult, len(ops))
	for i, c := range cmds {
		cur, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
			out[i].OK = true
		case err != nil:
			return nil, wrapRedis("claim many", err)
		default:
			out[i].Cur = []byte(cur)
		}
	}
	return out, nil
}

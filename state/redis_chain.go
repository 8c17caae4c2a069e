package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A chain in Redis is one hash at its key: field "e:N" holds entry N, "t:N"
// the tail after it and "a:NAME" an attached value. A link is a few plain
// commands in a MULTI block: HSETNX e:N, HSETNX t:N, HSET of what it
// attaches, PEXPIRE. HSETNX of e:N is the compare-and-set: whoever claims
// entry N first extends the chain, and as the block runs whole, the tail of
// a link that lost the race is refused with its entry. Plain commands cost
// Redis a fraction of what a script calling the same commands costs, and a
// chain is one key: one hash slot, one TTL.

// tailProbe is how many tails one read looks at to find a chain's end.
const tailProbe = 16

// AppendChained writes the links in one MULTI block (on Cluster, go-redis
// sends one block per hash slot, all in one round trip). A chain's second
// link in a batch goes in a block of its own after the first has landed,
// and so on. A refused link costs one more round trip, to learn the tail it
// should have followed.
func (r *Redis) AppendChained(ctx context.Context, links []Link) ([]LinkResult, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	out := make([]LinkResult, len(links))
	var refused map[string]string // chain → its tail, once a link of it is refused
	pending := make([]int, len(links))
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		// This round: the first pending link of each chain; the rest wait.
		var now, later []int
		if len(pending) == 1 {
			now = pending
		} else {
			seen := make(map[string]bool, len(pending))
			for _, i := range pending {
				if seen[links[i].Log] {
					later = append(later, i)
					continue
				}
				seen[links[i].Log] = true
				now = append(now, i)
			}
		}
		lost, err := r.linkRound(ctx, links, now, out)
		if err != nil {
			return nil, err
		}
		if len(lost) > 0 {
			tails, err := r.chainTails(ctx, links, lost)
			if err != nil {
				return nil, err
			}
			if refused == nil {
				refused = make(map[string]string, len(lost))
			}
			for j, i := range lost {
				if tails[j].err != nil {
					out[i].Err = tails[j].err
					continue
				}
				out[i].Tail = tails[j].tail
				refused[links[i].Log] = tails[j].tail
			}
		}
		pending = pending[:0]
		for _, i := range later {
			if tail, ok := refused[links[i].Log]; ok {
				out[i] = LinkResult{Tail: tail} // follows a refused link
				continue
			}
			pending = append(pending, i)
		}
	}
	return out, nil
}

// linkRound sends the links at idx, one per chain, in one MULTI block,
// fills out for those that landed or failed, and returns those that found
// their entry taken. On Cluster, where a block may touch one hash slot only,
// each link is a block of its own, at most clusterBlocks at a time.
func (r *Redis) linkRound(ctx context.Context, links []Link, idx []int, out []LinkResult) (lost []int, err error) {
	claims := make([]*redis.BoolCmd, len(idx))
	queue := func(p redis.Pipeliner, j int) {
		l := &links[idx[j]]
		key := r.Key(l.Log)
		claims[j] = p.HSetNX(ctx, key, entryField(l.Seq), l.Entry)
		p.HSetNX(ctx, key, tailField(l.Seq), l.Tail)
		if len(l.Attach) > 0 {
			fv := make([]any, 0, 2*len(l.Attach))
			for _, kv := range l.Attach {
				fv = append(fv, attachedField(kv.Key), kv.Val)
			}
			p.HSet(ctx, key, fv...)
		}
		if l.TTL > 0 {
			p.PExpire(ctx, key, time.Duration(millis(l.TTL))*time.Millisecond)
		}
	}
	if _, cluster := r.client.(*redis.ClusterClient); cluster && len(idx) > 1 {
		err = r.clusterBlocks(ctx, len(idx), queue)
	} else {
		_, err = r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for j := range idx {
				queue(p, j)
			}
			return nil
		})
	}
	if err != nil {
		if _, reply := errors.AsType[redis.Error](err); !reply {
			return nil, wrapRedis("append chained", err)
		}
	}
	for j, i := range idx {
		ok, err := claims[j].Result()
		switch {
		case err != nil:
			out[i].Err = wrapRedis("append chained", err)
		case ok:
			out[i] = LinkResult{OK: true, Tail: links[i].Tail}
		default:
			lost = append(lost, i)
		}
	}
	return lost, nil
}

// clusterBlocks is how many MULTI blocks a Cluster batch has in flight.
const clusterBlocks = 8

// clusterBlocks runs n blocks, each queued by queue, concurrently. It
// returns the first error that is not a Redis reply: the replies are read
// per link.
func (r *Redis) clusterBlocks(ctx context.Context, n int, queue func(redis.Pipeliner, int)) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, clusterBlocks)
	for j := 0; j < n; j++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
				queue(p, j)
				return nil
			})
			if _, reply := errors.AsType[redis.Error](err); err != nil && !reply {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

type learnedTail struct {
	tail string
	err  error
}

// chainTails finds the current tail of each chain whose link at idx found
// its entry taken: the tail of its last entry, at or after the taken one.
// Entries are consecutive, so one HMGET of the next tailProbe tails finds
// it unless the chain grew further meanwhile.
func (r *Redis) chainTails(ctx context.Context, links []Link, idx []int) ([]learnedTail, error) {
	out := make([]learnedTail, len(idx))
	from := make([]int64, len(idx))
	todo := make([]int, len(idx))
	for j, i := range idx {
		from[j], todo[j] = links[i].Seq, j
	}
	for len(todo) > 0 {
		cmds := make([]*redis.SliceCmd, len(todo))
		_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for n, j := range todo {
				fields := make([]string, tailProbe)
				for k := range fields {
					fields[k] = tailField(from[j] + int64(k))
				}
				cmds[n] = p.HMGet(ctx, r.Key(links[idx[j]].Log), fields...)
			}
			return nil
		})
		if err != nil {
			return nil, wrapRedis("append chained: reading a tail", err)
		}
		next := todo[:0]
		for n, j := range todo {
			vals := cmds[n].Val()
			last := -1
			for k, v := range vals {
				if v == nil {
					break
				}
				last = k
			}
			switch {
			case last < 0:
				out[j].err = fmt.Errorf("state: redis: append chained: chain %s has entry %d without its tail: it was edited outside Baton, or Redis refused part of a link",
					links[idx[j]].Log, from[j])
			case last == len(vals)-1:
				from[j] += int64(len(vals)) - 1 // the chain goes on: look further
				next = append(next, j)
			default:
				out[j].tail, _ = vals[last].(string)
			}
		}
		todo = next
	}
	return out, nil
}

// ReadChain reads the hash's field names, then its entries and last tail.
func (r *Redis) ReadChain(ctx context.Context, log string) (Chain, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	key := r.Key(log)
	names, err := r.client.HKeys(ctx, key).Result()
	if err != nil {
		return Chain{}, wrapRedis("read chain", err)
	}
	var last, lastTail int64
	for _, f := range names {
		kind, n, ok := strings.Cut(f, ":")
		if !ok {
			continue
		}
		seq, err := strconv.ParseInt(n, 10, 64)
		if err != nil || seq < 1 {
			continue
		}
		switch kind {
		case "e":
			last = max(last, seq)
		case "t":
			lastTail = max(lastTail, seq)
		}
	}
	if last == 0 && lastTail == 0 {
		return Chain{Entries: [][]byte{}}, nil
	}
	fields := make([]string, 0, last+1)
	for seq := int64(1); seq <= last; seq++ {
		fields = append(fields, entryField(seq))
	}
	fields = append(fields, tailField(lastTail))
	vals, err := r.client.HMGet(ctx, key, fields...).Result()
	if err != nil {
		return Chain{}, wrapRedis("read chain", err)
	}
	c := Chain{Entries: make([][]byte, 0, last)}
	for _, v := range vals[:last] {
		if s, ok := v.(string); ok { // a missing entry is left out: Verify sees the gap
			c.Entries = append(c.Entries, []byte(s))
		}
	}
	c.Tail, _ = vals[last].(string)
	return c, nil
}

// Attached reads one attached value.
func (r *Redis) Attached(ctx context.Context, log, name string) ([]byte, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	v, err := r.client.HGet(ctx, r.Key(log), attachedField(name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, wrapRedis("attached", err)
	}
	return v, nil
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

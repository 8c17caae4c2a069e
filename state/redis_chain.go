package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A chain in Redis is one hash at its key: field "e:N" holds entry N, "m:N"
// marks that entry N was written, and "a:NAME" holds an attached value. A
// link is plain commands in a pipeline, with no MULTI block and no script:
// HSETNX of e:N, which is the compare-and-set (whoever claims entry N first
// extends the chain, and entries are never replaced), and one HSET of the
// marker with what the link attaches. A batch refreshes each chain's TTL
// with one PEXPIRE. The marker's value is empty whoever writes it, so a
// writer that lost the race for e:N writes the same marker as the winner;
// it is there so that an entry deleted from the end of a chain leaves its
// number behind. The first entry of a chain with nothing attached needs no
// marker: deleting it deletes the key, which no marker would survive
// either, so the common one-entry chain (a receipt) costs two commands.
// Tails are not stored: a tail is ChainTail of its entry, so
// the store reads the entry and hashes it when it needs one, which is only
// when a link lost a race or a chain is read whole.

// tailProbe is how many entries one read looks at to find a chain's end.
const tailProbe = 16

// AppendChained writes the links in one pipeline (on Cluster go-redis splits
// it by node, all in one round trip). A chain's second link in a batch goes
// in a pipeline of its own after the first has landed, and so on. A refused
// link costs one more round trip, to learn the tail it should have followed.
func (r *Redis) AppendChained(ctx context.Context, links []Link) ([]LinkResult, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	out := make([]LinkResult, len(links))
	var refused map[string]string // chain → its tail, once a link of it is refused
	pending := make([]int, len(links))
	for i := range pending {
		pending[i] = i
	}
	ttls := chainTTLs(links)
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
		lost, err := r.linkRound(ctx, links, now, ttls, out)
		if err != nil {
			return nil, err
		}
		ttls = batchTTLs{} // every chain of the batch had its first link in the first round
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

// linkRound sends the links at idx, one per chain, in one pipeline with the
// PEXPIRE of each chain in ttls, fills out for those that landed or failed,
// and returns those that found their entry taken. The commands' arguments
// share one backing array, and the field names of the first entries are
// boxed once for all (see fieldArgs): records are written on every handoff.
func (r *Redis) linkRound(ctx context.Context, links []Link, idx []int, ttls batchTTLs, out []LinkResult) (lost []int, err error) {
	claims := make([]*redis.Cmd, len(idx))
	n := 0
	for _, i := range idx {
		n += 4 + 4 + 2*len(links[i].Attach) + 3 // hsetnx, hset, pexpire: no append grows args
	}
	args := make([]any, 0, n)
	since := func(start int) []any { return args[start:len(args):len(args)] }
	var ttlArgs map[time.Duration]any
	_, err = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range idx {
			l := &links[i]
			key := any(r.Key(l.Log))
			start := len(args)
			args = append(args, "hsetnx", key, fieldArg(entryFieldArgs, entryField, l.Seq), l.Entry)
			claims[j] = p.Do(ctx, since(start)...)
			if l.Seq > 1 || len(l.Attach) > 0 {
				start = len(args)
				args = append(args, "hset", key, fieldArg(writtenFieldArgs, writtenField, l.Seq), "")
				for _, kv := range l.Attach {
					args = append(args, attachedField(kv.Key), kv.Val)
				}
				p.Do(ctx, since(start)...)
			}
			if ttl, ok := ttls.of(l.Log); ok {
				ms, ok := ttlArgs[ttl]
				if !ok {
					if ttlArgs == nil {
						ttlArgs = make(map[time.Duration]any, 1)
					}
					ms = millis(ttl)
					ttlArgs[ttl] = ms
				}
				start = len(args)
				args = append(args, "pexpire", key, ms)
				p.Do(ctx, since(start)...)
			}
		}
		return nil
	})
	if err != nil {
		if _, reply := errors.AsType[redis.Error](err); !reply {
			return nil, wrapRedis("append chained", err)
		}
	}
	for j, i := range idx {
		ok, err := claims[j].Bool()
		switch {
		case err != nil:
			out[i].Err = wrapRedis("append chained", err)
		case ok:
			out[i] = LinkResult{OK: true}
		default:
			lost = append(lost, i)
		}
	}
	return lost, nil
}

// entryFieldArgs and writtenFieldArgs are the field names of the first
// entries, boxed once.
var entryFieldArgs, writtenFieldArgs = boxedFields(entryField), boxedFields(writtenField)

func boxedFields(name func(int64) string) []any {
	out := make([]any, 64)
	for i := range out {
		out[i] = name(int64(i))
	}
	return out
}

// fieldArg is the field name of entry seq as a command argument.
func fieldArg(boxed []any, name func(int64) string, seq int64) any {
	if seq >= 0 && seq < int64(len(boxed)) {
		return boxed[seq]
	}
	return name(seq)
}

type learnedTail struct {
	tail string
	err  error
}

// chainTails finds the current tail of each chain whose link at idx found
// its entry taken: the tail of its last entry, at or after the taken one.
// Entries are consecutive, so one HMGET of the next tailProbe entries finds
// it unless the chain grew further meanwhile.
func (r *Redis) chainTails(ctx context.Context, links []Link, idx []int) ([]learnedTail, error) {
	logs := make([]string, len(idx))
	from := make([]int64, len(idx))
	for j, i := range idx {
		logs[j], from[j] = links[i].Log, links[i].Seq
	}
	tails, err := r.probeTails(ctx, logs, from)
	if err != nil {
		return nil, wrapRedis("append chained: reading a tail", err)
	}
	out := make([]learnedTail, len(idx))
	for j, i := range idx {
		if out[j].tail = tails[j]; tails[j] == "" {
			out[j].err = fmt.Errorf("state: redis: append chained: chain %s refused entry %d, which is gone: the chain expired meanwhile, or was edited outside Baton",
				links[i].Log, links[i].Seq)
		}
	}
	return out, nil
}

// ChainTails finds each chain's last entry from the first (probeTails): one
// round trip in all for chains of fewer than tailProbe entries, as a trace's
// mostly are.
func (r *Redis) ChainTails(ctx context.Context, logs []string) ([]string, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	from := make([]int64, len(logs))
	for i := range from {
		from[i] = 1
	}
	tails, err := r.probeTails(ctx, logs, from)
	if err != nil {
		return nil, wrapRedis("chain tails", err)
	}
	return tails, nil
}

// probeTails returns the tail of each chain at logs, reading its entries
// tailProbe at a time from entry from[i] on (from is used up), all chains'
// reads in one pipeline a round: "" for a chain with no entry at its from
// (none at all, or one that shrank meanwhile).
func (r *Redis) probeTails(ctx context.Context, logs []string, from []int64) ([]string, error) {
	out := make([]string, len(logs))
	todo := make([]int, len(logs))
	for i := range todo {
		todo[i] = i
	}
	for len(todo) > 0 {
		cmds := make([]*redis.SliceCmd, len(todo))
		_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for n, i := range todo {
				fields := make([]string, tailProbe)
				for k := range fields {
					fields[k] = entryField(from[i] + int64(k))
				}
				cmds[n] = p.HMGet(ctx, r.Key(logs[i]), fields...)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		next := todo[:0]
		for n, i := range todo {
			vals := cmds[n].Val()
			last := -1
			for k, v := range vals {
				if v == nil {
					break
				}
				last = k
			}
			switch {
			case last < 0: // no entry at from: no tail to follow
			case last == len(vals)-1:
				from[i] += int64(len(vals)) - 1 // the chain goes on: look further
				next = append(next, i)
			default:
				entry, _ := vals[last].(string)
				out[i] = ChainTail(from[i]+int64(last), []byte(entry))
			}
		}
		todo = next
	}
	return out, nil
}

// ReadChain reads the hash's field names, then its entries. The tail is the
// ChainTail of the last entry, or only the number of the last marker when
// that entry is gone.
func (r *Redis) ReadChain(ctx context.Context, log string) (Chain, error) {
	ctx, cancel := r.op(ctx)
	defer cancel()
	key := r.Key(log)
	names, err := r.client.HKeys(ctx, key).Result()
	if err != nil {
		return Chain{}, wrapRedis("read chain", err)
	}
	var last, lastMark int64
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
		case "m":
			lastMark = max(lastMark, seq)
		}
	}
	if last == 0 && lastMark == 0 {
		return Chain{Entries: [][]byte{}}, nil
	}
	c := Chain{Entries: make([][]byte, 0, last)}
	var lastEntry []byte
	if last > 0 {
		fields := make([]string, 0, last)
		for seq := int64(1); seq <= last; seq++ {
			fields = append(fields, entryField(seq))
		}
		vals, err := r.client.HMGet(ctx, key, fields...).Result()
		if err != nil {
			return Chain{}, wrapRedis("read chain", err)
		}
		for seq, v := range vals {
			if s, ok := v.(string); ok { // a missing entry is left out: Verify sees the gap
				c.Entries = append(c.Entries, []byte(s))
				if int64(seq+1) == last {
					lastEntry = c.Entries[len(c.Entries)-1]
				}
			}
		}
	}
	if lastMark > last || lastEntry == nil {
		c.Tail = strconv.FormatInt(max(last, lastMark), 10) + ":" // its entry was deleted
	} else {
		c.Tail = ChainTail(last, lastEntry)
	}
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

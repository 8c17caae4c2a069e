package state

import (
	"bytes"
	"context"
	"time"
)

// AppendChained applies each link atomically, under the store's lock, and
// gives each chain the longest TTL its links ask for, as Redis does. A link
// after a refused one of its chain is refused with the same tail.
func (m *Memory) AppendChained(_ context.Context, links []Link) ([]LinkResult, error) {
	out := make([]LinkResult, len(links))
	ttls := chainTTLs(links)
	var refused map[string]string
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, l := range links {
		if tail, ok := refused[l.Log]; ok {
			out[i] = LinkResult{Tail: tail}
			continue
		}
		out[i] = m.link(l, ttls[l.Log])
		if r := out[i]; !r.OK && r.Err == nil {
			if refused == nil {
				refused = map[string]string{}
			}
			refused[l.Log] = r.Tail
		}
	}
	return out, nil
}

// link applies one link. A chain is one entry (its log and attached values),
// so that it expires and is evicted whole, as in Redis. Entry Seq is free
// when the chain has Seq-1 entries.
func (m *Memory) link(l Link, ttl time.Duration) LinkResult {
	now := m.now()
	e := m.live(l.Log, now)
	if e != nil && e.kind != kindChain {
		return LinkResult{Err: ErrWrongKind}
	}
	var n int64
	if e != nil {
		n = int64(len(e.log))
	}
	follows := l.Seq == n+1
	var dWeight, dSize int64
	if e == nil {
		dWeight, dSize = 1, int64(len(l.Log))
	}
	for _, kv := range l.Attach {
		if e != nil {
			if old, ok := e.attached[kv.Key]; ok {
				dSize += int64(len(kv.Val) - len(old))
				continue
			}
		}
		dWeight, dSize = dWeight+1, dSize+int64(len(kv.Key)+len(kv.Val))
	}
	if follows {
		dWeight, dSize = dWeight+1, dSize+int64(len(l.Entry))
	}
	if err := m.makeRoom(now, e, dWeight, dSize); err != nil {
		return LinkResult{Err: err}
	}
	if e == nil {
		e = m.insert(l.Log, kindChain)
	}
	for _, kv := range l.Attach {
		if e.attached == nil {
			e.attached = make(map[string][]byte, len(l.Attach))
		}
		e.attached[kv.Key] = kv.Val
	}
	if follows {
		e.log = append(e.log, l.Entry)
	}
	m.resize(e, dWeight, dSize)
	m.written(e)
	if ttl > 0 {
		m.expireAt(e, deadline(now, ttl))
	}
	if !follows {
		return LinkResult{Tail: chainTail(e.log)}
	}
	return LinkResult{OK: true}
}

// chainTail is the tail of a chain whose entries are log.
func chainTail(log [][]byte) string {
	if len(log) == 0 {
		return ""
	}
	return ChainTail(int64(len(log)), log[len(log)-1])
}

// ReadChain copies the chain's entries and derives its tail.
func (m *Memory) ReadChain(_ context.Context, log string) (Chain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(log, m.now())
	if e == nil {
		return Chain{Entries: [][]byte{}}, nil
	}
	if e.kind != kindChain {
		return Chain{}, ErrWrongKind
	}
	c := Chain{Entries: make([][]byte, len(e.log)), Tail: chainTail(e.log)}
	for i, v := range e.log {
		c.Entries[i] = bytes.Clone(v)
	}
	return c, nil
}

// Attached returns a copy of the value attached under name.
func (m *Memory) Attached(_ context.Context, log, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(log, m.now())
	if e == nil {
		return nil, ErrNotFound
	}
	if e.kind != kindChain {
		return nil, ErrWrongKind
	}
	v, ok := e.attached[name]
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v), nil
}

// ClaimMany applies each claim as Claim does, under one lock.
func (m *Memory) ClaimMany(_ context.Context, ops []ClaimOp) ([]ClaimResult, error) {
	out := make([]ClaimResult, len(ops))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, op := range ops {
		now := m.now()
		if e := m.live(op.Key, now); e != nil {
			if e.kind != kindValue {
				return nil, ErrWrongKind
			}
			out[i].Cur = bytes.Clone(e.val)
			continue
		}
		if err := m.writeValue(now, op.Key, nil, op.Val, op.TTL, true); err != nil {
			return nil, err
		}
		out[i].OK = true
	}
	return out, nil
}

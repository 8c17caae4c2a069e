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
		ttl, _ := ttls.of(l.Log)
		out[i] = m.link(l, ttl)
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
	e, err := m.extend(now, e, l, follows, ttl)
	if err != nil {
		return LinkResult{Err: err}
	}
	if !follows {
		return LinkResult{Tail: e.tail()}
	}
	return LinkResult{OK: true}
}

// Extend appends to the chain at log the entry build makes on the chain's
// tail ("" for an empty chain), with the values build attaches, and gives
// the chain ttl (0: it keeps the one it had). It is one link that cannot
// lose a race: build runs outside the store's lock, on the tail as it was,
// and when another writer extended the chain meanwhile, it runs again on
// the new tail. The lock is held only to read the tail's entry and to
// append, not while the entry is encoded and the tail hashed, which writers
// of other chains would wait for. An in-process writer (the record book)
// uses it instead of AppendChained, so that it needs to remember no tails.
// build must not call the store, and may run more than once.
func (m *Memory) Extend(log string, ttl time.Duration, build func(tail string) (entry []byte, attach []KV)) error {
	for {
		m.mu.Lock()
		e := m.live(log, m.now())
		if e != nil && e.kind != kindChain {
			m.mu.Unlock()
			return ErrWrongKind
		}
		var n int
		var last []byte
		if e != nil && len(e.log) > 0 {
			n, last = len(e.log), e.log[len(e.log)-1]
		}
		m.mu.Unlock()

		tail := "" // entries are never changed once appended: last may be read unlocked
		if n > 0 {
			tail = ChainTail(int64(n), last)
		}
		entry, attach := build(tail)

		m.mu.Lock()
		now := m.now()
		cur := m.live(log, now)
		if cur != e || (cur != nil && len(cur.log) != n) {
			m.mu.Unlock()
			continue // extended, evicted or expired meanwhile: build on what is there now
		}
		_, err := m.extend(now, cur, Link{Log: log, Seq: int64(n) + 1, Entry: entry, Attach: attach}, true, ttl)
		m.mu.Unlock()
		return err
	}
}

// extend writes l's attached values to the chain e (nil: not there yet),
// and its entry when it follows, within the store's bounds, and returns the
// chain.
func (m *Memory) extend(now int64, e *entry, l Link, follows bool, ttl time.Duration) (*entry, error) {
	var dWeight, dSize int64
	if e == nil {
		dWeight, dSize = 1, int64(len(l.Log))
	}
	for _, kv := range l.Attach {
		if e != nil {
			if old, ok := e.attached.get(kv.Key); ok {
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
		return e, err
	}
	if e == nil {
		e = m.insert(l.Log, kindChain)
	}
	for _, kv := range l.Attach {
		e.attached.set(kv.Key, kv.Val)
	}
	if follows {
		if e.log == nil {
			// Room for two from the start: a chain's first entry is soon
			// followed by another (a handoff record by its outcome).
			e.log = make([][]byte, 0, 2)
		}
		e.log = append(e.log, l.Entry)
	}
	m.resize(e, dWeight, dSize)
	m.written(e)
	if ttl > 0 {
		m.expireAt(e, deadline(now, ttl))
	}
	return e, nil
}

// tail is the tail of the chain e ("" for none).
func (e *entry) tail() string {
	if e == nil {
		return ""
	}
	return chainTail(e.log)
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

// ChainTails derives each chain's tail from its last entry.
func (m *Memory) ChainTails(_ context.Context, logs []string) ([]string, error) {
	out := make([]string, len(logs))
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for i, log := range logs {
		e := m.live(log, now)
		if e == nil {
			continue
		}
		if e.kind != kindChain {
			return nil, ErrWrongKind
		}
		out[i] = chainTail(e.log)
	}
	return out, nil
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
	v, ok := e.attached.get(name)
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

// attachments are a chain's attached values. A chain usually has one or
// two (a checkpoint per delegation), found by a scan; past attachScan of
// them an index finds them, so a long trace does not make links quadratic.
type attachments struct {
	kvs []KV
	at  map[string]int // index into kvs, kept once len(kvs) > attachScan
}

const attachScan = 8

func (a *attachments) get(name string) ([]byte, bool) {
	if a.at != nil {
		i, ok := a.at[name]
		if !ok {
			return nil, false
		}
		return a.kvs[i].Val, true
	}
	for i := range a.kvs {
		if a.kvs[i].Key == name {
			return a.kvs[i].Val, true
		}
	}
	return nil, false
}

// set adds or replaces the value attached under name.
func (a *attachments) set(name string, v []byte) {
	if a.at != nil {
		if i, ok := a.at[name]; ok {
			a.kvs[i].Val = v
			return
		}
	} else {
		for i := range a.kvs {
			if a.kvs[i].Key == name {
				a.kvs[i].Val = v
				return
			}
		}
	}
	a.kvs = append(a.kvs, KV{Key: name, Val: v})
	switch {
	case a.at != nil:
		a.at[name] = len(a.kvs) - 1
	case len(a.kvs) > attachScan:
		a.at = make(map[string]int, 2*len(a.kvs))
		for i, kv := range a.kvs {
			a.at[kv.Key] = i
		}
	}
}

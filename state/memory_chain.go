package state

import (
	"bytes"
	"context"
)

// AppendChained applies each link atomically, under the store's lock.
func (m *Memory) AppendChained(_ context.Context, links []Link) ([]LinkResult, error) {
	out := make([]LinkResult, len(links))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, l := range links {
		out[i] = m.link(l)
	}
	return out, nil
}

func (m *Memory) link(l Link) LinkResult {
	now := m.now()
	tk := tailKey(l.Log)
	cur := ""
	if e := m.live(tk, now); e != nil {
		if e.kind != kindValue {
			return LinkResult{Err: ErrWrongKind}
		}
		cur = string(e.val)
	}
	if cur != l.Prev {
		return LinkResult{Tail: cur}
	}
	if _, err := m.appendLocked(now, l.Log, l.Entry, l.TTL); err != nil {
		return LinkResult{Err: err}
	}
	if err := m.writeValue(now, tk, m.live(tk, now), []byte(l.Tail), l.TTL, false); err != nil {
		return LinkResult{Err: err}
	}
	for _, kv := range l.Sets {
		if err := m.storeValue(now, kv.Key, m.live(kv.Key, now), kv.Val, l.TTL, false, true); err != nil {
			return LinkResult{Err: err}
		}
	}
	return LinkResult{OK: true, Tail: l.Tail}
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

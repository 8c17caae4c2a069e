package state

import (
	"bytes"
	"context"
	"time"
)

// Claim sets key to val only if key is absent; the new entry is held.
func (m *Memory) Claim(_ context.Context, key string, val []byte, ttl time.Duration) (bool, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e := m.live(key, now)
	if e != nil {
		if e.kind != kindValue {
			return false, nil, ErrWrongKind
		}
		return false, bytes.Clone(e.val), nil
	}
	if err := m.writeValue(now, key, nil, val, ttl, true); err != nil {
		return false, nil, err
	}
	return true, nil, nil
}

// Renew sets key's TTL only if its value equals val. Whether the entry is
// held does not change.
func (m *Memory) Renew(_ context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e, err := m.valueEqual(now, key, val)
	if e == nil || err != nil {
		return false, err
	}
	m.expireAt(e, deadline(now, ttl))
	return true, nil
}

// Swap replaces key's value with next only if it equals prev; the entry is
// no longer held.
func (m *Memory) Swap(_ context.Context, key string, prev, next []byte, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e, err := m.valueEqual(now, key, prev)
	if e == nil || err != nil {
		return false, err
	}
	if err := m.writeValue(now, key, e, next, ttl, false); err != nil {
		return false, err
	}
	return true, nil
}

// Release deletes key only if its value equals val.
func (m *Memory) Release(_ context.Context, key string, val []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.valueEqual(m.now(), key, val)
	if e == nil || err != nil {
		return false, err
	}
	m.remove(e)
	return true, nil
}

// Get returns a copy of key's value.
func (m *Memory) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key, m.now())
	switch {
	case e == nil:
		return nil, ErrNotFound
	case e.kind != kindValue:
		return nil, ErrWrongKind
	}
	return bytes.Clone(e.val), nil
}

// Set writes key, replacing whatever it held; the entry is not held.
func (m *Memory) Set(_ context.Context, key string, val []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	return m.writeValue(now, key, m.live(key, now), val, ttl, false)
}

// Touch sets the expiry of key's value and reports whether it holds one.
func (m *Memory) Touch(_ context.Context, key string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	switch e := m.live(key, now); {
	case e == nil:
		return false, nil
	case e.kind != kindValue:
		return false, ErrWrongKind
	default:
		m.expireAt(e, deadline(now, ttl))
		return true, nil
	}
}

// Delete removes key, whatever it holds.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.items[key]; e != nil {
		m.remove(e)
	}
	return nil
}

// Ping always succeeds: the memory store is up while the process is.
func (m *Memory) Ping(context.Context) error { return nil }

// valueEqual returns key's live entry if it is a value equal to val, nil if
// it is absent or different, and ErrWrongKind if it is not a value.
func (m *Memory) valueEqual(now int64, key string, val []byte) (*entry, error) {
	e := m.live(key, now)
	switch {
	case e == nil:
		return nil, nil
	case e.kind != kindValue:
		return nil, ErrWrongKind
	case !bytes.Equal(e.val, val):
		return nil, nil
	}
	return e, nil
}

// writeValue stores val at key, where e is key's live entry or nil, after
// making room for it.
func (m *Memory) writeValue(now int64, key string, e *entry, val []byte, ttl time.Duration, held bool) error {
	size := int64(len(key) + len(val))
	dWeight, dSize := int64(1), size
	if e != nil {
		dWeight, dSize = 1-e.weight, size-e.size
	}
	if err := m.makeRoom(now, e, dWeight, dSize); err != nil {
		return err
	}
	if e == nil {
		e = m.insert(key, kindValue)
	}
	// Reuse the old buffer when it fits without wasting much (callers only
	// ever see copies, and CAS loops then write without allocating).
	if cap(e.val) >= len(val) && cap(e.val) <= 2*len(val)+64 {
		e.val = append(e.val[:0], val...)
	} else {
		e.val = append(make([]byte, 0, len(val)), val...)
	}
	e.kind, e.log, e.attached, e.idx, e.held = kindValue, nil, attachments{}, nil, held
	m.resize(e, dWeight, dSize)
	m.written(e)
	m.expireAt(e, deadline(now, ttl))
	return nil
}

// InProcess reports that the store's operations never leave the process, so
// that writers need not batch them to save round trips.
func (m *Memory) InProcess() bool { return true }

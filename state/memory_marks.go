package state

import (
	"context"
	"time"
)

// markSet is a mark set's two generations. Each member counts 1 against
// MaxEntries and 8 bytes plus its value's length against MaxBytes.
type markSet struct {
	cur, prev         map[uint64]string
	curSize, prevSize int64
}

func markSize(val string) int64 { return 8 + int64(len(val)) }

// MarkAdd adds members to the mark set at key; see Store.
func (m *Memory) MarkAdd(_ context.Context, key string, members []uint64, val string, ttl time.Duration, max int) error {
	if len(members) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e := m.live(key, now)
	dSize := int64(len(members)) * markSize(val)
	if e == nil {
		dSize += int64(len(key))
	} else if e.kind != kindMarks {
		return ErrWrongKind
	}
	// Room for the worst case (every member new); the exact change is
	// accounted for below.
	if err := m.makeRoom(now, e, int64(len(members)), dSize); err != nil {
		return err
	}
	if e == nil {
		e = m.insert(key, kindMarks)
		e.marks = &markSet{cur: make(map[uint64]string, len(members))}
		m.resize(e, 0, int64(len(key)))
	}
	ms := e.marks
	var dWeight int64
	dSize = 0
	for _, h := range members {
		if old, ok := ms.cur[h]; ok {
			dSize += int64(len(val) - len(old))
		} else {
			dWeight++
			dSize += markSize(val)
		}
		ms.cur[h] = val
	}
	ms.curSize += dSize
	m.resize(e, dWeight, dSize)
	if half := max / 2; half > 0 && len(ms.cur) >= half {
		m.resize(e, -int64(len(ms.prev)), -ms.prevSize)
		ms.prev, ms.prevSize = ms.cur, ms.curSize
		ms.cur, ms.curSize = make(map[uint64]string), 0
	}
	m.written(e)
	m.expireAt(e, deadline(now, ttl))
	return nil
}

// MarkLookup returns each member's value, "" when absent; see Store.
func (m *Memory) MarkLookup(_ context.Context, key string, members []uint64) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, len(members))
	e := m.live(key, m.now())
	if e == nil {
		return out, nil
	}
	if e.kind != kindMarks {
		return nil, ErrWrongKind
	}
	for i, h := range members {
		if v, ok := e.marks.cur[h]; ok {
			out[i] = v
		} else if v, ok := e.marks.prev[h]; ok {
			out[i] = v
		}
	}
	return out, nil
}

// MarksMayHold reports whether a live mark set exists at key; see Store.
func (m *Memory) MarksMayHold(key string) bool {
	if m.markSets.Load() == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key, m.now())
	return e != nil && e.kind == kindMarks && len(e.marks.cur)+len(e.marks.prev) > 0
}

package state

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"
)

// scoreBytes is what an index member's score counts against MaxBytes.
const scoreBytes = 8

// errNaN matches Redis, which refuses NaN as a score or bound.
var errNaN = errors.New("state: score is not a number")

// sortedIndex keeps members in (score, member) order in a slice, with a map
// from member to score. Lookups and range starts are binary searches; an
// insert or removal moves the members after it, which for the index sizes
// Baton keeps (members per trace) is cheaper than a tree or skip list.
type sortedIndex struct {
	scores map[string]float64
	items  []Scored
}

func compareScored(a, b Scored) int {
	if c := cmp.Compare(a.Score, b.Score); c != 0 {
		return c
	}
	return strings.Compare(a.Member, b.Member)
}

// add inserts or rescores member and reports whether it was new.
func (x *sortedIndex) add(member string, score float64) bool {
	old, ok := x.scores[member]
	if ok && old == score {
		return false
	}
	if ok {
		x.delete(member, old)
	}
	x.scores[member] = score
	s := Scored{Member: member, Score: score}
	i, _ := slices.BinarySearchFunc(x.items, s, compareScored)
	x.items = slices.Insert(x.items, i, s)
	return !ok
}

func (x *sortedIndex) delete(member string, score float64) {
	if i, found := slices.BinarySearchFunc(x.items, Scored{Member: member, Score: score}, compareScored); found {
		x.items = slices.Delete(x.items, i, i+1)
	}
	delete(x.scores, member)
}

// between returns the members with min <= score <= max, skipping offset and
// keeping at most count (count <= 0: all), as ZRANGE BYSCORE LIMIT does.
func (x *sortedIndex) between(min, max float64, offset, count int64) []Scored {
	lo, _ := slices.BinarySearchFunc(x.items, min, func(s Scored, v float64) int {
		if s.Score < v {
			return -1
		}
		return 1
	})
	hi, _ := slices.BinarySearchFunc(x.items, max, func(s Scored, v float64) int {
		if s.Score <= v {
			return -1
		}
		return 1
	})
	if offset < 0 || int64(hi-lo) <= offset {
		return []Scored{}
	}
	lo += int(offset)
	if count > 0 && int64(hi-lo) > count {
		hi = lo + int(count)
	}
	return slices.Clone(x.items[lo:hi])
}

// IndexAdd adds or rescores member in the index at key and sets the index's
// TTL.
func (m *Memory) IndexAdd(_ context.Context, key, member string, score float64, ttl time.Duration) error {
	if math.IsNaN(score) {
		return errNaN
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e := m.live(key, now)
	var dWeight, dSize int64
	switch {
	case e == nil:
		dWeight, dSize = 1, int64(len(key)+len(member)+scoreBytes)
	case e.kind != kindIndex:
		return ErrWrongKind
	default:
		if _, ok := e.idx.scores[member]; !ok {
			dWeight, dSize = 1, int64(len(member)+scoreBytes)
		}
	}
	if err := m.makeRoom(now, e, dWeight, dSize); err != nil {
		return err
	}
	if e == nil {
		e = m.insert(key, kindIndex)
		e.idx = &sortedIndex{scores: make(map[string]float64)}
	}
	e.idx.add(member, score)
	m.resize(e, dWeight, dSize)
	m.written(e)
	m.expireAt(e, deadline(now, ttl))
	return nil
}

// IndexIncr adds to members' scores in the index at key and sets the
// index's TTL.
func (m *Memory) IndexIncr(_ context.Context, key string, deltas []Scored, ttl time.Duration) ([]float64, error) {
	for _, d := range deltas {
		if math.IsNaN(d.Score) {
			return nil, errNaN
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e := m.live(key, now)
	var dWeight, dSize int64
	switch {
	case e == nil:
		dSize = int64(len(key))
	case e.kind != kindIndex:
		return nil, ErrWrongKind
	}
	var seen []string
	for _, d := range deltas {
		if e != nil {
			if _, ok := e.idx.scores[d.Member]; ok {
				continue
			}
		}
		if !slices.Contains(seen, d.Member) {
			seen = append(seen, d.Member)
			dWeight, dSize = dWeight+1, dSize+int64(len(d.Member)+scoreBytes)
		}
	}
	if err := m.makeRoom(now, e, dWeight, dSize); err != nil {
		return nil, err
	}
	if e == nil {
		e = m.insert(key, kindIndex)
		e.idx = &sortedIndex{scores: make(map[string]float64)}
	}
	out := make([]float64, len(deltas))
	for i, d := range deltas {
		score := e.idx.scores[d.Member] + d.Score
		if math.IsNaN(score) { // +Inf and -Inf added: Redis refuses it
			score = e.idx.scores[d.Member]
		}
		e.idx.add(d.Member, score)
		out[i] = score
	}
	m.resize(e, dWeight, dSize)
	m.written(e)
	m.expireAt(e, deadline(now, ttl))
	return out, nil
}

// IndexRange returns the members of the index at key with min <= score <= max.
func (m *Memory) IndexRange(_ context.Context, key string, min, max float64, offset, count int64) ([]Scored, error) {
	if math.IsNaN(min) || math.IsNaN(max) {
		return nil, errNaN
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key, m.now())
	switch {
	case e == nil:
		return []Scored{}, nil
	case e.kind != kindIndex:
		return nil, ErrWrongKind
	}
	return e.idx.between(min, max, offset, count), nil
}

// IndexRemove removes member from the index at key; an index left empty is
// deleted, as Redis does.
func (m *Memory) IndexRemove(_ context.Context, key, member string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key, m.now())
	switch {
	case e == nil:
		return nil
	case e.kind != kindIndex:
		return ErrWrongKind
	}
	score, ok := e.idx.scores[member]
	if !ok {
		return nil
	}
	e.idx.delete(member, score)
	if len(e.idx.items) == 0 {
		m.remove(e)
		return nil
	}
	m.resize(e, -1, -int64(len(member)+scoreBytes))
	return nil
}

// IndexCount returns the number of members in the index at key.
func (m *Memory) IndexCount(_ context.Context, key string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key, m.now())
	switch {
	case e == nil:
		return 0, nil
	case e.kind != kindIndex:
		return 0, ErrWrongKind
	}
	return int64(len(e.idx.items)), nil
}

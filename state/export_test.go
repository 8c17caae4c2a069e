package state

import (
	"time"

	"github.com/batonproxy/baton/config"
)

// NewMemoryEvery is NewMemory with the janitor running every interval, so
// that tests can watch it reclaim expired entries without waiting seconds.
func NewMemoryEvery(cfg config.Memory, every time.Duration) *Memory {
	return newMemory(cfg, every)
}

// AlwaysBatch sends every request-path command of r through the
// autopipeliner, as under load, so that the contract suite covers that path
// too (a serial test would otherwise only ever take the direct one).
func AlwaysBatch(r *Redis) { r.inflight.Add(1) }

// MarkSets is how many mark sets m counts as resident: what lets
// MarksMayHold answer without the lock.
func MarkSets(m *Memory) int64 { return m.markSets.Load() }

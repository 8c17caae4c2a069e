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

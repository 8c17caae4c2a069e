package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"time"

	"github.com/batonproxy/baton/state"
)

// MaxBatons bounds what List reads: a page's work stays bounded however
// many Batons share the store.
const MaxBatons = 500

// List returns the Batons announced within Expiry, by agent then start,
// at most MaxBatons; it forgets those whose announcement lapsed.
func List(ctx context.Context, store state.Store) ([]Announcement, error) {
	now := time.Now()
	live, err := store.IndexRange(ctx, indexKey, float64(now.Add(-Expiry).Unix()), math.Inf(1), 0, MaxBatons)
	if err != nil {
		return nil, err
	}
	out := make([]Announcement, 0, len(live))
	for _, m := range live {
		b, err := store.Get(ctx, entryPref+m.Member)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var a Announcement
		if json.Unmarshal(b, &a) == nil {
			out = append(out, a)
		}
	}
	// Members whose announcements lapsed long ago: forget a few per read.
	if stale, err := store.IndexRange(ctx, indexKey, math.Inf(-1), float64(now.Add(-Expiry).Unix()-1), 0, 100); err == nil {
		for _, m := range stale {
			_ = store.IndexRemove(ctx, indexKey, m.Member)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Agent != out[j].Agent {
			return out[i].Agent < out[j].Agent
		}
		return out[i].Started.Before(out[j].Started)
	})
	return out, nil
}

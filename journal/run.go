package journal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"sync"

	"github.com/batonproxy/baton/middleware"
)

// maxOccurrences bounds the occurrences of one digest in one handling;
// calls past it go out unjournaled.
const maxOccurrences = 4096

// run is the journal of one handling: the entries loaded from the store,
// and the occurrences its calls took.
type run struct {
	j   *journal
	h   *middleware.Handling
	key string // the log in the store

	mu      sync.Mutex
	loading *load                        // the load in progress, if any
	entries map[callID]*entry            // nil until loaded
	bytes   int64                        // of the log: loaded, and appended since
	occ     map[[sha256.Size]byte][]bool // per digest, by occurrence: taken for good
	calls   int                          // in flight (counted before loading, so that nothing lets go of a load a call waits for)
}

// load is one read of a handling's journal; waiters share its outcome.
type load struct {
	done chan struct{}
	err  error
}

// run returns the journal state of h's calls.
func (j *journal) run(h *middleware.Handling) *run {
	var ru *run
	j.runs.Update(h.ID, func(old *run, ok bool) (*run, bool) {
		if !ok {
			old = &run{j: j, h: h, key: "journal/" + j.agent + "/" + hex.EncodeToString(h.Key[:]),
				occ: map[[sha256.Size]byte][]bool{}}
		}
		ru = old
		return old, true
	})
	return ru
}

// ended lets go of the entries of h's journal once no call of it is in
// flight: the agent answered.
func (j *journal) ended(h *middleware.Handling) {
	if ru, ok := j.runs.Get(h.ID); ok {
		ru.mu.Lock()
		ru.letGo()
		ru.mu.Unlock()
	}
}

// errTooManyOccurrences reports a call repeated past maxOccurrences.
var errTooManyOccurrences = fmt.Errorf("more than %d identical calls in one handling", maxOccurrences)

// take counts a call in flight, loads the journal if it is not, and
// returns the call's occurrence among calls with digest d: the first one
// an earlier such call gave back, else the next. On an error the call is
// not in flight.
func (ru *run) take(ctx context.Context, d [sha256.Size]byte) (int, error) {
	ru.mu.Lock()
	ru.calls++
	ru.mu.Unlock()
	if err := ru.load(ctx); err != nil {
		ru.leave()
		return 0, err
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	taken := ru.occ[d]
	for i, t := range taken {
		if !t {
			taken[i] = true
			return i + 1, nil
		}
	}
	if len(taken) == maxOccurrences {
		ru.calls--
		ru.letGoIfDone()
		return 0, errTooManyOccurrences
	}
	ru.occ[d] = append(taken, true)
	return len(taken) + 1, nil
}

// settle ends a call at occurrence occ: kept, or given back for the next
// such call (it got no answer the journal keeps).
func (ru *run) settle(d [sha256.Size]byte, occ int, kept bool) {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if !kept {
		ru.occ[d][occ-1] = false
	}
	ru.calls--
	ru.letGoIfDone()
}

// leave ends a call that took no occurrence.
func (ru *run) leave() {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	ru.calls--
	ru.letGoIfDone()
}

func (ru *run) letGoIfDone() {
	if ru.h.Done() {
		ru.letGo()
	}
}

// letGo drops the loaded entries when no call is in flight; a later call
// loads them again. Called with mu held.
func (ru *run) letGo() {
	if ru.calls == 0 && ru.loading == nil {
		ru.entries, ru.bytes = nil, 0
	}
}

func (ru *run) find(id callID) *entry {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return ru.entries[id]
}

// room returns the bytes the handling's journal may still take.
func (ru *run) room() int64 {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return max(ru.j.maxHandling-ru.bytes, 0)
}

// reserve takes n bytes of the handling's room, if there are.
func (ru *run) reserve(n int64) bool {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if ru.bytes+n > ru.j.maxHandling {
		return false
	}
	ru.bytes += n
	return true
}

func (ru *run) unreserve(n int64) {
	ru.mu.Lock()
	ru.bytes -= n
	ru.mu.Unlock()
}

// load reads the handling's journal from the store unless it is loaded.
// Concurrent callers wait for one read and share its outcome: a store that
// is down costs each call at most the one read it waited for.
func (ru *run) load(ctx context.Context) error {
	ru.mu.Lock()
	if ru.entries != nil {
		ru.mu.Unlock()
		return nil
	}
	if l := ru.loading; l != nil {
		ru.mu.Unlock()
		select {
		case <-l.done:
			return l.err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	l := &load{done: make(chan struct{})}
	ru.loading = l
	ru.mu.Unlock()

	items, err := ru.j.store.Range(ctx, ru.key, 0, -1)
	entries, size, bad := map[callID]*entry{}, int64(0), 0
	for _, b := range items {
		size += int64(len(b))
		e, id, derr := decodeEntry(b)
		if derr != nil {
			bad++
			continue
		}
		if _, dup := entries[id]; !dup { // two runs that raced: the first answer stands
			entries[id] = e
		}
	}
	if bad > 0 {
		ru.j.log.Warn("journal: entries that do not decode were skipped", "handling", ru.h.ID, "count", bad)
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	ru.loading = nil
	if err != nil {
		l.err = fmt.Errorf("reading the journal: %w", err)
	} else {
		ru.entries, ru.bytes = entries, size
	}
	close(l.done)
	return l.err
}

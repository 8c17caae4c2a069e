package journal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// slowRange holds each Range until release is closed, and counts them.
type slowRange struct {
	state.Store
	release chan struct{}
	ranges  chan struct{}
}

func (s *slowRange) Range(ctx context.Context, key string, start, stop int64) ([][]byte, error) {
	s.ranges <- struct{}{}
	<-s.release
	return s.Store.Range(ctx, key, start, stop)
}

// TestRunKeepsWhatACallLoads: the agent answering while a call of its
// handling loads the journal does not let go of the entries that call is
// about to look up; concurrent calls share one load.
func TestRunKeepsWhatACallLoads(t *testing.T) {
	t.Parallel()
	mem := state.NewMemory(config.Memory{MaxEntries: 100, MaxBytes: 1 << 20})
	t.Cleanup(func() { mem.Close() })
	store := &slowRange{Store: mem, release: make(chan struct{}), ranges: make(chan struct{}, 4)}
	j := &journal{store: store, agent: "b", maxEntry: 1 << 20, maxHandling: 1 << 20,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), runs: state.NewFIFO[*run](16, time.Minute)}
	h := &middleware.Handling{ID: "t.1"}
	ru := j.run(h)
	d := sha256.Sum256([]byte("call"))
	b, _ := encodeEntry(&entryMeta{Digest: hexDigest(d), Occurrence: 1, Status: 200}, []byte("answer"))
	if _, err := mem.Append(context.Background(), ru.key, b, time.Minute); err != nil {
		t.Fatal(err)
	}

	type took struct{ occ int }
	done := make(chan took, 2)
	for range 2 {
		go func() {
			occ, err := ru.take(context.Background(), d)
			if err != nil {
				t.Error(err)
			}
			done <- took{occ}
		}()
	}
	<-store.ranges
	h.Finish() // the agent answers while the calls wait for the load
	j.ended(h)
	close(store.release)
	a, b2 := <-done, <-done
	if a.occ+b2.occ != 3 {
		t.Errorf("occurrences %d and %d, want 1 and 2", a.occ, b2.occ)
	}
	if e := ru.find(callID{d, 1}); e == nil || string(e.body) != "answer" {
		t.Fatal("the journal was let go while its calls were in flight")
	}
	if n := len(store.ranges); n != 0 {
		t.Errorf("%d more loads, want one for both calls", n)
	}
	ru.settle(d, 1, true)
	ru.settle(d, 2, false)
	if ru.find(callID{d, 1}) != nil {
		t.Error("the entries were kept after the last call of an answered handling")
	}
}

func hexDigest(d [sha256.Size]byte) string { return hex.EncodeToString(d[:]) }

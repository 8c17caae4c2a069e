package record

import (
	"strconv"
	"testing"
)

// The ring keeps records in order across its wrap and its growth, and
// grows no further than what waited in it at once.
func TestQueueRing(t *testing.T) {
	q := newQueue()
	next, want := 0, 0
	push := func(k int) {
		for range k {
			q.push(nil, &Record{ID: strconv.Itoa(next)})
			next++
		}
	}
	take := func(max int) {
		got, _ := q.take(nil, max)
		for _, g := range got {
			if g.rec.ID != strconv.Itoa(want) || !g.rec.queued {
				t.Fatalf("took %q (queued %v), want %d", g.rec.ID, g.rec.queued, want)
			}
			want++
		}
	}
	push(10)
	take(7) // head moves on: the next pushes wrap
	push(12)
	take(3)
	push(40) // grows while wrapped
	take(flushBatch)
	if want != next || q.n != 0 {
		t.Fatalf("took %d of %d, %d left", want, next, q.n)
	}
	if len(q.ring) > 64 {
		t.Errorf("a ring that held at most 49 records grew to %d", len(q.ring))
	}
	for i := range q.ring {
		if q.ring[i].rec.ID != "" {
			t.Fatalf("slot %d still holds record %s", i, q.ring[i].rec.ID)
		}
	}
	q.close()
	if q.push(nil, &Record{}) {
		t.Error("a closed queue took a record")
	}
	if _, closed := q.take(nil, 1); !closed {
		t.Error("take did not report the queue closed")
	}
}

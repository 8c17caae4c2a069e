package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/batonproxy/baton/handoff/record"
)

// unstored keeps the dead letters the store refused, in the process, and
// stores them when it answers again: a failed handoff is never lost while
// its Baton runs. Past maxUnstored a dead letter is in the log only.
type unstored struct {
	book   *record.Book
	log    *slog.Logger
	stored DeadLetters // told of each one stored at last; nil: none

	mu   sync.Mutex
	recs []*record.Record
}

// maxUnstored bounds the dead letters kept in memory while the store does
// not answer; past it a dead letter is in the log only.
const maxUnstored = 10000

// keep holds a dead letter the store refused (a copy: the handoff's
// goroutine goes on reading its own), so that keepStoring stores it when the
// store answers again. It reports false when too many are kept already.
func (l *unstored) keep(rec *record.Record) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) >= maxUnstored {
		return false
	}
	cp := *rec
	l.recs = append(l.recs, &cp)
	return true
}

// keepStoring stores the kept dead letters every second until ctx ends,
// oldest first, stopping a round at the first the store still refuses.
func (l *unstored) keepStoring(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.mu.Lock()
			for _, rec := range l.recs {
				l.log.Error("dead letter not stored before shutdown: the failure is in this log only", "record_id", rec.ID,
					"edge", rec.Edge(), "request_digest", rec.RequestDigest, "idempotency_key", rec.Key)
			}
			l.mu.Unlock()
			return
		case <-t.C:
		}
		for {
			l.mu.Lock()
			if len(l.recs) == 0 {
				l.mu.Unlock()
				break
			}
			rec := l.recs[0]
			l.mu.Unlock()
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := l.book.DeadLetter(wctx, rec)
			cancel()
			if err != nil {
				break // the store is still down: next round
			}
			l.mu.Lock()
			l.recs = l.recs[1:]
			l.mu.Unlock()
			l.log.Info("dead letter stored once the store answered again", "record_id", rec.ID, "edge", rec.Edge())
			if l.stored != nil {
				l.stored.Dead(rec)
			}
		}
	}
}

package deadletter

import (
	"context"
	"log/slog"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// index keeps the dead letter of each (peer, key) this Baton's agent has,
// so that a failed handoff is listed once, and not once its work is done:
//   - a handoff delivered later with the same key (the chain resumed, and
//     the agent re-ran and sent the same positional key) resolves the dead
//     letter: delivered, with resolved_by naming that handoff's record;
//   - a handoff dead-lettered again with the same key supersedes the older
//     letter, which leaves the lists pointing at the newer one.
//
// It lives in the process and starts from the agent's listed dead letters.
// A dead letter it does not know (another replica of the agent wrote it)
// stays listed until it is replayed, which the receiver's window then
// answers without running its agent again.
type index struct {
	book  *record.Book
	log   *slog.Logger
	bg    func(func(context.Context)) // runs store work off the request path
	byKey *state.FIFO[string]         // "peer\x00key" → dead letter record id
}

const maxLetters = 1 << 16

// newIndex keeps dead letters by key for as long as records are kept.
func newIndex(book *record.Book, retention time.Duration, log *slog.Logger, bg func(func(context.Context))) *index {
	return &index{book: book, log: log, bg: bg, byKey: state.NewFIFO[string](maxLetters, retention)}
}

func letterKey(peer, key string) string { return peer + "\x00" + key }

// load learns the agent's listed dead letters.
func (l *index) load(ctx context.Context, agent string) {
	recs, _, err := l.book.DeadLetters(ctx, record.AgentDeadLetters(agent), 0, 1000)
	if err != nil {
		l.log.Warn("dead letters not loaded: a resumed chain will not resolve the ones listed before this start",
			"error", err.Error())
		return
	}
	for i := range recs {
		r := &recs[i]
		if r.Key == "" || r.State != record.Dead {
			continue
		}
		l.byKey.Update(letterKey(r.To, r.Key), func(cur string, ok bool) (string, bool) {
			if ok {
				return cur, true // one written since this Baton started is newer
			}
			return r.ID, true
		})
	}
}

// swap sets the dead letter of (peer, key) to id and returns the one
// before.
func (l *index) swap(peer, key, id string) (prev string) {
	l.byKey.Update(letterKey(peer, key), func(cur string, _ bool) (string, bool) {
		prev = cur
		return id, true
	})
	return prev
}

// dead notes a dead letter stored: an older one of the same key is
// superseded.
func (l *index) dead(rec *record.Record) {
	if l == nil || rec.Key == "" {
		return
	}
	if prev := l.swap(rec.To, rec.Key, rec.ID); prev != "" && prev != rec.ID {
		l.settle(prev, rec.ID, false)
	}
}

// delivered notes a handoff delivered: the dead letter of its key, if any,
// is resolved by it. With no dead letter kept (the usual case) it costs a
// lock and nothing else.
func (l *index) delivered(rec *record.Record) {
	if l == nil || rec.Key == "" || l.byKey.Empty() {
		return
	}
	k := letterKey(rec.To, rec.Key)
	prev, _ := l.byKey.Get(k)
	if prev == "" {
		return
	}
	l.byKey.Remove(k)
	if prev != rec.ID {
		l.settle(prev, rec.ID, true)
	}
}

// settle takes the dead letter id off the lists, off the request path:
// resolved (delivered by the handoff of record by) or superseded (by the
// dead letter by). A dead letter no longer dead (replayed meanwhile) is
// left as it is.
func (l *index) settle(id, by string, resolved bool) {
	l.bg(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rec, err := l.book.Get(ctx, id)
		if err != nil || rec.State != record.Dead {
			return
		}
		rec.ResolvedBy, rec.Updated = by, time.Now()
		if resolved {
			rec.State = record.Delivered
			rec.Outcome = "resolved: " + by + " delivered the same handoff (same key) when the chain resumed"
		} else {
			rec.Outcome = "superseded: the same handoff (same key) failed again as dead letter " + by
		}
		if err := l.book.Write(ctx, rec); err == nil {
			err = l.book.Undead(ctx, rec)
		}
		if err != nil {
			l.log.Warn("dead letter still listed", "record_id", id, "resolved_by", by, "error", err.Error())
		}
	})
}

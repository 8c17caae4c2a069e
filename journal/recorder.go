package journal

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// recorder passes a journaled call's answer to the agent and keeps a copy;
// when the agent has read all of it, it is appended to the journal, before
// the end of the answer reaches the agent. When the agent stops reading
// before the end, the rest is read for the journal, for up to drainFor; an
// answer cut short is not journaled.
type recorder struct {
	io.ReadCloser
	cancel context.CancelFunc // ends the call
	j      *journal
	ru     *run
	h      *middleware.Handling
	id     callID
	ctx    context.Context
	meta   entryMeta
	what   string
	limit  int64
	buf    []byte
	size   int64 // bytes read, kept or not
	over   bool  // larger than limit: passed on, not kept
	done   bool
}

func (rc *recorder) Read(p []byte) (int, error) {
	n, err := rc.ReadCloser.Read(p)
	rc.size += int64(n)
	if n > 0 && !rc.over {
		if int64(len(rc.buf)+n) > rc.limit {
			rc.over, rc.buf = true, nil
		} else {
			rc.buf = append(rc.buf, p[:n]...)
		}
	}
	if err == io.EOF && !rc.done {
		rc.done = true
		rc.finish()
	}
	return n, err
}

func (rc *recorder) Close() error {
	defer rc.cancel()
	if !rc.done {
		rc.drain()
	}
	if !rc.done {
		rc.done = true
		rc.ru.settle(rc.id.digest, rc.id.occ, false)
		rc.j.skip(rc.h, rc.meta.Destination, reasonIncomplete, rc.what+": the answer was not read to its end")
	}
	return rc.ReadCloser.Close()
}

// drainFor bounds the read of the rest of an answer the agent stopped
// reading.
const drainFor = 2 * time.Second

// drain reads the rest of the answer, for the journal, until its end, its
// size passes the journal's bounds, or drainFor passes.
func (rc *recorder) drain() {
	t := time.AfterFunc(drainFor, rc.cancel)
	defer t.Stop()
	buf := make([]byte, 32<<10)
	for !rc.done && !rc.over {
		if _, err := rc.Read(buf); err != nil {
			return
		}
	}
}

// finish journals the whole answer.
func (rc *recorder) finish() {
	dest := rc.meta.Destination
	// The agent has its answer: the occurrence is taken whatever happens.
	defer rc.ru.settle(rc.id.digest, rc.id.occ, true)
	if rc.over {
		reason, why := reasonEntryCap, "the answer is over journal.max_entry_bytes ("+strconv.FormatInt(rc.j.maxEntry, 10)+")"
		if rc.size <= rc.j.maxEntry {
			reason, why = reasonHandlingCap, rc.j.handlingCapNote()
		}
		rc.j.skip(rc.h, dest, reason, rc.what+": not journaled: "+why)
		return
	}
	rc.meta.At = time.Now().UTC()
	rc.meta.Tokens = modelUsage(rc.meta.Header.Get("Content-Type"), rc.meta.Header.Get("Content-Encoding"), rc.buf)
	b, err := encodeEntry(&rc.meta, rc.buf)
	if err != nil {
		rc.j.skip(rc.h, dest, reasonStoreError, rc.what+": not journaled: "+err.Error())
		return
	}
	size := int64(len(b))
	if !rc.ru.reserve(size) {
		rc.j.skip(rc.h, dest, reasonHandlingCap, rc.what+": not journaled: "+rc.j.handlingCapNote())
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rc.ctx), journalWrite)
	defer cancel()
	if err := rc.append(ctx, b); err != nil {
		rc.ru.unreserve(size)
		rc.j.skip(rc.h, dest, reasonStoreError, rc.what+": not journaled: the store refused it ("+err.Error()+")")
		rc.j.log.Warn("journal: entry not stored", "destination", dest, "error", err.Error())
		return
	}
	rc.h.NoteJournal(func(s *record.JournalSummary) { s.Journaled++ })
	rc.j.m.written(dest, size)
}

// append writes the entry, with the counts the call's ride offers (a model
// call's spend) in the same round trip.
func (rc *recorder) append(ctx context.Context, b []byte) error {
	ride := middleware.RideFrom(rc.ctx)
	if counts, ok := ride.Take(); ok {
		_, err := rc.j.store.AppendCounting(ctx, rc.ru.key, b, rc.j.retention, counts)
		ride.Taken(err)
		return err
	}
	_, err := rc.j.store.Append(ctx, rc.ru.key, b, rc.j.retention)
	return err
}

func (j *journal) handlingCapNote() string {
	return "the handling's journal would pass journal.max_handling_bytes (" + strconv.FormatInt(j.maxHandling, 10) + ")"
}

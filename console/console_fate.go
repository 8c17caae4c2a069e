package console

import (
	"net/http"

	"github.com/batonproxy/baton/handoff/record"
)

// fate is what became of a handoff where its chain stopped, as the trace's
// pictures mark it. A dead letter is the sender's delegation record; the
// receipt under it shares its fate when its agent failed (a 5xx, an A2A
// failed task): the receiver's side of the same stop.
type fate uint8

const (
	fateNone fate = iota
	// fateStopped: the chain stopped here, and nothing has delivered the
	// work since (a dead letter standing).
	fateStopped
	// fateResolved: the chain stopped here, then a handoff with the same
	// key delivered the work (the chain resumed): the dead letter is
	// delivered with resolved_by.
	fateResolved
	// fateSuperseded: a dead letter that failed again as a newer one
	// (dead, with resolved_by naming the newer).
	fateSuperseded
	// fateResumed: a receipt with no delegation record in the trace (its
	// sender runs no Baton, or keeps its records elsewhere) whose agent
	// failed, then delivered the same key later in the trace.
	fateResumed
)

// mark is the words the pictures show for a fate.
func (f fate) mark() string {
	switch f {
	case fateStopped:
		return "stopped here"
	case fateResolved:
		return "dead letter, resolved"
	case fateSuperseded:
		return "dead letter, superseded"
	case fateResumed:
		return "resumed"
	}
	return ""
}

// settled reports a stop whose work was delivered since.
func (f fate) settled() bool { return f == fateResolved || f == fateResumed }

// fates reads what became of each handoff of a trace where its chain
// stopped, by record id; a record that is no stop has none.
type fates struct {
	byID map[string]*record.Record
	of   map[string]fate
}

func newFates(recs []record.Record) fates {
	f := fates{byID: make(map[string]*record.Record, len(recs)), of: map[string]fate{}}
	type edgeKey struct{ from, to, key string }
	delivered := map[edgeKey][]*record.Record{} // receipts delivered, by edge and key
	for i := range recs {
		r := &recs[i]
		f.byID[r.ID] = r
		if r.Side == record.Ingress && r.State == record.Delivered && r.Key != "" {
			k := edgeKey{r.From, r.To, r.Key}
			delivered[k] = append(delivered[k], r)
		}
	}
	for i := range recs {
		r := &recs[i]
		if r.Side == record.Egress {
			if d := deadLetterFate(r); d != fateNone {
				f.of[r.ID] = d
			}
		}
	}
	for i := range recs {
		r := &recs[i]
		if r.Side != record.Ingress || r.State != record.Failed || r.StoppedAt != "" {
			continue
		}
		if p := f.byID[r.ParentID]; p != nil {
			if d := f.of[p.ID]; d != fateNone {
				f.of[r.ID] = d
			}
			continue
		}
		// No delegation record above it: the stop is the receipt's own,
		// unless it is a duplicate still running (409).
		if r.Status == http.StatusConflict {
			continue
		}
		f.of[r.ID] = fateStopped
		for _, later := range delivered[edgeKey{r.From, r.To, r.Key}] {
			if r.Key != "" && later.Created.After(r.Created) {
				f.of[r.ID] = fateResumed
			}
		}
	}
	return f
}

// deadLetterFate reads a delegation record's fate from its own fields.
func deadLetterFate(r *record.Record) fate {
	switch {
	case r.State == record.Dead && r.ResolvedBy == "":
		return fateStopped
	case r.State == record.Dead:
		return fateSuperseded
	case r.State == record.Delivered && r.ResolvedBy != "":
		return fateResolved
	}
	return fateNone
}

// stoppedBelow is the fate of the stop a record's answer named
// (stopped_at): fateStopped while it stands or is not in the trace,
// fateResolved once its work was delivered; fateNone when it named none.
func (f fates) stoppedBelow(r *record.Record) fate {
	if r.StoppedAt == "" {
		return fateNone
	}
	if dl := f.byID[r.StoppedAt]; dl != nil && deadLetterFate(dl).settled() {
		return fateResolved
	}
	return fateStopped
}

// class colours a record's bar: its state, but red (failed) for a handoff
// whose chain stopped below it, and amber (resolved) for a stop whose work
// was delivered since, on either side of it.
func (f fates) class(r *record.Record) string {
	if f.of[r.ID].settled() || f.stoppedBelow(r).settled() {
		return "resolved"
	}
	if f.stoppedBelow(r) == fateStopped {
		return string(record.Failed)
	}
	return string(r.State)
}

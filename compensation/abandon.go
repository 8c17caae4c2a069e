package compensation

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// Abandoning a trace (docs/compensation.md). Abandon marks the trace in the
// store (the first mark wins; a second abandon reads it) and lists it as
// pending. Every Baton on the store advances the pending traces: it reads
// the trace's records, orders its steps (each side effect a handoff's
// receiver reported, the latest handoff first), and runs, in that order,
// the steps whose handoffs its own agent sent, each once: a step is claimed
// in the store before its compensation is sent, with a key derived from the
// handoff's, and settled there as undone, failed (its compensation is a
// dead letter of its own) or standing (nothing declared to undo it). A
// Baton does not pass a step another Baton has not settled yet. When every
// step is settled, the trace leaves the pending list.

// ErrNotAbandonable reports a trace with no dead letter standing: it
// completed, or was resumed, and is never compensated.
var ErrNotAbandonable = errors.New("the trace has no dead letter standing: it completed or was resumed, and is not compensated")

const (
	abandonPending = "abandon:pending"
	stepLease      = 2 * time.Minute
)

func abandonKey(traceID string) string  { return "{" + traceID + "}:abandon" }
func stepKey(traceID, of string) string { return "{" + traceID + "}:step:" + of }

// The states of a step.
const (
	stepPending  = "pending"
	stepRunning  = "running"
	stepHeld     = "held" // the compensation waits for a person (its edge's confirmation gate)
	stepUndone   = "undone"
	stepFailed   = "failed"
	stepStanding = "standing"
)

// Abandonment is an abandoned trace and where undoing it stands.
type Abandonment struct {
	TraceID string    `json:"trace_id"`
	Reason  string    `json:"reason"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	// Settled is true once every step is undone, failed or standing.
	Settled bool   `json:"settled"`
	Steps   []Step `json:"steps"`
}

// Step is one side effect of an abandoned trace.
type Step struct {
	Record string `json:"record"` // the handoff whose receiver performed it
	From   string `json:"from"`   // whose Baton undoes it
	To     string `json:"to"`
	Effect string `json:"effect"`
	stepOutcome
}

// stepOutcome is what became of a step.
type stepOutcome struct {
	State        string `json:"state"`
	Compensation string `json:"compensation,omitempty"` // the compensating handoff's record
	DeadLetter   string `json:"dead_letter,omitempty"`
	Why          string `json:"why,omitempty"`
	By           string `json:"by,omitempty"` // the agent whose Baton ran it
}

type abandonMark struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// Abandon abandons a trace: its completed steps' side effects are undone,
// in reverse order, by the Batons that sent them. A trace abandoned before
// is answered as it stands.
func (cr *Compensator) Abandon(ctx context.Context, traceID, reason, by string) (*Abandonment, error) {
	tr, err := cr.o.Book.Trace(ctx, traceID)
	if err != nil {
		return nil, err
	}
	if len(tr.Records) == 0 {
		return nil, record.ErrNotFound
	}
	mark, _ := json.Marshal(abandonMark{Reason: reason, By: by, At: time.Now().UTC()})
	ttl := cr.o.Config.Records.Retention.D()
	if _, err := cr.o.Store.Get(ctx, abandonKey(traceID)); errors.Is(err, state.ErrNotFound) {
		if !DeadLetterStanding(tr.Records) {
			return nil, ErrNotAbandonable
		}
		ok, _, err := cr.o.Store.Claim(ctx, abandonKey(traceID), mark, ttl)
		if err != nil {
			return nil, err
		}
		if ok {
			cr.unlistDeadLetters(ctx, tr.Records)
		}
	} else if err != nil {
		return nil, err
	}
	if err := cr.o.Store.IndexAdd(ctx, abandonPending, traceID, float64(time.Now().UnixMilli()), ttl); err != nil {
		return nil, err
	}
	// Its steps run once its records have settled (advance), on the tick
	// after that or at once.
	time.AfterFunc(recordsSettle, cr.wake)
	return cr.Abandonment(ctx, traceID)
}

// unlistDeadLetters takes the abandoned trace's dead letters off the lists:
// they are not to be replayed, and must not hold the places of others in
// the paged loops that read the lists (auto replay, automatic abandon).
// Their records stay in the trace.
func (cr *Compensator) unlistDeadLetters(ctx context.Context, recs []record.Record) {
	for i := range recs {
		r := &recs[i]
		if r.Side == record.Egress && r.State == record.Dead && r.ResolvedBy == "" && r.Compensates == "" {
			if err := cr.o.Book.Undead(ctx, r); err != nil {
				cr.o.Log.Warn("abandon: a dead letter stays listed", "record_id", r.ID, "error", err.Error())
			}
		}
	}
}

// repend lists an abandoned trace as pending again when a handoff of it
// reports side effects after it was abandoned (a branch still in flight).
func (cr *Compensator) repend(traceID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if gone, err := cr.Abandoned(ctx, traceID); err == nil && gone {
		_ = cr.o.Store.IndexAdd(ctx, abandonPending, traceID, float64(time.Now().UnixMilli()), cr.o.Config.Records.Retention.D())
	}
}

// DeadLetterStanding reports a dead letter of the trace not resolved by a
// resumed chain.
func DeadLetterStanding(recs []record.Record) bool {
	for _, r := range recs {
		if r.Side == record.Egress && r.State == record.Dead && r.ResolvedBy == "" {
			return true
		}
	}
	return false
}

// Abandoned reports whether the trace was abandoned.
func (cr *Compensator) Abandoned(ctx context.Context, traceID string) (bool, error) {
	_, err := cr.o.Store.Get(ctx, abandonKey(traceID))
	if errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Abandonment reads where an abandoned trace stands, or record.ErrNotFound.
func (cr *Compensator) Abandonment(ctx context.Context, traceID string) (*Abandonment, error) {
	v, err := cr.o.Store.Get(ctx, abandonKey(traceID))
	if errors.Is(err, state.ErrNotFound) {
		return nil, record.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var m abandonMark
	_ = json.Unmarshal(v, &m)
	// Until the trace's last records are surely written, more steps may
	// appear: it is not settled before then.
	a := &Abandonment{TraceID: traceID, Reason: m.Reason, By: m.By, At: m.At, Settled: time.Since(m.At) >= recordsSettle}
	tr, err := cr.o.Book.Trace(ctx, traceID)
	if err != nil {
		return nil, err
	}
	for _, st := range steps(tr.Records) {
		if st.stepOutcome, err = cr.stepState(ctx, traceID, st.Record+"/"+st.Effect); err != nil {
			return nil, err
		}
		a.Settled = a.Settled && settled(st.State)
		a.Steps = append(a.Steps, st)
	}
	return a, nil
}

// steps are the side effects the trace's handoffs reported, latest handoff
// first; a handoff sent again with the same key (a resumed or re-run
// agent) counts once.
func steps(recs []record.Record) []Step {
	var out []Step
	seen := map[string]bool{}
	sorted := append([]record.Record(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Created.After(sorted[j].Created) })
	for _, r := range sorted {
		if r.Side != record.Egress || r.Compensates != "" {
			continue
		}
		for i := len(r.Effects) - 1; i >= 0; i-- {
			k := r.From + "\x00" + r.To + "\x00" + r.Key + "\x00" + r.Effects[i]
			if r.Key != "" && seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, Step{Record: r.ID, From: r.From, To: r.To, Effect: r.Effects[i]})
		}
	}
	return out
}

func settled(state string) bool {
	return state == stepUndone || state == stepFailed || state == stepStanding
}

// stepState reads a step's state; a failed step whose dead letter was
// replayed since and delivered is undone.
func (cr *Compensator) stepState(ctx context.Context, traceID, of string) (stepOutcome, error) {
	v, err := cr.o.Store.Get(ctx, stepKey(traceID, of))
	if errors.Is(err, state.ErrNotFound) {
		return stepOutcome{State: stepPending}, nil
	}
	if err != nil {
		return stepOutcome{}, err
	}
	var o stepOutcome
	if json.Unmarshal(v, &o) != nil {
		return stepOutcome{State: stepPending}, nil
	}
	switch {
	case o.State == stepFailed && o.DeadLetter != "":
		if dl, err := cr.o.Book.Get(ctx, o.DeadLetter); err == nil && dl.State == record.Delivered {
			o.State, o.Why = stepUndone, "its dead letter was replayed and delivered"
		}
	case o.State == stepHeld:
		held, err := cr.o.Book.Get(ctx, o.Compensation)
		switch {
		case err != nil:
		case held.State == record.Delivered && held.Status < 300:
			o.State, o.Why = stepUndone, "approved and delivered"
		case held.State == record.Denied || held.State == record.Expired || held.Approval != nil && (held.Approval.Decision == record.DecisionDenied || held.Approval.Decision == record.DecisionExpired):
			o.State, o.Why = stepFailed, "its confirmation gate's approval was "+held.Approval.Decision
		case held.State == record.Dead:
			o.State, o.DeadLetter, o.Why = stepFailed, held.ID, "approved, then dead-lettered"
		}
	}
	return o, nil
}

// advanceAbandoned advances every pending abandoned trace.
func (cr *Compensator) advanceAbandoned(ctx context.Context) {
	pending, err := cr.o.Store.IndexRange(ctx, abandonPending, math.Inf(-1), math.Inf(1), 0, 100)
	if err != nil {
		return
	}
	for _, p := range pending {
		if ctx.Err() != nil {
			return
		}
		cr.advance(ctx, p.Member)
	}
}

// advance runs the trace's next steps this Baton owns, in order, and
// takes the trace off the pending list once all are settled.
func (cr *Compensator) advance(ctx context.Context, traceID string) {
	// Records are written off the request path: until a trace abandoned at
	// once after it failed has had recordsSettle for the last of them (the
	// latest handoffs' side effects among them), its steps are not known
	// in full, and none runs, so that the latest is always undone first.
	// (A mark the store no longer holds cannot say when: the steps run.)
	v, err := cr.o.Store.Get(ctx, abandonKey(traceID))
	switch {
	case errors.Is(err, state.ErrNotFound):
	case err != nil:
		return
	default:
		var m abandonMark
		if json.Unmarshal(v, &m) == nil && time.Since(m.At) < recordsSettle {
			return
		}
	}
	tr, err := cr.o.Book.Trace(ctx, traceID)
	if err != nil {
		return
	}
	for _, st := range steps(tr.Records) {
		of := st.Record + "/" + st.Effect
		o, err := cr.stepState(ctx, traceID, of)
		if err != nil {
			return
		}
		if settled(o.State) {
			continue
		}
		if st.From != cr.o.Config.Agent || o.State == stepRunning || o.State == stepHeld {
			return // its Baton has not settled it yet, or a person has not decided
		}
		if !cr.runStep(ctx, st, of) {
			return
		}
	}
	_ = cr.o.Store.IndexRemove(ctx, abandonPending, traceID)
}

// recordsSettle is how long after an abandon its trace's steps are first
// run, and read again however soon all found are settled: the time its
// last records, written off the request path, surely take to land.
const recordsSettle = time.Second

// wake runs the abandon loop at once.
func (cr *Compensator) wake() {
	select {
	case cr.kick <- struct{}{}:
	default:
	}
}

// runStep claims a step and sends its compensation; false when the step is
// not settled (another replica holds it, or the store failed).
func (cr *Compensator) runStep(ctx context.Context, st Step, of string) bool {
	traceID := record.TraceOf(st.Record)
	// The lease names its holder: a replica that took it over after it
	// lapsed writes the outcome, not this one.
	running, _ := json.Marshal(stepOutcome{State: stepRunning, By: cr.o.Config.Agent, Why: "lease " + newSpanID()})
	ok, _, err := cr.o.Store.Claim(ctx, stepKey(traceID, of), running, stepLease)
	if err != nil || !ok {
		return false
	}
	rec, err := cr.o.Book.Get(ctx, st.Record) // with its checkpoint
	if err != nil {
		_ = cr.o.Store.Delete(ctx, stepKey(traceID, of))
		return false
	}
	o := cr.compensate(ctx, rec, st.Effect)
	o.By = cr.o.Config.Agent
	if o.State == stepPending {
		// The receiver is still running it (409 in flight): the lease is
		// given back, and a later round sends it again with its key.
		_, _ = cr.o.Store.Release(ctx, stepKey(traceID, of), running)
		return false
	}
	cr.o.Log.Info("side effect compensated", "trace_id", traceID, "record_id", st.Record, "effect", st.Effect,
		"state", o.State, "compensation", o.Compensation, "why", o.Why)
	done, _ := json.Marshal(o)
	ok, err = cr.o.Store.Swap(ctx, stepKey(traceID, of), running, done, cr.o.Config.Records.Retention.D())
	return err == nil && ok
}

// abandonLoop advances the abandoned traces on this store, at once when
// this Baton abandons one and every interval otherwise, and abandons the
// traces of dead letters left unreplayed past compensation.abandon_after.
func (cr *Compensator) abandonLoop(ctx context.Context) {
	const every = 500 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	var lastSweep time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-cr.kick:
		}
		cr.advanceAbandoned(ctx)
		if after := cr.o.Config.Compensation.AbandonAfter.D(); after > 0 && time.Since(lastSweep) >= min(after/4, 10*time.Second) {
			lastSweep = time.Now()
			cr.abandonStale(ctx, after)
		}
	}
}

// abandonStale abandons the trace of each of this agent's dead letters
// older than after.
func (cr *Compensator) abandonStale(ctx context.Context, after time.Duration) {
	recs, _, err := cr.o.Book.DeadLetters(ctx, record.AgentDeadLetters(cr.o.Config.Agent), 0, 100)
	if err != nil {
		return
	}
	for _, r := range recs {
		if time.Since(r.Updated) < after {
			continue
		}
		if done, err := cr.Abandoned(ctx, r.TraceID); err != nil || done {
			continue
		}
		_, err := cr.Abandon(ctx, r.TraceID, "dead letter "+r.ID+" left unreplayed for "+after.String(), "compensation.abandon_after")
		if err != nil && !errors.Is(err, ErrNotAbandonable) {
			cr.o.Log.Warn("auto abandon failed", "trace_id", r.TraceID, "error", err.Error())
		}
	}
}

// Dropped abandons the trace of a dead letter dropped by, when
// compensation.abandon_dropped says so.
func (cr *Compensator) Dropped(ctx context.Context, rec *record.Record, by string) {
	if !cr.o.Config.Compensation.AbandonDropped || rec.Compensates != "" {
		return
	}
	if _, err := cr.Abandon(ctx, rec.TraceID, "dead letter "+rec.ID+" dropped", by); err != nil && !errors.Is(err, ErrNotAbandonable) {
		cr.o.Log.Warn("abandoning the dropped dead letter's trace failed", "record_id", rec.ID, "error", err.Error())
	}
}

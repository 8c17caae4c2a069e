package proxy

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

// ErrAbandoned reports a replay in an abandoned trace.
var ErrAbandoned = errors.New("the trace was abandoned: its side effects are being undone, and its dead letters are not replayed")

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
func (s *Server) Abandon(ctx context.Context, traceID, reason, by string) (*Abandonment, error) {
	tr, err := s.book.Trace(ctx, traceID)
	if err != nil {
		return nil, err
	}
	if len(tr.Records) == 0 {
		return nil, record.ErrNotFound
	}
	mark, _ := json.Marshal(abandonMark{Reason: reason, By: by, At: time.Now().UTC()})
	ttl := s.cfg.Records.Retention.D()
	if _, err := s.store.Get(ctx, abandonKey(traceID)); errors.Is(err, state.ErrNotFound) {
		if !deadLetterStanding(tr.Records) {
			return nil, ErrNotAbandonable
		}
		ok, _, err := s.store.Claim(ctx, abandonKey(traceID), mark, ttl)
		if err != nil {
			return nil, err
		}
		if ok {
			s.unlistDeadLetters(ctx, tr.Records)
		}
	} else if err != nil {
		return nil, err
	}
	if err := s.store.IndexAdd(ctx, abandonPending, traceID, float64(time.Now().UnixMilli()), ttl); err != nil {
		return nil, err
	}
	select {
	case s.abandonKick <- struct{}{}:
	default:
	}
	return s.Abandonment(ctx, traceID)
}

// unlistDeadLetters takes the abandoned trace's dead letters off the lists:
// they are not to be replayed, and must not hold the places of others in
// the paged loops that read the lists (auto replay, automatic abandon).
// Their records stay in the trace.
func (s *Server) unlistDeadLetters(ctx context.Context, recs []record.Record) {
	for i := range recs {
		r := &recs[i]
		if r.Side == record.Egress && r.State == record.Dead && r.ResolvedBy == "" && r.Compensates == "" {
			if err := s.book.Undead(ctx, r); err != nil {
				s.log.Warn("abandon: a dead letter stays listed", "record_id", r.ID, "error", err.Error())
			}
		}
	}
}

// repend lists an abandoned trace as pending again when a handoff of it
// reports side effects after it was abandoned (a branch still in flight).
func (s *Server) repend(traceID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if gone, err := s.abandoned(ctx, traceID); err == nil && gone {
		_ = s.store.IndexAdd(ctx, abandonPending, traceID, float64(time.Now().UnixMilli()), s.cfg.Records.Retention.D())
	}
}

// deadLetterStanding reports a dead letter of the trace not resolved by a
// resumed chain.
func deadLetterStanding(recs []record.Record) bool {
	for _, r := range recs {
		if r.Side == record.Egress && r.State == record.Dead && r.ResolvedBy == "" {
			return true
		}
	}
	return false
}

// abandoned reports whether the trace was abandoned.
func (s *Server) abandoned(ctx context.Context, traceID string) (bool, error) {
	_, err := s.store.Get(ctx, abandonKey(traceID))
	if errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Abandonment reads where an abandoned trace stands, or record.ErrNotFound.
func (s *Server) Abandonment(ctx context.Context, traceID string) (*Abandonment, error) {
	v, err := s.store.Get(ctx, abandonKey(traceID))
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
	tr, err := s.book.Trace(ctx, traceID)
	if err != nil {
		return nil, err
	}
	for _, st := range steps(tr.Records) {
		if st.stepOutcome, err = s.stepState(ctx, traceID, st.Record+"/"+st.Effect); err != nil {
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
func (s *Server) stepState(ctx context.Context, traceID, of string) (stepOutcome, error) {
	v, err := s.store.Get(ctx, stepKey(traceID, of))
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
		if dl, err := s.book.Get(ctx, o.DeadLetter); err == nil && dl.State == record.Delivered {
			o.State, o.Why = stepUndone, "its dead letter was replayed and delivered"
		}
	case o.State == stepHeld:
		held, err := s.book.Get(ctx, o.Compensation)
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
func (s *Server) advanceAbandoned(ctx context.Context) {
	pending, err := s.store.IndexRange(ctx, abandonPending, math.Inf(-1), math.Inf(1), 0, 100)
	if err != nil {
		return
	}
	for _, p := range pending {
		if ctx.Err() != nil {
			return
		}
		s.advance(ctx, p.Member)
	}
}

// advance runs the trace's next steps this Baton owns, in order, and
// takes the trace off the pending list once all are settled.
func (s *Server) advance(ctx context.Context, traceID string) {
	tr, err := s.book.Trace(ctx, traceID)
	if err != nil {
		return
	}
	for _, st := range steps(tr.Records) {
		of := st.Record + "/" + st.Effect
		o, err := s.stepState(ctx, traceID, of)
		if err != nil {
			return
		}
		if settled(o.State) {
			continue
		}
		if st.From != s.cfg.Agent || o.State == stepRunning || o.State == stepHeld {
			return // its Baton has not settled it yet, or a person has not decided
		}
		if !s.runStep(ctx, st, of) {
			return
		}
	}
	// Records are written off the request path: a trace abandoned at once
	// after it failed stays pending a moment, for the last of them.
	if v, err := s.store.Get(ctx, abandonKey(traceID)); err == nil {
		var m abandonMark
		if json.Unmarshal(v, &m) == nil && time.Since(m.At) < recordsSettle {
			return
		}
	}
	_ = s.store.IndexRemove(ctx, abandonPending, traceID)
}

// recordsSettle is how long after an abandon its trace's records are read
// again for steps, however soon all found are settled.
const recordsSettle = time.Second

// runStep claims a step and sends its compensation; false when the step is
// not settled (another replica holds it, or the store failed).
func (s *Server) runStep(ctx context.Context, st Step, of string) bool {
	traceID := record.TraceOf(st.Record)
	// The lease names its holder: a replica that took it over after it
	// lapsed writes the outcome, not this one.
	running, _ := json.Marshal(stepOutcome{State: stepRunning, By: s.cfg.Agent, Why: "lease " + newSpanID()})
	ok, _, err := s.store.Claim(ctx, stepKey(traceID, of), running, stepLease)
	if err != nil || !ok {
		return false
	}
	rec, err := s.book.Get(ctx, st.Record) // with its checkpoint
	if err != nil {
		_ = s.store.Delete(ctx, stepKey(traceID, of))
		return false
	}
	o := s.compensate(ctx, rec, st.Effect)
	o.By = s.cfg.Agent
	if o.State == stepPending {
		// The receiver is still running it (409 in flight): the lease is
		// given back, and a later round sends it again with its key.
		_, _ = s.store.Release(ctx, stepKey(traceID, of), running)
		return false
	}
	s.log.Info("side effect compensated", "trace_id", traceID, "record_id", st.Record, "effect", st.Effect,
		"state", o.State, "compensation", o.Compensation, "why", o.Why)
	done, _ := json.Marshal(o)
	ok, err = s.store.Swap(ctx, stepKey(traceID, of), running, done, s.cfg.Records.Retention.D())
	return err == nil && ok
}

// abandonLoop advances the abandoned traces on this store, at once when
// this Baton abandons one and every interval otherwise, and abandons the
// traces of dead letters left unreplayed past compensation.abandon_after.
func (s *Server) abandonLoop(ctx context.Context) {
	const every = 500 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	var lastSweep time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.abandonKick:
		}
		s.advanceAbandoned(ctx)
		if after := s.cfg.Compensation.AbandonAfter.D(); after > 0 && time.Since(lastSweep) >= min(after/4, 10*time.Second) {
			lastSweep = time.Now()
			s.abandonStale(ctx, after)
		}
	}
}

// abandonStale abandons the trace of each of this agent's dead letters
// older than after.
func (s *Server) abandonStale(ctx context.Context, after time.Duration) {
	recs, _, err := s.book.DeadLetters(ctx, record.AgentDeadLetters(s.cfg.Agent), 0, 100)
	if err != nil {
		return
	}
	for _, r := range recs {
		if time.Since(r.Updated) < after {
			continue
		}
		if done, err := s.abandoned(ctx, r.TraceID); err != nil || done {
			continue
		}
		_, err := s.Abandon(ctx, r.TraceID, "dead letter "+r.ID+" left unreplayed for "+after.String(), "compensation.abandon_after")
		if err != nil && !errors.Is(err, ErrNotAbandonable) {
			s.log.Warn("auto abandon failed", "trace_id", r.TraceID, "error", err.Error())
		}
	}
}

// dropped abandons the trace of a dead letter dropped by, when
// compensation.abandon_dropped says so.
func (s *Server) dropped(ctx context.Context, rec *record.Record, by string) {
	if !s.cfg.Compensation.AbandonDropped || rec.Compensates != "" {
		return
	}
	if _, err := s.Abandon(ctx, rec.TraceID, "dead letter "+rec.ID+" dropped", by); err != nil && !errors.Is(err, ErrNotAbandonable) {
		s.log.Warn("abandoning the dropped dead letter's trace failed", "record_id", rec.ID, "error", err.Error())
	}
}

package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
)

// Approvals holds the handoffs confirmation gates match, and carries out
// the decisions on them (docs/gates.md). A held handoff is a record in state
// held with its checkpoint, listed among the agent's pending approvals in the
// store: nothing of it lives only in this process, so a Baton that restarts
// (or another replica of the agent) decides it all the same.
//
// Three store keys tie it together, each written with Claim so that
// concurrent writers agree:
//   - approval-key:<edge>:<key> names the approval of a handoff's key, so
//     that the agent re-sending the same handoff (a retry, a resumed chain)
//     meets the same approval instead of opening another;
//   - {trace}:approval-decision:<id> is the decision, claimed once: two
//     approvers (or an approver and the expiry) racing never both act;
//   - {trace}:approval-answer:<id> is the peer's answer to the approved
//     handoff, which the agent polls for.
type Approvals struct {
	o         Options
	retention time.Duration
	notify    *notifier
	m         *approvalMetrics
	gates     map[string]*gate // by peer: the edges that hold handoffs
	approvers *approvers       // who may decide (admin_identity.go)

	mu      sync.Mutex
	waiters map[string][]chan struct{} // approval id → calls waiting for its decision
}

// ErrSelfApproval, ErrNotPending and ErrNotHeld report decisions that are
// refused.
var (
	ErrSelfApproval = errors.New("an agent cannot decide its own handoff: approvals are decided by an approver")
	ErrNotPending   = errors.New("the approval is no longer pending")
	ErrNotHeld      = errors.New("the record is not a handoff a gate held")
)

// MaxAnswerBytes bounds the stored answer to an approved handoff.
const MaxAnswerBytes = 1 << 20

func decisionKey(id string) string { return "{" + record.TraceOf(id) + "}:approval-decision:" + id }
func answerKey(id string) string   { return "{" + record.TraceOf(id) + "}:approval-answer:" + id }

// hold answers a handoff the edge's gate matched (rule names the rule):
// held as a checkpoint, or met with the approval the same handoff already
// has. It returns nil, nil when the handoff is to be sent after all: the
// same handoff was approved. The same handoff is the same key with the same
// method, target and body: an approval never covers another request that
// reuses its key.
func (a *Approvals) hold(g *gate, req *http.Request, in *middleware.Info, rule string, newRecord func() *record.Record) (*http.Response, error) {
	ctx := req.Context()
	if checkpoint := a.o.Config.Records.MaxBodyBytes; !in.Buffered || int64(len(in.Body)) > checkpoint {
		in.Call.Settle(middleware.CallUnsent)
		return a.problem(req, in, notHoldable(req, in.Edge(), checkpoint)), nil
	}
	slot := ""
	if in.Key != "" {
		slot = approvalSlot(in.Edge(), in.Key, req, in.Body)
		prev, err := a.approvalIn(ctx, slot)
		if err != nil {
			return a.storeDown(req, in, err), nil
		}
		switch {
		case prev != nil && prev.Approval != nil && prev.Approval.Decision == record.DecisionApproved:
			return nil, nil // approved: sent as it was; the receiver's window answers a re-send
		case prev != nil && prev.State != record.Expired:
			in.Call.Settle(middleware.CallAnswered)
			return a.await(req, in, prev, g.wait), nil
		case prev != nil: // expired: ask again
			if _, err := a.o.Store.Release(ctx, slot, []byte(prev.ID)); err != nil {
				return a.storeDown(req, in, err), nil
			}
		}
	}
	rec := newRecord()
	now := time.Now()
	rec.State, rec.Updated = record.Held, now
	rec.Approval = &record.Approval{Gate: rule, Expires: now.Add(g.expires)}
	rec.Outcome = "held for confirmation (" + rule + ")"
	if slot != "" {
		ok, _, err := a.o.Store.Claim(ctx, slot, []byte(rec.ID), a.retention)
		if err != nil {
			return a.storeDown(req, in, err), nil
		}
		if !ok {
			// The same handoff was held a moment ago by a concurrent send.
			prev, err := a.approvalIn(ctx, slot)
			if err != nil || prev == nil {
				return a.storeDown(req, in, errors.New("the approval of this handoff is not readable yet")), nil
			}
			in.Call.Settle(middleware.CallAnswered)
			return a.await(req, in, prev, g.wait), nil
		}
	}
	if err := a.o.Book.Hold(ctx, rec); err != nil {
		if slot != "" {
			if _, rerr := a.o.Store.Release(context.WithoutCancel(ctx), slot, []byte(rec.ID)); rerr != nil {
				a.o.Log.Warn("approvals: a failed hold keeps its key", "record_id", rec.ID, "error", rerr.Error())
			}
		}
		in.Call.Settle(middleware.CallUnsent)
		return a.storeDown(req, in, err), nil
	}
	in.Call.Settle(middleware.CallAnswered)
	a.m.held(rec)
	a.notify.pending(rec, a.o.Config.Agent)
	a.o.Log.Info("handoff held for confirmation", "record_id", rec.ID, "edge", rec.Edge(), "gate", rule,
		"expires", rec.Approval.Expires.UTC().Format(time.RFC3339))
	return a.await(req, in, rec, g.wait), nil
}

// approvalSlot is the store key naming the approval of one handoff: its
// edge, its idempotency key, and a digest of its method, target and body.
func approvalSlot(edge, key string, req *http.Request, body []byte) string {
	h := sha256.New()
	h.Write([]byte(req.Method + " " + req.URL.RequestURI() + "\n"))
	h.Write(body)
	return "approval-key:" + edge + ":" + key + ":" + hex.EncodeToString(h.Sum(nil)[:12])
}

// approvalIn reads the approval a slot names (nil when none). The record is
// written just after its slot is claimed: a slot whose record is not there
// yet is read again for up to two seconds.
func (a *Approvals) approvalIn(ctx context.Context, slot string) (*record.Record, error) {
	for wait := 20 * time.Millisecond; ; wait *= 2 {
		v, err := a.o.Store.Get(ctx, slot)
		if errors.Is(err, state.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		rec, err := a.o.Book.Get(ctx, string(v))
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, record.ErrNotFound) || wait > time.Second {
			return nil, fmt.Errorf("reading approval %s: %w", v, err)
		}
		if !pause(ctx, wait) {
			return nil, ctx.Err()
		}
	}
}

// await waits up to wait for rec's decision, then answers the agent with
// where the approval stands.
func (a *Approvals) await(req *http.Request, in *middleware.Info, rec *record.Record, wait time.Duration) *http.Response {
	if rec.State == record.Held && wait > 0 {
		if cur := a.wait(req.Context(), rec.ID, wait); cur != nil {
			rec = cur
		}
	}
	return a.answer(req, in, rec)
}

// wait blocks until the approval id is decided (in this process, or seen in
// the store by a poll every second), wait passes or ctx ends, and returns
// the record as it then is (nil when it could not be read).
func (a *Approvals) wait(ctx context.Context, id string, wait time.Duration) *record.Record {
	ch := make(chan struct{})
	a.mu.Lock()
	a.waiters[id] = append(a.waiters[id], ch)
	a.mu.Unlock()
	defer a.forget(id, ch)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	woken := ch
	for {
		over := false
		select {
		case <-woken:
			woken = nil // closed: heard once, then the poll goes on
		case <-poll.C:
		case <-deadline.C:
			over = true
		case <-ctx.Done():
			return nil
		}
		rec, err := a.o.Book.Get(ctx, id)
		if err != nil {
			return nil
		}
		if over || (rec.State != record.Held && rec.State != record.Approved) || a.answered(ctx, rec) {
			return rec
		}
	}
}

// answered reports whether the peer's answer to the approved handoff rec
// is kept (it is, before the record's last write lands).
func (a *Approvals) answered(ctx context.Context, rec *record.Record) bool {
	if rec.State != record.Approved {
		return false
	}
	_, err := a.o.Store.Get(ctx, answerKey(rec.ID))
	return err == nil
}

func (a *Approvals) forget(id string, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.waiters[id]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(a.waiters, id)
	} else {
		a.waiters[id] = list
	}
}

// wake tells the calls waiting for id that it was decided.
func (a *Approvals) wake(id string) {
	a.mu.Lock()
	list := a.waiters[id]
	delete(a.waiters, id)
	a.mu.Unlock()
	for _, ch := range list {
		close(ch)
	}
}

// DecisionResult is what a decision did: the record as it now is and, for
// an approval, the peer's answer to the handoff it sent.
type DecisionResult struct {
	Record   *record.Record `json:"record"`
	Status   int            `json:"status,omitempty"`
	Response string         `json:"response,omitempty"` // the first 64 KiB of the peer's answer
	Error    string         `json:"error,omitempty"`
}

// Decide approves or denies the held handoff id as who. An approval sends
// the checkpoint with its original key, trace and hop (the receiver's window
// still guarantees at most once) and returns once the peer answered.
func (a *Approvals) Decide(ctx context.Context, id, who string, approve bool, reason string) (*DecisionResult, error) {
	return a.decide(ctx, id, who, approve, reason)
}

func (a *Approvals) decide(ctx context.Context, id, who string, approve bool, reason string) (*DecisionResult, error) {
	rec, err := a.pending(ctx, id)
	if err != nil {
		return nil, err
	}
	if who == rec.From || who == a.o.Config.Agent {
		return nil, ErrSelfApproval
	}
	decision := record.DecisionDenied
	if approve {
		decision = record.DecisionApproved
	}
	if err := a.claim(ctx, rec, decision, who); err != nil {
		return nil, err
	}
	now := time.Now()
	rec.Approval.Decision, rec.Approval.By, rec.Approval.At, rec.Approval.Reason = decision, who, &now, reason
	rec.Updated = now
	if !approve {
		rec.State, rec.Outcome = record.Denied, "denied by "+who
		if err := a.settle(ctx, rec); err != nil {
			a.unclaim(ctx, rec)
			return nil, err
		}
		return &DecisionResult{Record: rec}, nil
	}
	rec.State, rec.Outcome = record.Approved, "approved by "+who
	// The approval is written before anything is sent, and the handoff stays
	// listed until it is: a Baton that stops in between sends it when it
	// starts again (recover).
	if err := a.o.Book.Write(ctx, rec); err != nil {
		a.unclaim(ctx, rec)
		return nil, err
	}
	a.m.decided(rec)
	return a.send(ctx, rec)
}

// send sends the approved handoff rec, keeps the peer's answer for the
// agent's poll, and takes rec off the pending list once it is delivered or
// a dead letter.
func (a *Approvals) send(ctx context.Context, rec *record.Record) (*DecisionResult, error) {
	defer a.wake(rec.ID)
	res := &DecisionResult{Record: rec}
	resp, done, err := a.o.Resend(ctx, rec, record.Approved, "approved")
	switch {
	case errors.Is(err, record.ErrUnknownPeer):
		rec.State, rec.Error, rec.Updated = record.Dead, err.Error(), time.Now()
		rec.Outcome = "approved, and not sent: the peer is no longer configured"
		if err := a.o.Book.DeadLetter(ctx, rec); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err // approved and listed still: recover sends it
	default:
		defer done()
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
			resp.Body.Close()
			res.Status, res.Response = resp.StatusCode, string(body[:min(len(body), 64<<10)])
			a.KeepAnswer(ctx, rec.ID, resp, body)
		}
	}
	if err := a.o.Book.Unhold(ctx, rec); err != nil {
		a.o.Log.Warn("approvals: a sent handoff is still listed as pending", "record_id", rec.ID, "error", err.Error())
	}
	if rec.State == record.Dead {
		res.Error = rec.Error
	}
	return res, nil
}

// recover sends the approved handoffs still listed: their Baton stopped
// after the decision and before the send. The receiver's window answers
// one that was sent after all.
func (a *Approvals) recover(ctx context.Context) {
	recs, _, err := a.o.Book.Pending(ctx, a.o.Config.Agent, 0, 1000)
	if err != nil {
		a.o.Log.Warn("approvals: approved handoffs not checked at start", "error", err.Error())
		return
	}
	for i := range recs {
		if recs[i].State == record.Approved {
			a.resume(ctx, &recs[i])
		}
	}
}

func (a *Approvals) resume(ctx context.Context, rec *record.Record) {
	a.o.Log.Info("approvals: sending a handoff approved before this Baton stopped", "record_id", rec.ID, "by", rec.Approval.By)
	if _, err := a.send(ctx, rec); err != nil {
		a.o.Log.Warn("approvals: an approved handoff is not sent yet", "record_id", rec.ID, "error", err.Error())
	}
}

// unclaim frees the decision on rec when it could not be recorded, so that
// it can be made again.
func (a *Approvals) unclaim(ctx context.Context, rec *record.Record) {
	v := []byte(rec.Approval.Decision + " " + rec.Approval.By)
	if _, err := a.o.Store.Release(context.WithoutCancel(ctx), decisionKey(rec.ID), v); err != nil {
		a.o.Log.Warn("approvals: a decision that was not recorded stays claimed", "record_id", rec.ID, "error", err.Error())
	}
}

// pending reads the approval id, which must be this agent's and held.
func (a *Approvals) pending(ctx context.Context, id string) (*record.Record, error) {
	rec, err := a.o.Book.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := records.Owned(a.o.Config.Agent, rec); err != nil {
		return nil, err
	}
	if rec.Approval == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotHeld, id)
	}
	if rec.State != record.Held {
		return rec, &NotPendingError{Record: rec}
	}
	return rec, nil
}

// NotPendingError reports a decision on an approval decided (or expired)
// already.
type NotPendingError struct{ Record *record.Record }

func (e *NotPendingError) Error() string {
	a := e.Record.Approval
	if a.Decision != "" && a.By != "" {
		return e.Record.ID + " was " + a.Decision + " by " + a.By
	}
	return e.Record.ID + " is " + string(e.Record.State)
}

func (e *NotPendingError) Unwrap() error { return ErrNotPending }

// claim takes the decision on rec for who, once.
func (a *Approvals) claim(ctx context.Context, rec *record.Record, decision, who string) error {
	ok, cur, err := a.o.Store.Claim(ctx, decisionKey(rec.ID), []byte(decision+" "+who), a.retention)
	if err != nil {
		return err
	}
	if !ok {
		// Decided a moment ago: say by whom.
		if now, err := a.o.Book.Get(ctx, rec.ID); err == nil && now.Approval != nil && now.Approval.Decision != "" {
			return &NotPendingError{Record: now}
		}
		return fmt.Errorf("%w: %s was just decided (%s)", ErrNotPending, rec.ID, cur)
	}
	return nil
}

// settle writes a decision that sends nothing (denied, expired), takes the
// record off the pending list and wakes the calls waiting for it.
func (a *Approvals) settle(ctx context.Context, rec *record.Record) error {
	defer a.wake(rec.ID)
	if err := a.o.Book.Write(ctx, rec); err != nil {
		return err
	}
	if err := a.o.Book.Unhold(ctx, rec); err != nil {
		a.o.Log.Warn("decided handoff still listed as pending", "record_id", rec.ID, "error", err.Error())
	}
	a.m.decided(rec)
	a.o.Log.Info("held handoff "+rec.Approval.Decision, "record_id", rec.ID, "edge", rec.Edge(),
		"by", rec.Approval.By, "reason", rec.Approval.Reason)
	return nil
}

// expire ends the holds that passed their expiry undecided (sending the
// same handoff again holds it anew), and sends those an approver approved
// whose Baton stopped before sending them.
func (a *Approvals) expire(ctx context.Context) {
	due, err := a.o.Book.Due(ctx, a.o.Config.Agent, time.Now(), 100)
	if err != nil {
		a.o.Log.Warn("approvals: expiry not checked", "error", err.Error())
		return
	}
	for i := range due {
		rec := &due[i]
		switch {
		case rec.State == record.Approved:
			a.resume(ctx, rec)
			continue
		case rec.State != record.Held || rec.Approval == nil:
			if err := a.o.Book.Unhold(ctx, rec); err != nil { // decided, and left listed by a Baton that stopped
				a.o.Log.Warn("approvals: a decided handoff is still listed", "record_id", rec.ID, "error", err.Error())
			}
			continue
		}
		if err := a.claim(ctx, rec, record.DecisionExpired, "baton"); err != nil {
			if !errors.Is(err, ErrNotPending) {
				a.o.Log.Warn("approvals: expiry not claimed", "record_id", rec.ID, "error", err.Error())
			}
			continue
		}
		now := time.Now()
		rec.State, rec.Updated = record.Expired, now
		rec.Approval.Decision, rec.Approval.By, rec.Approval.At = record.DecisionExpired, "baton", &now
		rec.Outcome = "expired undecided"
		if err := a.settle(ctx, rec); err != nil {
			a.unclaim(ctx, rec)
			a.o.Log.Warn("approvals: expiry not recorded", "record_id", rec.ID, "error", err.Error())
		}
	}
}

// sweep sends what was approved and not sent, then expires holds every
// second until ctx ends.
func (a *Approvals) sweep(ctx context.Context) {
	a.recover(ctx)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.expire(ctx)
		}
	}
}

// pause waits d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

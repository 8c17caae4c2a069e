package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// approvals holds the handoffs confirmation gates match, and carries out
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
type approvals struct {
	s         *Server
	store     state.Store
	book      *record.Book
	log       *slog.Logger
	retention time.Duration
	notify    *notifier
	m         *approvalMetrics

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

// maxAnswerBytes bounds the stored answer to an approved handoff.
const maxAnswerBytes = 1 << 20

func newApprovals(s *Server, m *approvalMetrics) *approvals {
	return &approvals{s: s, store: s.store, book: s.book, log: s.log, retention: s.cfg.Records.Retention.D(),
		notify: newNotifier(s.cfg.Approvals.Notify, s.log), m: m, waiters: map[string][]chan struct{}{}}
}

func approvalKeyKey(edge, key string) string { return "approval-key:" + edge + ":" + key }
func decisionKey(id string) string           { return "{" + record.TraceOf(id) + "}:approval-decision:" + id }
func answerKey(id string) string             { return "{" + record.TraceOf(id) + "}:approval-answer:" + id }

// hold answers a handoff the edge's gate matched (rule names the rule):
// held as a checkpoint, or met with the approval its key already has. It
// returns nil, nil when the handoff is to be sent after all: its key's
// approval was approved.
func (a *approvals) hold(e *edge, req *http.Request, in *middleware.Info, rule string) (*http.Response, error) {
	ctx := req.Context()
	if in.Key != "" {
		id, err := a.approvalOf(ctx, in.Edge(), in.Key)
		if err != nil {
			return a.storeDown(req, in, err), nil
		}
		if id != "" {
			rec, err := a.book.Get(ctx, id)
			switch {
			case err == nil && rec.Approval != nil && rec.Approval.Decision == record.DecisionApproved:
				return nil, nil // approved: the receiver's window answers a re-send
			case err == nil && rec.State != record.Expired:
				in.Call.Settle(middleware.CallAnswered)
				return a.await(req, in, rec, e.gate.wait), nil
			}
			// Expired, or gone with its retention: hold it anew.
			_, _ = a.store.Release(ctx, approvalKeyKey(in.Edge(), in.Key), []byte(id))
		}
	}
	rec := e.newRecord(req, in)
	if !rec.Replayable {
		in.Call.Settle(middleware.CallUnsent)
		return a.problem(req, in, notHoldable(req, rec, e.checkpoint)), nil
	}
	now := time.Now()
	rec.State, rec.Updated = record.Held, now
	rec.Approval = &record.Approval{Gate: rule, Expires: now.Add(e.gate.expires)}
	rec.Outcome = "held for confirmation (" + rule + ")"
	if in.Key != "" {
		ok, cur, err := a.store.Claim(ctx, approvalKeyKey(in.Edge(), in.Key), []byte(rec.ID), a.retention)
		if err != nil {
			return a.storeDown(req, in, err), nil
		}
		if !ok {
			// The same handoff was held a moment ago by a concurrent send.
			if prev, err := a.book.Get(ctx, string(cur)); err == nil {
				in.Call.Settle(middleware.CallAnswered)
				return a.await(req, in, prev, e.gate.wait), nil
			}
			return a.storeDown(req, in, errors.New("the approval of this key is not readable")), nil
		}
	}
	if err := a.book.Hold(ctx, rec); err != nil {
		if in.Key != "" {
			_, _ = a.store.Release(context.WithoutCancel(ctx), approvalKeyKey(in.Edge(), in.Key), []byte(rec.ID))
		}
		in.Call.Settle(middleware.CallUnsent)
		return a.storeDown(req, in, err), nil
	}
	in.Call.Settle(middleware.CallAnswered)
	a.m.held(rec)
	a.notify.pending(rec, a.s.cfg.Agent)
	a.log.Info("handoff held for confirmation", "record_id", rec.ID, "edge", rec.Edge(), "gate", rule,
		"expires", rec.Approval.Expires.UTC().Format(time.RFC3339))
	return a.await(req, in, rec, e.gate.wait), nil
}

// approvalOf returns the approval id the handoff key has on edge, or "".
func (a *approvals) approvalOf(ctx context.Context, edge, key string) (string, error) {
	v, err := a.store.Get(ctx, approvalKeyKey(edge, key))
	if errors.Is(err, state.ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

// await waits up to wait for rec's decision, then answers the agent with
// where the approval stands.
func (a *approvals) await(req *http.Request, in *middleware.Info, rec *record.Record, wait time.Duration) *http.Response {
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
func (a *approvals) wait(ctx context.Context, id string, wait time.Duration) *record.Record {
	ch := make(chan struct{})
	a.mu.Lock()
	a.waiters[id] = append(a.waiters[id], ch)
	a.mu.Unlock()
	defer a.forget(id, ch)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ch:
		case <-poll.C:
		case <-deadline.C:
		case <-ctx.Done():
			return nil
		}
		rec, err := a.book.Get(ctx, id)
		if err != nil {
			return nil
		}
		switch rec.State {
		case record.Held, record.Approved:
			select {
			case <-deadline.C:
				return rec
			default:
				continue
			}
		}
		return rec
	}
}

func (a *approvals) forget(id string, ch chan struct{}) {
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
func (a *approvals) wake(id string) {
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
func (s *Server) Decide(ctx context.Context, id, who string, approve bool, reason string) (*DecisionResult, error) {
	return s.approvals.decide(ctx, id, who, approve, reason)
}

func (a *approvals) decide(ctx context.Context, id, who string, approve bool, reason string) (*DecisionResult, error) {
	rec, err := a.pending(ctx, id)
	if err != nil {
		return nil, err
	}
	if who == rec.From || who == a.s.cfg.Agent {
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
			return nil, err
		}
		return &DecisionResult{Record: rec}, nil
	}
	rec.State, rec.Outcome = record.Approved, "approved by "+who
	if err := a.book.Unhold(ctx, rec); err != nil {
		a.log.Warn("approved handoff still listed as pending", "record_id", id, "error", err.Error())
	}
	a.m.decided(rec)
	res := &DecisionResult{Record: rec}
	resp, done, err := a.s.resend(ctx, rec, record.Approved, "approved")
	if err != nil {
		a.wake(id)
		return nil, err
	}
	defer done()
	if resp != nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
		resp.Body.Close()
		res.Status, res.Response = resp.StatusCode, string(body[:min(len(body), 64<<10)])
		a.keepAnswer(ctx, id, resp, body)
	}
	if rec.State == record.Dead {
		res.Error = rec.Error
	}
	a.wake(id)
	return res, nil
}

// pending reads the approval id, which must be this agent's and held.
func (a *approvals) pending(ctx context.Context, id string) (*record.Record, error) {
	rec, err := a.book.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := a.s.owned(rec); err != nil {
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
func (a *approvals) claim(ctx context.Context, rec *record.Record, decision, who string) error {
	ok, cur, err := a.store.Claim(ctx, decisionKey(rec.ID), []byte(decision+" "+who), a.retention)
	if err != nil {
		return err
	}
	if !ok {
		// Decided a moment ago: say by whom.
		if now, err := a.book.Get(ctx, rec.ID); err == nil && now.Approval != nil && now.Approval.Decision != "" {
			return &NotPendingError{Record: now}
		}
		return fmt.Errorf("%w: %s was just decided (%s)", ErrNotPending, rec.ID, cur)
	}
	return nil
}

// settle writes a decision that sends nothing (denied, expired), takes the
// record off the pending list and wakes the calls waiting for it.
func (a *approvals) settle(ctx context.Context, rec *record.Record) error {
	defer a.wake(rec.ID)
	if err := a.book.Write(ctx, rec); err != nil {
		return err
	}
	if err := a.book.Unhold(ctx, rec); err != nil {
		a.log.Warn("decided handoff still listed as pending", "record_id", rec.ID, "error", err.Error())
	}
	a.m.decided(rec)
	a.log.Info("held handoff "+rec.Approval.Decision, "record_id", rec.ID, "edge", rec.Edge(),
		"by", rec.Approval.By, "reason", rec.Approval.Reason)
	return nil
}

// expire ends the holds that passed their expiry undecided. A handoff key
// whose approval expired is free again: sending it again holds it anew.
func (a *approvals) expire(ctx context.Context) {
	due, err := a.book.Due(ctx, a.s.cfg.Agent, time.Now(), 100)
	if err != nil {
		a.log.Warn("approvals: expiry not checked", "error", err.Error())
		return
	}
	for i := range due {
		rec := &due[i]
		if rec.State != record.Held || rec.Approval == nil {
			_ = a.book.Unhold(ctx, rec) // decided by a Baton that died before unlisting it
			continue
		}
		if a.claim(ctx, rec, record.DecisionExpired, "baton") != nil {
			continue
		}
		now := time.Now()
		rec.State, rec.Updated = record.Expired, now
		rec.Approval.Decision, rec.Approval.By, rec.Approval.At = record.DecisionExpired, "baton", &now
		rec.Outcome = "expired undecided"
		if err := a.settle(ctx, rec); err != nil {
			a.log.Warn("approvals: expiry not recorded", "record_id", rec.ID, "error", err.Error())
			continue
		}
		if rec.Key != "" {
			_, _ = a.store.Release(ctx, approvalKeyKey(rec.Edge(), rec.Key), []byte(rec.ID))
		}
	}
}

// sweep expires holds every second until ctx ends.
func (a *approvals) sweep(ctx context.Context) {
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

package deadletter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// ErrNotDead reports a replay of a record that is not a dead letter,
// ErrNotReplayable one whose checkpoint lacks its body, and ErrAbandoned
// one whose trace was abandoned.
var (
	ErrNotDead       = errors.New("record is not a dead letter")
	ErrNotReplayable = errors.New("the checkpoint holds no body: the request was streamed or over records.max_body_bytes")
	ErrAbandoned     = errors.New("the trace was abandoned: its side effects are being undone, and its dead letters are not replayed")
)

// ReplayResult is what a replay did.
type ReplayResult struct {
	Record   *record.Record `json:"record"`
	Status   int            `json:"status,omitempty"`
	Response string         `json:"response,omitempty"` // the first 64 KiB of the peer's answer
	Error    string         `json:"error,omitempty"`
}

// Replay re-sends a dead letter's stored request with its original
// idempotency key, trace and hop, on a new span linked to the original, so
// that the receiver's dedupe window makes the replay of already-delivered
// work harmless. The record moves dead → replayed → delivered (or dead again).
func (d *DeadLetters) Replay(ctx context.Context, id string) (*ReplayResult, error) {
	rec, err := d.o.Book.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := records.Owned(d.agent, rec); err != nil {
		return nil, err
	}
	if rec.State != record.Dead {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotDead, id, rec.State)
	}
	if rec.Compensates == "" && d.Abandoned != nil { // a compensation's own dead letter is replayed to finish undoing
		if gone, err := d.Abandoned(ctx, rec.TraceID); err != nil {
			return nil, err
		} else if gone {
			return nil, ErrAbandoned
		}
	}
	if !rec.Replayable || rec.Request == nil {
		return nil, ErrNotReplayable
	}
	res := &ReplayResult{Record: rec}
	resp, done, err := d.o.Resend(ctx, rec, record.Replayed, "replay")
	if err != nil {
		return nil, err
	}
	defer done()
	if resp != nil {
		limit := int64(64 << 10)
		if rec.Approval != nil {
			limit = max(limit, d.AnswerBytes+1) // the agent's poll of its approval gets the new answer
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
		resp.Body.Close()
		res.Status, res.Response = resp.StatusCode, string(body[:min(len(body), 64<<10)])
		if rec.Approval != nil && d.Answered != nil {
			d.Answered(ctx, id, resp, body)
		}
	}
	if rec.State == record.Dead {
		res.Error = rec.Error // dead again, and recorded so
		return res, nil
	}
	if err := d.o.Book.Undead(ctx, rec); err != nil {
		d.o.Log.Warn("replayed dead letter still listed", "record_id", id, "error", err.Error())
	}
	return res, nil
}

// ReplayEdge replays every dead letter of the edge to peer, oldest first,
// until one fails again (auto_replay). One runs per edge at a time.
func (d *DeadLetters) ReplayEdge(ctx context.Context, peer string) {
	running := d.replayFlag(peer)
	if !running.CompareAndSwap(false, true) {
		return
	}
	defer running.Store(false)
	list := record.EdgeDeadLetters(d.agent + "→" + peer)
	for {
		recs, _, err := d.o.Book.DeadLetters(ctx, list, 0, 50)
		if err != nil || len(recs) == 0 {
			return
		}
		progressed := false
		for _, r := range recs {
			if ctx.Err() != nil {
				return
			}
			res, err := d.Replay(ctx, r.ID)
			if err != nil {
				d.o.Log.Warn("auto replay skipped", "record_id", r.ID, "error", err.Error())
				continue
			}
			if res.Error != "" {
				return // still failing: wait for the next round
			}
			progressed = true
		}
		if !progressed {
			return
		}
	}
}

// autoReplay replays the edge's dead letters when the peer's breaker
// closes again, and every interval while its breaker is not open, so that
// a peer that comes back is found without other traffic to probe it.
func (d *DeadLetters) autoReplay(ctx context.Context, peer string, every time.Duration) {
	list := record.EdgeDeadLetters(d.agent + "→" + peer)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.o.BreakerOpen(peer) {
			continue
		}
		if n, err := d.o.Book.DeadLetterCount(ctx, list); err == nil && n > 0 {
			d.ReplayEdge(ctx, peer)
		}
	}
}

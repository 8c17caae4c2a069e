package record

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// heldList is the index of the handoffs of agent held by confirmation gates
// for a decision, scored by when each expires.
func heldList(agent string) string { return "held:agent:" + agent }

// Hold writes rec (in state held, with its Approval) and lists it among the
// pending approvals of its agent (the sender, rec.From).
func (b *Book) Hold(ctx context.Context, rec *Record) error {
	if b.store == nil {
		return errors.New("record: records are disabled")
	}
	if rec.Approval == nil {
		return errors.New("record: a held record needs its approval")
	}
	if err := b.Write(ctx, rec); err != nil {
		return err
	}
	score := float64(rec.Approval.Expires.UnixMilli())
	if err := b.store.IndexAdd(ctx, heldList(rec.From), rec.ID, score, b.retention); err != nil {
		b.lost([]*Record{rec}, err)
		return fmt.Errorf("record: listing held handoff %s: %w", rec.ID, err)
	}
	return nil
}

// Unhold takes rec off its agent's pending approvals.
func (b *Book) Unhold(ctx context.Context, rec *Record) error {
	if b.store == nil {
		return nil
	}
	if err := b.store.IndexRemove(ctx, heldList(rec.From), rec.ID); err != nil {
		return fmt.Errorf("record: unlisting held handoff %s: %w", rec.ID, err)
	}
	return nil
}

// Pending pages through agent's held handoffs, soonest to expire first,
// and returns the page and how many there are.
func (b *Book) Pending(ctx context.Context, agent string, offset, limit int) ([]Record, int64, error) {
	return b.held(ctx, agent, math.MaxInt64, offset, limit)
}

// Due returns up to limit of agent's held handoffs whose hold ended by now.
func (b *Book) Due(ctx context.Context, agent string, now time.Time, limit int) ([]Record, error) {
	recs, _, err := b.held(ctx, agent, float64(now.UnixMilli()), 0, limit)
	return recs, err
}

func (b *Book) held(ctx context.Context, agent string, until float64, offset, limit int) ([]Record, int64, error) {
	return b.listed(ctx, heldList(agent), "held handoffs", until, offset, limit)
}

// PendingCount returns how many of agent's handoffs are held: one store
// call.
func (b *Book) PendingCount(ctx context.Context, agent string) (int64, error) {
	if b.store == nil {
		return 0, nil
	}
	n, err := b.store.IndexCount(ctx, heldList(agent))
	if err != nil {
		return 0, fmt.Errorf("record: counting held handoffs: %w", err)
	}
	return n, nil
}

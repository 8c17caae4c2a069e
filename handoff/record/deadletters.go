package record

import (
	"context"
	"errors"
	"fmt"
)

// DeadLetter writes rec (in state dead) and lists it as a dead letter of
// its agent (the sender, rec.From) and of its edge.
func (b *Book) DeadLetter(ctx context.Context, rec *Record) error {
	if b.store == nil {
		return errors.New("record: records are disabled")
	}
	if err := b.Write(ctx, rec); err != nil {
		return err
	}
	score := float64(rec.Updated.UnixMilli())
	for _, l := range deadLetterLists(rec) {
		if err := b.store.IndexAdd(ctx, l.key, rec.ID, score, b.retention); err != nil {
			b.lost([]*Record{rec}, err)
			return fmt.Errorf("record: listing dead letter %s: %w", rec.ID, err)
		}
	}
	return nil
}

// Undead takes rec off the dead-letter lists.
func (b *Book) Undead(ctx context.Context, rec *Record) error {
	if b.store == nil {
		return nil
	}
	for _, l := range deadLetterLists(rec) {
		if err := b.store.IndexRemove(ctx, l.key, rec.ID); err != nil {
			return fmt.Errorf("record: unlisting dead letter %s: %w", rec.ID, err)
		}
	}
	return nil
}

// DeadLetterList names a list of dead letters: those of one agent
// (AgentDeadLetters) or of one edge (EdgeDeadLetters). Dead letters belong
// to the agent whose handoff failed; Batons that share a store never list
// each other's.
type DeadLetterList struct{ key string }

// AgentDeadLetters is the list of the dead letters of agent's handoffs.
func AgentDeadLetters(agent string) DeadLetterList { return DeadLetterList{"dlq:agent:" + agent} }

// EdgeDeadLetters is the list of the dead letters of one edge, "from→to".
func EdgeDeadLetters(edge string) DeadLetterList { return DeadLetterList{"dlq:edge:" + edge} }

func deadLetterLists(rec *Record) [2]DeadLetterList {
	return [2]DeadLetterList{AgentDeadLetters(rec.From), EdgeDeadLetters(rec.Edge())}
}

// DeadLetters pages through a list of dead letters, oldest first. It
// returns the page and the list's length.
func (b *Book) DeadLetters(ctx context.Context, list DeadLetterList, offset, limit int) ([]Record, int64, error) {
	return b.listed(ctx, list.key, "dead letters", 1e18, offset, limit)
}

// DeadLetterCount returns the length of a list of dead letters: one store
// call.
func (b *Book) DeadLetterCount(ctx context.Context, list DeadLetterList) (int64, error) {
	if b.store == nil {
		return 0, nil
	}
	n, err := b.store.IndexCount(ctx, list.key)
	if err != nil {
		return 0, fmt.Errorf("record: counting dead letters: %w", err)
	}
	return n, nil
}

package middleware

import (
	"context"
	"time"
)

// A handoff's deadline: a handoff Baton sends on behalf of something that
// has a deadline of its own (a member of a broadcast, docs/broadcast.md)
// carries it in its request's context, and the edge that sends it stops
// retrying, cuts a try still running, and dead-letters the handoff when it
// passes. Unlike context.WithDeadline it cancels nothing: the handoff ends
// through the edge's verdict, with its record and dead letter written.

type deadlineKey struct{}

// WithDeadline gives the handoffs made with ctx the deadline d (the edge
// keeps the earlier of d and its own retry timeout).
func WithDeadline(ctx context.Context, d time.Time) context.Context {
	return context.WithValue(ctx, deadlineKey{}, d)
}

// DeadlineFromContext returns the deadline WithDeadline set on ctx, if any.
func DeadlineFromContext(ctx context.Context) (time.Time, bool) {
	d, ok := ctx.Value(deadlineKey{}).(time.Time)
	return d, ok
}

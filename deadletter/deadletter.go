// Package deadletter keeps a Baton's dead letters: the handoffs of its
// agent that failed and were stored, with their checkpoints, where they
// failed (the request path, package proxy, writes them). It owns:
//
//   - the index of dead letters by (peer, idempotency key), so that a
//     failed handoff is listed once, and not once its work is done: a
//     handoff delivered later with the same key resolves its dead letter,
//     one dead-lettered again supersedes it (index.go);
//   - replay, by an operator or by an edge's auto_replay when the peer's
//     breaker closes again (replay.go);
//   - the admin API: GET /v1/deadletters, GET and DELETE
//     /v1/deadletters/{id}, POST /v1/deadletters/{id}/replay (api.go).
//
// It reaches the request path through Options (send a record's checkpoint
// again on its edge; is a peer's breaker open), and the capabilities that
// care through its hooks (a trace abandoned: package compensation; an
// approved handoff's answer: package approval). It uses handoff/record,
// state, records, problem and config.
package deadletter

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
)

// Options are what the dead letters are built from.
type Options struct {
	Config *config.Config
	Book   *record.Book
	Log    *slog.Logger
	// Background runs fn beside the listeners, until shutdown.
	Background func(fn func(ctx context.Context))
	// Resend sends rec's checkpoint again on its edge, with its original
	// key, trace and hop (the request path's tries, breaker and record);
	// resp is nil when no answer came, and done ends its span.
	Resend func(ctx context.Context, rec *record.Record, first record.State, why string) (resp *http.Response, done func(), err error)
	// BreakerOpen reports whether the breaker of the edge to peer is open.
	BreakerOpen func(peer string) bool
}

// DeadLetters are this Baton's agent's dead letters.
type DeadLetters struct {
	o     Options
	agent string
	index *index

	mu        sync.Mutex
	replaying map[string]*atomic.Bool // by peer: an auto replay of the edge is running

	// Abandoned reports whether a trace was abandoned (package
	// compensation): its dead letters are not replayed. Nil: none is.
	Abandoned func(ctx context.Context, traceID string) (bool, error)
	// Dropped is told of a dead letter an operator dropped, and by whom
	// (package compensation may abandon its trace). Nil: nothing is.
	Dropped func(ctx context.Context, rec *record.Record, by string)
	// Answered keeps the answer to the replay of an approved handoff for
	// its agent's poll (package approval); body holds up to AnswerBytes+1
	// bytes of it. Nil: nothing keeps it.
	Answered    func(ctx context.Context, id string, resp *http.Response, body []byte)
	AnswerBytes int64
}

// New returns the dead letters of o.Config.Agent. It learns the agent's
// listed dead letters, and runs each auto_replay edge's replays, once the
// listeners start.
func New(o Options) *DeadLetters {
	d := &DeadLetters{o: o, agent: o.Config.Agent, replaying: map[string]*atomic.Bool{},
		index: newIndex(o.Book, o.Config.Records.Retention.D(), o.Log, o.Background)}
	if !o.Book.Enabled() {
		return d
	}
	o.Background(func(ctx context.Context) { d.index.load(ctx, d.agent) })
	for name := range o.Config.Peers {
		if e, ok := o.Config.OutEdge(name); ok && e.AutoReplay {
			every := max(o.Config.BreakerFor(name).OpenFor.D(), 100*time.Millisecond)
			o.Background(func(ctx context.Context) { d.autoReplay(ctx, name, every) })
		}
	}
	return d
}

// Dead implements proxy.DeadLetters: a dead letter stored supersedes an
// older one of the same key.
func (d *DeadLetters) Dead(rec *record.Record) { d.index.dead(rec) }

// Delivered implements proxy.DeadLetters: the dead letter of a handoff
// delivered with the same key, if any, is resolved by it.
func (d *DeadLetters) Delivered(rec *record.Record) { d.index.delivered(rec) }

// BreakerClosed replays the dead letters of the edge to peer, when the edge
// asks for auto_replay, as its breaker closes again.
func (d *DeadLetters) BreakerClosed(peer string) {
	if e, ok := d.o.Config.OutEdge(peer); ok && e.AutoReplay {
		d.o.Background(func(ctx context.Context) { d.ReplayEdge(ctx, peer) })
	}
}

// replayFlag is the edge's "an auto replay runs" flag.
func (d *DeadLetters) replayFlag(peer string) *atomic.Bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.replaying[peer]
	if f == nil {
		f = &atomic.Bool{}
		d.replaying[peer] = f
	}
	return f
}

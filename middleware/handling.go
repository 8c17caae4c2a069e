package middleware

// A Handling is one inbound handoff while the local agent handles it, and for
// a while after. The ingress middleware Handle begins one for every request it
// delivers to the agent. At egress, Identity and IdempotencyKey find the
// handling an outbound handoff is made for (correlate.go) and give the
// handoff a key derived from the handling's key, the peer and the call's
// position among the handling's calls to that peer, so that an agent that
// handles the same inbound handoff again (the chain resumed) sends the same
// keys and every call that completed before is answered from its receiver's
// dedupe window. A handling also learns where a chain it started stopped (a
// dead letter), so that the agent's failure answer carries it upstream and
// the Batons above do not retry it (retry pushback).

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/handoff/record"
)

// Handling is one inbound handoff the local agent is handling (or handled).
// Its identity fields are set before Begin and never change.
type Handling struct {
	// ID is the receipt's record id, sent to the agent as the baton.handling
	// member of W3C baggage.
	ID      string
	TraceID string
	// SpanID is the ingress span's id: the parent-id of traceparent as the
	// agent received it; Flags its trace flags.
	SpanID trace.SpanID
	Flags  trace.TraceFlags
	Hop    int
	From   string
	// Parent is the record of the inbound handoff in the sending Baton (its
	// Baton-Record), empty when what sent it runs no Baton or recorded
	// nothing: the trace's chain has the sender's entries.
	Parent string
	// Work reports that the inbound request may set the agent to work (not
	// a read beside another handling: handle.go): only such handlings count
	// for the one-in-flight rule of correlation.
	Work bool
	// Key is the inbound handoff's idempotency key scoped by its edge: the
	// root of the positional keys of the agent's calls.
	Key Scope
	// Contexts are the A2A contextId and taskId the inbound message named.
	Contexts []string
	Started  time.Time
	// Older is the handling of the same trace begun before this one: a
	// list the Handlings registry keeps, and reads and writes under its own
	// lock.
	Older *Handling
	// Budget is the budget of the chain the inbound handoff belongs to
	// (chain_budget.go), sent on with the agent's handoffs; BudgetNote
	// says why a budget the request carried was not taken.
	Budget     ChainBudget
	BudgetNote string

	lineage lineage // what the agent read within it, while several are in flight (lineage.go)
	done    atomic.Bool
	untied  atomic.Int32 // calls made while h was in flight that no handling took
	mu      sync.Mutex
	stopped string                 // the dead letter where a chain this handling started stopped
	calls   map[string][]slot      // by peer, in order of position
	journal *record.JournalSummary // what the call journal did with the handling's calls
	models  *record.ModelSummary   // the agent's model calls while it handled it
	modelN  atomic.Int32           // model calls begun (ModelCallBegun)
	skipped int                    // journal notes beyond record.MaxJournalNotes
}

// Scope is an idempotency key scoped by its edge (sender, receiver): what a
// receiver's dedupe window keys on, as a fixed-size digest.
type Scope [16]byte

// ScopeKey scopes key to the edge from → to.
func ScopeKey(from, to, key string) Scope {
	var buf [256]byte
	msg := appendField(buf[:0], from)
	msg = appendField(msg, to)
	msg = appendField(msg, key)
	sum := sha256.Sum256(msg)
	var s Scope
	copy(s[:], sum[:16])
	return s
}

// traceparent is the W3C traceparent of a call made for h: its trace, with
// the ingress span as parent.
func (h *Handling) traceparent() string {
	var b [55]byte
	copy(b[:], "00-")
	copy(b[3:], h.TraceID)
	b[35] = '-'
	sid := h.SpanID
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:], []byte{byte(h.Flags)})
	return string(b[:])
}

// NoteUntied counts a handoff the agent made, while h was in flight, that
// Baton could tie to no handling.
func (h *Handling) NoteUntied() { h.untied.Add(1) }

// Untied returns how many handoffs NoteUntied counted.
func (h *Handling) Untied() int { return int(h.untied.Load()) }

// Done reports whether the agent has answered the inbound handoff.
func (h *Handling) Done() bool { return h.done.Load() }

// Finish records that the agent answered.
func (h *Handling) Finish() {
	h.done.Store(true)
	h.lineage.drop()
}

// Reading begins an answer to one of the agent's calls made within h (src
// says what it is; call is the head of the call that fetched it), and
// returns what keeps it in h's lineage as the agent reads it.
func (h *Handling) Reading(src string, call []byte) Reading {
	return Reading{l: &h.lineage, i: h.lineage.begin(src, call)}
}

// Reading is an answer the agent is reading within a handling (Handling.Reading).
type Reading struct {
	l *lineage
	i int
}

// Read sets what the agent has read of the answer so far: it is kept as
// it is, up to the bounds, and head may later grow by append, never
// change. Each part counts as soon as the agent has it: its next call may
// be made before the answer's end is read.
func (r Reading) Read(head []byte) { r.l.grow(r.i, head) }

// Stop records that a handoff made for h became the dead letter id, or was
// answered with a chain that stopped at it; the first one is kept.
func (h *Handling) Stop(id string) {
	if id == "" {
		return
	}
	h.mu.Lock()
	if h.stopped == "" {
		h.stopped = id
	}
	h.mu.Unlock()
}

// StoppedAt returns the dead letter where a chain h started stopped, or "".
func (h *Handling) StoppedAt() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped
}

// NoteJournal applies f to the handling's journal summary, under the
// handling's lock.
func (h *Handling) NoteJournal(f func(*record.JournalSummary)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.journal == nil {
		h.journal = &record.JournalSummary{}
	}
	f(h.journal)
}

// NoteJournalSkip adds why an answer was not journaled to the handling's
// journal summary.
func (h *Handling) NoteJournalSkip(why string) {
	h.NoteJournal(func(s *record.JournalSummary) {
		if len(s.Skipped) < record.MaxJournalNotes {
			s.Skipped = append(s.Skipped, why)
		} else {
			h.skipped++
		}
	})
}

// JournalSummary returns a copy of the handling's journal summary, or nil
// when none of its calls was to a journaled destination.
func (h *Handling) JournalSummary() *record.JournalSummary {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.journal == nil {
		return nil
	}
	s := *h.journal
	s.Skipped = append([]string(nil), s.Skipped...)
	if h.skipped > 0 {
		s.Skipped = append(s.Skipped, "and "+strconv.Itoa(h.skipped)+" more")
	}
	return &s
}

// ModelCallBegun counts a model call the agent began for the handling and
// returns how many it has begun, this one included.
func (h *Handling) ModelCallBegun() int { return int(h.modelN.Add(1)) }

// NoteModelCall adds a model call to the handling's summary.
func (h *Handling) NoteModelCall(c record.ModelCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.models == nil {
		h.models = &record.ModelSummary{}
	}
	h.models.Add(c)
}

// ModelSummary returns a copy of what the agent's model calls did while
// it handled h, with the chain's budget; nil when it made none and its
// chain has no budget.
func (h *Handling) ModelSummary() *record.ModelSummary {
	h.mu.Lock()
	s := h.models.Clone()
	h.mu.Unlock()
	if s == nil && !h.Budget.Set() && h.BudgetNote == "" {
		return nil
	}
	if s == nil {
		s = &record.ModelSummary{}
	}
	if h.Budget.Set() {
		s.Budget = &record.BudgetView{Chain: h.Budget.Chain, Tokens: h.Budget.Tokens, CostUSD: h.Budget.CostUSD()}
	}
	s.BudgetNote = h.BudgetNote
	return s
}

// A slot is a position among a handling's calls to one peer.
type slot struct {
	fp      [32]byte // what the call is: method, target, body (fingerprint)
	state   slotState
	holders int  // calls in flight at this position
	sent    bool // a call at this position left the pod
}

type slotState uint8

const (
	slotInFlight slotState = iota
	slotAnswered           // a final answer reached the agent: the position is taken for good
	slotFailed             // no final answer: the agent's retry of the call takes it again
	slotUnused             // given up before anything left the pod: the next call takes it
)

// maxPositions bounds the positions kept per peer; calls past it get keys
// from their content.
const maxPositions = 4096

// take returns the position of a call with fingerprint fp to peer, 1-based,
// or 0 past maxPositions. A call identical to one still in flight or one that
// failed is the agent retrying it and takes its position; otherwise the call
// takes a position given up unused, or the next one.
func (h *Handling) take(peer string, fp [32]byte) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string][]slot{}
	}
	slots := h.calls[peer]
	for i := range slots {
		if s := &slots[i]; s.fp == fp && (s.state == slotInFlight || s.state == slotFailed) {
			s.state = slotInFlight
			s.holders++
			return i + 1
		}
	}
	for i := range slots {
		if slots[i].state == slotUnused {
			slots[i] = slot{fp: fp, holders: 1}
			return i + 1
		}
	}
	if len(slots) == maxPositions {
		return 0
	}
	h.calls[peer] = append(slots, slot{fp: fp, holders: 1})
	return len(slots) + 1
}

// settle records how one call at pos ended.
func (h *Handling) settle(peer string, pos int, o CallOutcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.calls[peer][pos-1]
	s.holders--
	s.sent = s.sent || o != CallUnsent
	switch {
	case o == CallAnswered:
		s.state = slotAnswered
	case s.state == slotAnswered || s.holders > 0:
	case s.sent:
		s.state = slotFailed
	default:
		s.state = slotUnused
	}
}

// CallOutcome is how an outbound call made for a handling ended.
type CallOutcome uint8

// The outcomes.
const (
	// CallAnswered: a final answer reached the agent.
	CallAnswered CallOutcome = iota + 1
	// CallFailed: the call left the pod but got no final answer (a dead
	// letter, a chain stopped below it, a duplicate still in flight, or the
	// agent went away).
	CallFailed
	// CallUnsent: the call was refused before it left the pod.
	CallUnsent
)

// Call is an outbound handoff's position among its handling's calls to its
// peer. Settle it once it is known how it ended; later settles are ignored.
type Call struct {
	h       *Handling
	peer    string
	pos     int
	settled atomic.Bool
}

// Position returns the call's position, 1-based.
func (c *Call) Position() int { return c.pos }

// Settle records how the call ended.
func (c *Call) Settle(o CallOutcome) {
	if c != nil && c.settled.CompareAndSwap(false, true) {
		c.h.settle(c.peer, c.pos, o)
	}
}

// positionKey is the key of the call at pos among the handling's calls to
// peer, as a quoted RFC 8941 string.
func positionKey(scope Scope, peer string, pos int) string {
	var buf [128]byte
	msg := appendField(buf[:0], "position")
	msg = append(msg, scope[:]...)
	msg = appendField(msg, peer)
	msg = binary.BigEndian.AppendUint32(msg, uint32(pos))
	return keyString("bp-", sha256.Sum256(msg))
}

// Package record is the one model for handoff records, checkpoints and dead
// letters. Every handoff is a Record with a state machine
//
//	sent → delivered(status)
//	sent → failed → dead → replayed → delivered | dead
//	held → approved → delivered | dead;  held → denied | expired
//	dead → delivered with ResolvedBy (resolved: the same key delivered)
//
// The sender's Baton writes the record, with the outbound request it is about
// to send (the checkpoint), before forwarding; the receiver's Baton writes a
// receipt, once the agent answered: delivered(status), or failed (the agent
// answered a failure, a 5xx or an A2A failed task inside a 2xx, or never
// saw the handoff). Each write appends a snapshot to the trace's hash chain, so an
// edited or deleted record is detectable (Verify). A Book stores and reads
// records through the state store.
//
// It owns the records' store keys and their hash chains. It uses state;
// the request path writes records, the capabilities read and act on them.
package record

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// State is where a record is in its state machine.
type State string

// The states.
const (
	Sent      State = "sent"
	Delivered State = "delivered"
	Failed    State = "failed"
	Dead      State = "dead"
	Replayed  State = "replayed"
	// A confirmation gate's states (docs/gates.md): held for a person's
	// decision; approved and being sent; denied; expired undecided.
	Held     State = "held"
	Approved State = "approved"
	Denied   State = "denied"
	Expired  State = "expired"
)

// Where an egress record's idempotency key came from.
const (
	KeyFromAgent    = "agent"    // the agent sent it
	KeyFromPosition = "position" // the handoff's causal position (docs/resume.md)
	KeyFromMessage  = "message"  // the A2A message id
	KeyFromContent  = "content"  // the trace, edge, request line and body
)

// How an egress handoff was tied to the inbound handoff its agent was
// handling.
const (
	CorrelatedByBaggage     = "baggage"     // the baton.handling member of W3C baggage
	CorrelatedByTraceparent = "traceparent" // traceparent as the agent received it
	CorrelatedByTrace       = "trace"       // the only handling of the trace
	CorrelatedByInFlight    = "in-flight"   // the one handling in flight at the Baton (the call carried no trace)
	CorrelatedByA2A         = "a2a"         // the A2A contextId or taskId
	CorrelatedByMCPSession  = "mcp-session" // an MCP tool call's session and JSON-RPC id (its key only)
	CorrelatedByLineage     = "lineage"     // what the agent read within exactly one handling in flight (its task, its calls' answers)
	CorrelationAmbiguous    = "ambiguous"   // the trace has several handlings: none chosen
)

// Side tells which Baton wrote the record.
type Side string

// The sides.
const (
	Egress  Side = "egress"  // the sender's Baton: the delegation record
	Ingress Side = "ingress" // the receiver's Baton: the receipt
)

// Record is one handoff as one Baton saw it.
type Record struct {
	ID       string `json:"id"`
	TraceID  string `json:"trace_id"`
	SpanID   string `json:"span_id"`
	ParentID string `json:"parent_id,omitempty"` // the record that caused this one
	Side     Side   `json:"side"`
	From     string `json:"from"`
	To       string `json:"to"`
	Hop      int    `json:"hop"`
	Key      string `json:"idempotency_key,omitempty"`
	Method   string `json:"method"`
	Target   string `json:"target"`
	// Call names the JSON-RPC call of an A2A or MCP handoff: its method,
	// and for an MCP tool call the tool ("tools/call search_web").
	Call string `json:"call,omitempty"`
	// RequestDigest is the RFC 9530 style sha-256 of the request body.
	RequestDigest string `json:"request_digest"`
	// Envelope summarises the handoff envelope, when the body carries one.
	Envelope *EnvelopeSummary `json:"envelope,omitempty"`
	// Shaping is what the sending Baton changed in the handoff's text for
	// the edge's token budget and field policy (docs/context.md).
	Shaping *Shaping `json:"shaping,omitempty"`
	// Trust lists trust labels on the payload; Grant the bounded grant sent
	// or received; SenderKeyID the verified signing key. Filled by the trust
	// features when enabled.
	Trust       []string `json:"trust,omitempty"`
	Grant       string   `json:"grant,omitempty"`
	SenderKeyID string   `json:"sender_key_id,omitempty"`
	// Caller says, on a receipt from a caller that runs no Baton named by
	// a callers edge, how it was identified: "jwt:<sub>", "bearer",
	// "network:<ip>" or "anonymous".
	Caller string `json:"caller,omitempty"`
	// KeySource says where the idempotency key came from (see the Key*
	// constants); Position is the handoff's position among the calls to its
	// peer in the handling of the inbound handoff it was made for (when the
	// key came from it), and Correlation how the handoff was tied to that
	// inbound handoff (see the Correlated* constants).
	KeySource   string `json:"key_source,omitempty"`
	Position    int    `json:"position,omitempty"`
	Correlation string `json:"correlation,omitempty"`
	// CorrelationEvidence says, for a handoff tied by lineage, what it
	// quoted of what its agent read within the handling.
	CorrelationEvidence string `json:"correlation_evidence,omitempty"`
	// Compensates names, on a compensating handoff, the record and side
	// effect it undoes: "<record id>/<effect>".
	Compensates string `json:"compensates,omitempty"`

	State    State   `json:"state"`
	Status   int     `json:"status,omitempty"`
	Attempts int     `json:"attempts"`
	Latency  float64 `json:"latency_ms"`
	Outcome  string  `json:"outcome,omitempty"`
	Error    string  `json:"error,omitempty"`
	// StoppedAt names the dead letter where the chain below this handoff
	// stopped (retry pushback: the handoff was not retried); ResolvedBy the
	// record whose handoff, with the same key, delivered this dead letter's
	// work when its chain resumed.
	StoppedAt  string `json:"stopped_at,omitempty"`
	ResolvedBy string `json:"resolved_by,omitempty"`
	// Approval is the confirmation gate's hold on the handoff, when one
	// held it: why, until when, and who decided what.
	Approval *Approval `json:"approval,omitempty"`
	// Effects are the declared side effects the receiver reported it
	// performed (docs/compensation.md): what abandoning the trace undoes.
	Effects []string `json:"side_effects,omitempty"`
	// Replayable is false when the checkpoint lacks the body (streamed or
	// over the cap): such a dead letter can be inspected but not replayed.
	Replayable bool `json:"replayable"`
	// Journal is what the call journal did with the agent's calls while it
	// handled this handoff (receipts only; docs/journal.md).
	Journal *JournalSummary `json:"journal,omitempty"`
	// Models is what the agent's model calls did and cost while it handled
	// this handoff (receipts only; docs/model-calls.md).
	Models *ModelSummary `json:"models,omitempty"`
	// UncorrelatedCalls counts the handoffs the agent made, while it handled
	// this one, that Baton could tie to no handling (receipts only): their
	// keys came from their content (docs/resume.md).
	UncorrelatedCalls int `json:"uncorrelated_calls,omitempty"`

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`

	// Request is the checkpoint: the outbound request as sent (egress only).
	// It is stored once, beside the record, not in the hash chain. It is
	// encoded when the record is first given to a Book (Write or
	// WriteLater), in the caller's goroutine: what Request holds, its Header
	// map included, may change after that without changing the checkpoint.
	Request *Request `json:"request,omitempty"`

	checkpointed bool       // the checkpoint is stored
	checkpoint   []byte     // the checkpoint encoded by the first write, until it is stored
	stored       bool       // a snapshot is in the chain: later writes are Updates
	queued       bool       // a write of it went through the Book's queue
	peer         string     // the peer it follows (FollowsPeer)
	waiter       chan error // the Write waiting for this snapshot: the flusher's copy only
}

// Update is what changes in a record after its first write. The first entry
// of a record in its trace's chain is the whole record; every later one is
// an Update, a third of the size, so that an outcome costs the store and the
// hash a fraction of a snapshot. Only these fields may change once a record
// is written (a Book writes nothing else of it again).
type Update struct {
	ID         string    `json:"id"`
	State      State     `json:"state"`
	Status     int       `json:"status,omitempty"`
	Attempts   int       `json:"attempts"`
	Latency    float64   `json:"latency_ms"`
	Outcome    string    `json:"outcome,omitempty"`
	Error      string    `json:"error,omitempty"`
	StoppedAt  string    `json:"stopped_at,omitempty"`
	ResolvedBy string    `json:"resolved_by,omitempty"`
	Approval   *Approval `json:"approval,omitempty"`
	Effects    []string  `json:"side_effects,omitempty"`
	Updated    time.Time `json:"updated"`
}

// apply sets r's changing fields to u's.
func (u *Update) apply(r *Record) {
	r.State, r.Status, r.Attempts, r.Latency = u.State, u.Status, u.Attempts, u.Latency
	r.Outcome, r.Error, r.StoppedAt, r.ResolvedBy, r.Updated = u.Outcome, u.Error, u.StoppedAt, u.ResolvedBy, u.Updated
	r.Approval, r.Effects = u.Approval, u.Effects
}

// Approval is a confirmation gate's hold on a handoff (docs/gates.md).
type Approval struct {
	// Gate names the rule that held the handoff.
	Gate string `json:"gate"`
	// Expires is when the hold ends undecided.
	Expires time.Time `json:"expires"`
	// Decision is approved, denied or expired once decided; By the
	// approver's identity, At when, and Reason what they said.
	Decision string     `json:"decision,omitempty"`
	By       string     `json:"by,omitempty"`
	At       *time.Time `json:"at,omitempty"`
	Reason   string     `json:"reason,omitempty"`
}

// The decisions.
const (
	DecisionApproved = "approved"
	DecisionDenied   = "denied"
	DecisionExpired  = "expired"
)

// JournalSummary counts what the call journal did with the calls an agent
// made to journaled destinations while it handled one inbound handoff.
type JournalSummary struct {
	// Hits were answered from the journal; Misses went out, and Journaled
	// of them had their answers kept.
	Hits      int `json:"hits"`
	Misses    int `json:"misses"`
	Journaled int `json:"journaled"`
	// SavedBytes and SavedTokens are what the hits did not fetch again:
	// response bytes, and model tokens by the provider's usage field.
	SavedBytes  int64 `json:"saved_bytes,omitempty"`
	SavedTokens int64 `json:"saved_tokens,omitempty"`
	// Skipped says why answers that went out were not journaled (at most
	// MaxJournalNotes of them, then a count).
	Skipped []string `json:"skipped,omitempty"`
}

// MaxJournalNotes bounds JournalSummary.Skipped.
const MaxJournalNotes = 8

// EnvelopeSummary is what a record keeps of a handoff envelope.
type Shaping struct {
	// Tokens is the handoff's text as sent, Before as the agent sent it,
	// counted by Tokenizer (bytes/4 is an estimate) against MaxTokens.
	Tokens    int    `json:"tokens"`
	Before    int    `json:"tokens_before"`
	MaxTokens int    `json:"max_tokens,omitempty"`
	Tokenizer string `json:"tokenizer"`
	// Dropped are the JSON pointers the field policy removed; Trimmed
	// those trimmed to meet the budget.
	Dropped []string `json:"dropped,omitempty"`
	Trimmed []string `json:"trimmed,omitempty"`
}

// EnvelopeSummary summarises a handoff's envelope.
type EnvelopeSummary struct {
	Digest        string  `json:"digest"`
	Version       string  `json:"schema_version,omitempty"`
	TaskID        string  `json:"task_id,omitempty"`
	Intent        string  `json:"intent,omitempty"`
	Completeness  float64 `json:"completeness"`
	OpenQuestions int     `json:"open_questions"`
	Unverified    int     `json:"unverified"`
	Violations    int     `json:"violations,omitempty"`
}

// encodeCheckpoint encodes r's checkpoint, once, if it has one not stored
// yet.
func (r *Record) encodeCheckpoint() {
	if r.Request != nil && !r.checkpointed && r.checkpoint == nil {
		r.checkpoint = r.Request.AppendJSON(make([]byte, 0, r.Request.encodedSize()))
	}
}

// wasStored notes that a write of r landed: its snapshot, and its
// checkpoint if it had one, are stored.
func (r *Record) wasStored() {
	r.checkpointed = r.checkpointed || r.Request != nil
	r.checkpoint = nil
	r.stored = true
	if r.waiter != nil {
		// The writer goes on as soon as its record is in, not once the
		// whole batch is (the relinks of other records' races).
		r.waiter <- nil
		r.waiter = nil
	}
}

// Request is a stored outbound request: the checkpoint a handoff can be
// resumed from.
type Request struct {
	Method    string      `json:"method"`
	URL       string      `json:"url"`
	Header    http.Header `json:"header"`
	Body      []byte      `json:"body,omitempty"`
	BodyBytes int64       `json:"body_bytes"`
	Truncated bool        `json:"truncated,omitempty"`
}

// Edge renders from→to.
func (r *Record) Edge() string { return r.From + "→" + r.To }

// NewID returns a record id in trace: the trace id, a dot and 16 random hex
// digits, so that the id alone finds the record's keys.
func NewID(traceID string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return traceID + "." + hex.EncodeToString(b[:])
}

// TraceOf returns the trace id inside a record id, or "" when id is not one.
func TraceOf(id string) string {
	t, rest, ok := strings.Cut(id, ".")
	if !ok || len(t) != 32 || len(rest) != 16 || !isHex(t) || !isHex(rest) {
		return ""
	}
	return t
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// A trace's records are one chain under the Redis Cluster hash tag {trace
// id}; each delegation record's checkpoint is attached to it by name.
func chainKey(traceID string) string  { return "{" + traceID + "}:records" }
func checkpointName(id string) string { return "cp:" + id }

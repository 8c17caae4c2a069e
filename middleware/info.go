package middleware

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// HeaderJournalReplayed marks an answer the call journal gave (package
// journal): the capabilities that see answers on the egress transport
// (model calls) tell a journal hit by it.
const HeaderJournalReplayed = "Baton-Journal-Replayed"

// Side tells which listener a request arrived on.
type Side uint8

// The two sides of a handoff.
const (
	Egress  Side = iota + 1 // from the local agent, outbound
	Ingress                 // from a peer's Baton, inbound to the local agent
)

func (s Side) String() string {
	switch s {
	case Egress:
		return "egress"
	case Ingress:
		return "ingress"
	}
	return "unknown"
}

// Info is the per-request state the middlewares share: one allocation per
// request, placed in the context by AccessLog and filled in by the
// middlewares after it.
type Info struct {
	Side  Side
	Agent string // this Baton's agent
	Start time.Time

	// From and To name the edge. At egress From is the local agent and To the
	// peer; at ingress From is the sending agent and To the local agent.
	From, To string
	// External is the host:port of a non-agent destination at egress; when
	// set the request is an external fetch, not a handoff.
	External string
	// Route names the base-URL route (external.routes) whose upstream
	// External is, when it is one's: the destination's name in metrics.
	Route string
	// Target is where the request is forwarded.
	Target *url.URL
	// MaxHops is the hop limit of the edge.
	MaxHops int
	// Hop is the handoff depth within the trace.
	Hop int
	// RecordID is this Baton's record of the handoff (the delegation record
	// at egress, the receipt at ingress); ParentRecord the record that caused
	// it (at egress the receipt of the inbound handoff in the same trace, at
	// ingress the sender's delegation record).
	RecordID, ParentRecord string
	// Body is the request body when Baton buffered it (replayable), nil when
	// it streams through.
	Body []byte
	// Buffered reports that Body holds the whole body (possibly empty).
	Buffered bool
	// replay is the request's buffered Body and GetBody (body.go).
	replay replayBody
	// Key is the idempotency key (unquoted) and KeyDerived whether Baton
	// derived it; KeySource says from what (record.KeyFrom*).
	Key        string
	KeyDerived bool
	KeySource  string
	// Handling is the inbound handoff the request belongs to: at ingress the
	// one Handle began for it, at egress the one the agent's handoff is made
	// for (nil when none was found); Correlation says how it was found
	// (record.CorrelatedBy*), and Call is the handoff's position among the
	// handling's calls to its peer, when its key came from it.
	Handling    *Handling
	Correlation string
	Call        *Call
	// CorrelationEvidence says, for a handoff tied by lineage, what it
	// quoted of what the agent read within its handling.
	CorrelationEvidence string
	// callHead is the head of the call's body that lineage read to tie it;
	// wrote the body as the agent wrote it, when Baton rewrote it.
	callHead, wrote []byte
	// StoppedAt names, at ingress, the dead letter where the chain below
	// the agent stopped when its failure answer carries it upstream (retry
	// pushback).
	StoppedAt string
	// AgentFailed reports, at ingress, an answer in which the agent says,
	// inside a 2xx, that it failed: an A2A failed task or a JSON-RPC
	// internal error to an A2A send (A2AFailed). Its receipt is failed.
	AgentFailed bool
	// KeyMismatch reports an answer replayed from the dedupe window for a
	// positional key whose first request had a different body.
	KeyMismatch bool
	// TraceID is the hex trace id of Baton's span.
	TraceID string
	// TraceparentIn is traceparent as it arrived, before Trace rewrote it
	// (the sender's signature covers it).
	TraceparentIn string
	// Nonce is the verified signature's nonce, for Dedupe to claim.
	Nonce *state.ClaimOp
	// Signed reports a verified signature; SenderKeyID names its key.
	Signed      bool
	SenderKeyID string
	// Caller is, at ingress, the caller that runs no Baton a callers edge
	// named (callers.go); From is then its edge's name. Nil for a Baton's
	// handoff and for a caller no edge names.
	Caller *trust.Caller
	// Posture is how the peer's content is taken: trusted, evaluate or
	// untrusted.
	Posture string
	// GrantIn is the grant the sender gave (ingress), or the one this
	// agent received in the trace (egress); GrantOut is the encoded grant
	// sent on (egress).
	GrantIn  *trust.Grant
	GrantOut string
	// Uncorrelated reports an outbound handoff Baton could not tie to an
	// inbound one; CorrelatedTrace names the inbound trace an A2A context
	// tied it to instead of its traceparent.
	Uncorrelated    bool
	CorrelatedTrace string
	// Contract is the envelope check, when the body carries an envelope;
	// ContractPolicy the edge's policy it was checked against.
	Contract       *handoff.Result
	ContractPolicy handoff.Policy
	// Delivered reports that the request went on past every check: to the
	// local agent at ingress, towards the peer or external host at egress.
	Delivered bool
	// keeping is closed once the fingerprints of the untrusted text the
	// request brings are kept (Taint.Ingress); nil when there was nothing
	// to wait for.
	keeping chan struct{}
	// DeadLetter is the record id of the dead letter the handoff became
	// (egress).
	DeadLetter string
	// SignatureFailure and PolicyDenial name why this Baton refused the
	// request, when it did for its signature or by policy: a reason from a
	// small fixed set, as metrics label it.
	SignatureFailure, PolicyDenial string
	// Dedupe is what the ingress dedupe window did with the request.
	Dedupe DedupeOutcome
	// RPC is set when the request is JSON-RPC (A2A).
	RPC *RPC
	// Labels are the handoff's untrusted-content labels (nil: none);
	// Injection the injection signal on its untrusted spans (nil: none);
	// InjectionUnscored how many bytes of them the scan left out.
	// TLSIdentity is the SPIFFE ID of the connection's client certificate
	// at ingress (docs/tls.md).
	TLSIdentity string
	// Compensation is set on a handoff Baton makes to undo a side effect.
	Compensation *Compensation
	// Shaping is what the edge's token budget and field policy did to the
	// handoff (docs/context.md).
	Shaping           *record.Shaping
	Labels            *trust.Labels
	Injection         *InjectionSignal
	InjectionUnscored int
	// ChainBudget is, at ingress, the budget of the chain the request
	// belongs to (chain_budget.go); BudgetNote says why a budget header
	// was not taken; budgetHeader is a caller's header, kept by Callers
	// before it removes the Baton-* headers.
	ChainBudget  ChainBudget
	BudgetNote   string
	budgetHeader string
	// Operation and Model, when set, name the egress span ("chat gpt-4o")
	// and its gen_ai.operation.name ("chat") instead of the defaults: a
	// model call's (package modelcall sets them). The name is made only for
	// a span that records.
	Operation, Model string
	// Understood is what the package that understood the request keeps of
	// it for the transports after its own (modelcall's call), so that none
	// of them needs a context of its own.
	Understood any
	// Err is the transport error, if any, for the access log.
	Err error

	rec *recorder
}

// SenderRunsNoBaton reports, at ingress, whether the sender runs no Baton:
// it sent no Baton-Agent, or a callers edge named it. Such a sender is a
// chain's entry: its answer carries the key the handling ran under.
func (i *Info) SenderRunsNoBaton() bool { return i.From == "" || i.Caller != nil }

// Handoff reports whether the request is a handoff between agents (as
// opposed to an external fetch).
func (i *Info) Handoff() bool { return i.External == "" }

// ExternalName names an external fetch's destination: its route's name,
// else its host:port ("" for a handoff).
func (i *Info) ExternalName() string {
	if i.Route != "" {
		return i.Route
	}
	return i.External
}

// Edge renders the edge as "from→to", or "agent→host:port" for an external
// fetch.
func (i *Info) Edge() string {
	if i.External != "" {
		return edgeName(i.Agent, i.External)
	}
	return edgeName(i.From, i.To)
}

// edgeNames interns edge names: logs, metrics, spans and the caches keyed by
// edge ask for it several times per request, and a handful of edges carry
// nearly all of them. Past maxEdgeNames (names from unauthenticated senders
// are not bounded otherwise) a name is built each time.
var edgeNames = struct {
	sync.RWMutex
	m map[[2]string]string
}{m: map[[2]string]string{}}

const maxEdgeNames = 4096

func edgeName(from, to string) string {
	k := [2]string{from, to}
	edgeNames.RLock()
	name, ok := edgeNames.m[k]
	edgeNames.RUnlock()
	if ok {
		return name
	}
	name = from + "→" + to
	edgeNames.Lock()
	if len(edgeNames.m) < maxEdgeNames {
		edgeNames.m[k] = name
	}
	edgeNames.Unlock()
	return name
}

// Status returns the status written so far (0 before headers).
func (i *Info) Status() int {
	if i.rec == nil {
		return 0
	}
	return i.rec.status
}

// Written reports whether response headers have been sent.
func (i *Info) Written() bool { return i.rec != nil && i.rec.status != 0 }

type infoKey struct{}

// InfoFromContext returns the request's Info, or nil outside the chain.
func InfoFromContext(ctx context.Context) *Info {
	i, _ := ctx.Value(infoKey{}).(*Info)
	return i
}

// WithInfo returns a context carrying i (for tests and for callers that
// assemble their own chain).
func WithInfo(ctx context.Context, i *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, i)
}

// Detached is context.WithoutCancel(ctx) carrying i, for work that outlives
// the request (the answer a dedupe window keeps). With i on top, the
// commonest lookup ends there and the others walk through the detached
// context inside the context package; made on it directly, each lookup
// would box it, an allocation a lookup.
func Detached(ctx context.Context, i *Info) context.Context {
	return WithInfo(context.WithoutCancel(ctx), i)
}

// infoContext is the context AccessLog gives a request: its parent, the
// request's Info and the recorder behind Info.Status, in one allocation
// where WithInfo and two new objects would take three.
type infoContext struct {
	context.Context
	in  Info
	rec recorder
}

func (c *infoContext) Value(key any) any {
	if _, ok := key.(infoKey); ok {
		return &c.in
	}
	return c.Context.Value(key)
}

// info returns the Info of r, creating a detached one when the request did
// not pass through AccessLog (tests of a single middleware).
func info(r *http.Request) *Info {
	if i := InfoFromContext(r.Context()); i != nil {
		return i
	}
	return &Info{}
}

// InjectionSignal is what the scan found on a handoff's untrusted spans:
// the highest score, the reasons and the pointers of the flagged spans, and
// how many bytes of them were left unscored.
type InjectionSignal struct {
	Score    float64
	Reasons  []string
	Pointers []string
	Unscored int
}

// AwaitKept waits until the fingerprints of the untrusted text the request
// brings are kept, which Taint.Ingress starts and lets run while the
// request passes the checks after it: the agent must not get text that its
// Baton would not recognise in the agent's own handoffs.
func (in *Info) AwaitKept() {
	if in.keeping != nil {
		<-in.keeping
	}
}

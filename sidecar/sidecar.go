// Package sidecar assembles one Baton. It builds the request path (package
// proxy: the listeners, destination resolution, an edge's tries and their
// verdict, the transport, the error mapping) and plugs into it the
// capabilities built on top of it, each a package of its own. It is the one
// place where those packages meet: read New and plug top to bottom to see
// what a Baton is made of, routes.go for every admin path and who serves
// it, and docs/architecture.md for why.
//
// It may use every package of Baton; none may use it but the command and
// the tests that run whole Batons.
package sidecar

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/batonproxy/baton/approval"
	"github.com/batonproxy/baton/broadcast"
	"github.com/batonproxy/baton/compensation"
	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/console"
	"github.com/batonproxy/baton/contextref"
	"github.com/batonproxy/baton/deadletter"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/journal"
	"github.com/batonproxy/baton/mcpsession"
	"github.com/batonproxy/baton/mesh"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/modelcall"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/tlsintercept"
)

// Baton is one assembled Baton: its request path, with the capabilities
// plugged in. Start, Shutdown and the listeners' addresses are the
// request path's.
type Baton struct {
	*proxy.Server

	// Records serves the records of handoffs: traces, one record.
	Records *records.API
	// DeadLetters are the agent's failed handoffs, to replay or drop.
	DeadLetters *deadletter.DeadLetters
	// Compensator keeps side effects and abandons traces.
	Compensator *compensation.Compensator
	// Approvals hold the handoffs confirmation gates match.
	Approvals *approval.Approvals
	// Console is the operator console.
	Console *console.Console
	// Journal answers the agent's repeated calls from their first answers.
	Journal *journal.Journal
	// ModelCalls understands, counts and bounds the agent's model calls.
	ModelCalls *modelcall.Calls
	// MCPSessions knows who opened each session of the agent's MCP server.
	MCPSessions *mcpsession.Sessions
	// ContextRefs pass handoffs' artifacts by reference and hold them to
	// the receivers' token budgets.
	ContextRefs *contextref.Refs
	// Broadcaster sends one handoff to the members of a group, or to the
	// peers a request lists.
	Broadcaster *broadcast.Broadcaster
	Mesh        *mesh.Announcer
	// TLSIntercept is nil unless intercept.tls lists destinations.
	TLSIntercept *tlsintercept.Interceptor
}

// New assembles a Baton from o; nothing listens until Start.
func New(o proxy.Options) (*Baton, error) {
	b := &Baton{}
	o.Plug = b.plug
	srv, err := proxy.New(o)
	if err != nil {
		return nil, err
	}
	b.Server = srv
	return b, nil
}

// plug builds the capabilities from the parts the request path shares, and
// says where each plugs in.
func (b *Baton) plug(p *proxy.Parts) (proxy.Plugins, error) {
	var pl proxy.Plugins
	c := p.Config

	// Records: traces and records on the admin API (docs/records.md).
	b.Records = &records.API{Book: p.Book, Log: p.Log}

	// Dead letters: resolved by key when their handoff is delivered later,
	// replayed by hand or by auto_replay when a breaker closes
	// (docs/resume.md).
	b.DeadLetters = deadletter.New(deadletter.Options{Config: c, Book: p.Book, Log: p.Log,
		Background: p.Background, Resend: p.Resend, BreakerOpen: p.BreakerOpen})
	pl.DeadLetters, pl.BreakerClosed = b.DeadLetters, b.DeadLetters.BreakerClosed

	// Compensation: the side effects each answer reports, and abandoning
	// a trace, which undoes them through the egress chain
	// (docs/compensation.md). An abandoned trace's dead letters are not
	// replayed; a dropped one may abandon its trace.
	var err error
	b.Compensator, err = compensation.New(compensation.Options{Config: c, Store: p.Store, Book: p.Book, Log: p.Log,
		Meters: p.Meters, Background: p.Background, Egress: p.Egress})
	if err != nil {
		return pl, err
	}
	pl.Answered = b.Compensator.Answered // and the mesh's, below
	b.DeadLetters.Abandoned, b.DeadLetters.Dropped = b.Compensator.Abandoned, b.Compensator.Dropped

	// Confirmation gates: an edge's handoffs held for a person's decision,
	// polled by the agent on the egress listener (docs/gates.md). The
	// replay of an approved handoff keeps its answer for that poll.
	b.Approvals, err = approval.New(approval.Options{Config: c, Store: p.Store, Book: p.Book, Log: p.Log,
		Meters: p.Meters, Env: p.Env, Signer: p.Signer, Background: p.Background, Resend: p.Resend,
		EgressAddr: p.EgressAddr})
	if err != nil {
		return pl, err
	}
	if b.Approvals.Gated() {
		pl.Gate = b.Approvals
	}
	pl.AgentPaths = map[string]http.Handler{approval.PathPrefix: http.HandlerFunc(b.Approvals.Poll)}
	b.DeadLetters.Answered, b.DeadLetters.AnswerBytes = b.Approvals.KeepAnswer, approval.MaxAnswerBytes

	// The mesh: this Baton announces itself in the store, with its
	// outbound edges' last minute, and lists the others (docs/console.md).
	b.Mesh = mesh.New(mesh.Options{Store: p.Store, Log: p.Log, Agent: c.Agent, Metrics: p.Metrics, Served: p.Served,
		TLSIdentity: tlsIdentity(c),
		Addrs:       func() (string, string, string) { return p.EgressAddr(), p.IngressAddr(), p.AdminAddr() }})
	p.Background(b.Mesh.Run)
	answered := pl.Answered
	pl.Answered = func(rec *record.Record, resp *http.Response) {
		answered(rec, resp)
		b.Mesh.Answered(rec)
	}

	// The call journal: at egress, the answers to the agent's calls to
	// journaled destinations, kept per handling, answer its re-run
	// (docs/journal.md).
	b.Journal, err = journal.New(journal.Options{Config: c, Store: p.Store, Log: p.Log, Meters: p.Meters,
		Env: p.Env, Signer: p.Signer})
	if err != nil {
		return pl, err
	}

	// Model calls: understood as they pass, on both sides of the journal
	// (a journal hit is seen, and never refused), counted per handling,
	// agent and chain, and bounded by their chain's budget and the calls
	// per handling (docs/model-calls.md).
	b.ModelCalls, err = modelcall.New(modelcall.Options{Config: c, Store: p.Store, Log: p.Log, Meters: p.Meters})
	if err != nil {
		return pl, err
	}
	pl.EgressTransport = func(next http.RoundTripper) http.RoundTripper {
		return b.ModelCalls.Observe(b.Journal.Transport(b.ModelCalls.Guard(next)))
	}
	pl.HandlingEnded = func(h *middleware.Handling) {
		b.Journal.HandlingEnded(h)
		b.ModelCalls.HandlingEnded(h)
	}

	// The console: pages over all of the above (docs/console.md). The
	// chains that cost most are the model calls' index, handed over
	// through the console's own interface.
	b.Console = console.New(console.Options{Config: c, Book: p.Book, Log: p.Log, Metrics: p.Metrics, Mesh: p.Store,
		Peers: slices.Collect(maps.Keys(c.Peers)), Identity: b.Approvals.Identity,
		DeadLetters: b.DeadLetters, Approvals: b.Approvals, Compensator: b.Compensator,
		Spending: costlyChains{b.ModelCalls}})

	// MCP sessions: at ingress, who opened each session of the agent's
	// MCP server (docs/mcp.md).
	b.MCPSessions = mcpsession.New(c.Agent, p.Store, p.Log)
	pl.MCPSessions, pl.IngressAnswer = b.MCPSessions, b.MCPSessions.Bind

	// Context by reference and token budgets: large artifacts leave by
	// reference and are inlined or left for the receiver to read on its
	// egress listener; an edge's budget and field policy shape what leaves
	// (docs/context.md). The agent's reads of untrusted content are
	// remembered for its labels.
	b.ContextRefs, err = contextref.New(contextref.Options{Config: c, Store: p.Store, Book: p.Book, Log: p.Log,
		Meters: p.Meters, Handlings: p.Handlings, Labels: p.Taint, Egress: p.Egress})
	if err != nil {
		return pl, err
	}
	pl.ContextOut, pl.ContextIn = b.ContextRefs.Egress, b.ContextRefs.Ingress
	pl.AgentPaths[contextref.PathPrefix] = http.HandlerFunc(b.ContextRefs.Serve)

	// Broadcast: destination resolution asks it whether a request goes to
	// a group or to the peers it lists, and it sends each member a handoff
	// of its own, from right after the idempotency key, to the peers'
	// routes as resolution has them (docs/broadcast.md).
	b.Broadcaster = broadcast.New(broadcast.Options{Config: c, Peers: p.Peers})
	pl.Broadcasts, pl.FanOut = b.Broadcaster, b.Broadcaster.FanOut

	// TLS interception: the egress terminates the TLS of the destinations
	// intercept.tls lists, with leaves of this Baton's CA, whose bundle is
	// published for the agent to trust (docs/tls-interception.md).
	if c.Intercept.TLS.Enabled() {
		if b.TLSIntercept, err = tlsintercept.New(c, p.Meters, p.Log); err != nil {
			return pl, err
		}
		pl.TLSIntercept = b.TLSIntercept
	}

	pl.Admin = b.adminRoutes(c.AdminToken, c.Agent, c.Profiling)
	return pl, nil
}

// costlyChains gives the console the chains whose model calls cost most
// (modelcall's index), so that the console need not import modelcall.
type costlyChains struct{ mc *modelcall.Calls }

func (c costlyChains) CostlyChains(ctx context.Context, n int) ([]console.ChainCost, error) {
	cs, err := c.mc.Costly(ctx, n)
	out := make([]console.ChainCost, len(cs))
	for i, s := range cs {
		out[i] = console.ChainCost{TraceID: s.TraceID, CostUSD: s.CostUSD, Tokens: s.Tokens, Priced: s.Priced}
	}
	return out, err
}

// tlsIdentity is the SPIFFE ID this Baton presents, "" without TLS.
func tlsIdentity(c *config.Config) string {
	if c.TLS == nil {
		return ""
	}
	path := "/agent/" + c.Agent
	if c.TLS.IDPath != "" {
		path = strings.ReplaceAll(c.TLS.IDPath, "{agent}", c.Agent)
	}
	return "spiffe://" + c.TLS.TrustDomain + path
}

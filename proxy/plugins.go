package proxy

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// The request path and the capabilities built on it meet here. New builds
// the parts every capability may use (Parts), hands them to Options.Plug,
// which builds the capabilities (package sidecar does), and plugs what it
// returns (Plugins) into the listeners' chains, the edges and the admin
// listener. The request path knows a capability only by these shapes; it
// never imports one.

// Parts are what the request path shares with the capabilities plugged
// into it.
type Parts struct {
	Config *config.Config
	// Store is the state store, measured (baton_store_* metrics).
	Store state.Store
	// Book writes and reads handoff records, checkpoints and dead letters.
	Book   *record.Book
	Log    *slog.Logger
	Meters metric.MeterProvider // nil: no metrics
	// Env reads environment variables.
	Env func(string) string
	// Handlings are the inbound handoffs the agent is handling.
	Handlings middleware.Handlings
	// Background runs fn beside the listeners once they start, until
	// Shutdown (at once when they already run).
	Background func(fn func(ctx context.Context))
	// Signer is this Baton's identity key (nil: it signs nothing).
	Signer *trust.Signer
	// Resend sends rec's checkpoint again on its edge, with its original
	// idempotency key, trace and hop, through the edge's breaker and tries,
	// and records the outcome on rec (Server.Resend).
	Resend func(ctx context.Context, rec *record.Record, first record.State, why string) (*http.Response, func(), error)
	// BreakerOpen reports whether the breaker of the edge to peer is open.
	BreakerOpen func(peer string) bool
	// Egress is the egress chain a handoff of the agent's goes through (for
	// Baton's own handoffs, such as compensations), once it is built.
	Egress func() http.Handler
	// EgressAddr is the egress listener's address, once it listens;
	// IngressAddr and AdminAddr the others'.
	EgressAddr, IngressAddr, AdminAddr func() string
	// Metrics serves this Baton's metrics (GET /metrics), or is nil.
	Metrics http.Handler
	// Served counts the requests the egress and ingress listeners have
	// served (always 0 without metrics): while it stays the same, nothing
	// the metrics say has changed.
	Served func() int64
	// Taint labels untrusted content (docs/untrusted.md); RememberRead
	// remembers what the agent read from an untrusted source.
	Taint *middleware.Taint
	// Peers are the routes to the configured peers, as destination
	// resolution has them.
	Peers PeerRoutes
}

// Plugins are the capabilities plugged into the request path. A nil field
// plugs nothing there.
type Plugins struct {
	// MCPSessions knows which agent opened each MCP session of the server
	// this Baton fronts; IngressAnswer sees each answer of the local agent
	// before it leaves (binding a session it opened).
	MCPSessions   middleware.MCPSessions
	IngressAnswer func(resp *http.Response)

	// ContextOut shapes a handoff's context on its way out (package
	// contextref: artifacts passed by reference, the edge's token budget
	// and field policy). It sits in the egress chain after the
	// untrusted-content labels and before the envelope contract.
	// ContextIn gives the agent referenced content as its inbound edge
	// delivers it; it sits in the ingress chain after the MCP rules and
	// before the envelope contract.
	ContextOut, ContextIn func(http.Handler) http.Handler

	// EgressTransport wraps the transport every egress request leaves by,
	// handoffs and fetches alike (package journal answers repeated calls
	// from the journal). HandlingEnded is told of each handling the agent
	// answered.
	EgressTransport func(next http.RoundTripper) http.RoundTripper
	HandlingEnded   func(h *middleware.Handling)

	// Broadcasts are asked by destination resolution whether an egress
	// request is a broadcast, to a group or to the peers it lists, and
	// route one (package broadcast). FanOut sends a routed broadcast to each
	// member through the rest of the egress chain, each a handoff of its
	// own; it sits right after the idempotency key. Nil: no broadcasts.
	Broadcasts Broadcasts
	FanOut     func(http.Handler) http.Handler

	// Gate is asked, in front of the edge to a peer, whether to hold a
	// handoff for a person's decision (package approval). Nil: no edge
	// holds.
	Gate Gate
	// Answered sees each answer an edge's handoff got, with its record
	// before it is written (package compensation keeps the side effects it
	// reports). It may read the body ahead, leaving it whole.
	Answered func(rec *record.Record, resp *http.Response)
	// DeadLetters is told of each dead letter stored and each handoff
	// delivered (package deadletter resolves dead letters by key).
	DeadLetters DeadLetters
	// BreakerClosed is told when the breaker of the edge to peer closes
	// again (package deadletter's auto replay).
	BreakerClosed func(peer string)

	// TLSIntercept lists the destinations whose TLS the egress terminates
	// (package tlsintercept): a CONNECT to one, or in transparent mode a
	// redirected TLS connection naming one. Nil: none; every HTTPS
	// connection is tunnelled as it is.
	TLSIntercept TLSInterceptor

	// Admin adds the capabilities' routes to the admin listener, beside
	// /healthz, /readyz and /metrics (sidecar/routes.go lists them).
	Admin func(r chi.Router)
	// AgentPaths serve the agent on the egress listener: an origin-form
	// request whose path starts with a key goes to its handler instead of
	// the egress chain (a handler may still pass it on, through
	// Parts.Egress). The keys must not be prefixes of one another.
	AgentPaths map[string]http.Handler
}

// Gate holds an outbound edge's handoffs for a person's decision. It sits
// in front of the edge to peer (gatedEdge): Hold is asked before the edge
// records and sends a handoff (never a replay, nor an approved handoff):
// an answer or an error is the handoff's, and nothing is sent; nil and no
// error send it on. newRecord makes the handoff's record and checkpoint as
// the edge would.
type Gate interface {
	Hold(peer string, req *http.Request, in *middleware.Info, newRecord func() *record.Record) (*http.Response, error)
}

// Broadcasts are the broadcasts destination resolution asks about. It asks
// Listed of every egress request before anything else, and IsGroup of a
// Host that names no peer (on port 80 or none); for either, Route resolves
// the request instead of it.
type Broadcasts interface {
	// Listed reports whether r lists the peers it is broadcast to, which
	// makes it a broadcast whatever its destination.
	Listed(r *http.Request) bool
	// IsGroup reports whether name is a broadcast group.
	IsGroup(name string) bool
	// Route resolves r into in as a broadcast to group, or, when group is
	// empty, to the peers r lists, and passes it on to next; or refuses it.
	Route(w http.ResponseWriter, r *http.Request, in *middleware.Info, group string, next http.Handler)
}

// TLSInterceptor terminates the TLS of the destinations it lists, with
// certificates of this Baton's CA (connect.go).
type TLSInterceptor interface {
	// Listed reports whether TLS to host:port is terminated here.
	Listed(host string, port uint16) bool
	// ServerConfig answers the agent's handshake for host:port: a
	// certificate for host, TLS 1.2 or later, h2 and http/1.1.
	ServerConfig(host string, port uint16) *tls.Config
	// Refused is told of an agent that did not complete the handshake for
	// host:port (a client that pins its server's certificate, or does not
	// trust the CA).
	Refused(host string, port uint16, err error)
}

// PeerRoutes are the routes destination resolution has to the configured
// peers.
type PeerRoutes interface {
	// PeerRoute returns peer's URL and the hop limit of the edge to it; ok
	// is false when peer is not a configured peer.
	PeerRoute(peer string) (target *url.URL, maxHops int, ok bool)
}

// DeadLetters is told of the edges' outcomes.
type DeadLetters interface {
	// Dead: rec was stored as a dead letter.
	Dead(rec *record.Record)
	// Delivered: rec's handoff was answered.
	Delivered(rec *record.Record)
}

// orPass returns mw, or when a capability plugs nothing there, a
// middleware that adds nothing to the chain.
func orPass(mw func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	if mw != nil {
		return mw
	}
	return func(next http.Handler) http.Handler { return next }
}

// plugged returns what Options.Plug makes of parts (nothing plugged when
// there is no Plug).
func (o Options) plugged(parts *Parts) (Plugins, error) {
	if o.Plug == nil {
		return Plugins{}, nil
	}
	return o.Plug(parts)
}

// egressTransport is next as the plugged capabilities wrap it.
func (p Plugins) egressTransport(next http.RoundTripper) http.RoundTripper {
	if p.EgressTransport == nil {
		return next
	}
	return p.EgressTransport(next)
}

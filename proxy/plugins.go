package proxy

import (
	"context"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
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
}

// Plugins are the capabilities plugged into the request path. A nil field
// plugs nothing there.
type Plugins struct {
	// MCPSessions knows which agent opened each MCP session of the server
	// this Baton fronts; IngressAnswer sees each answer of the local agent
	// before it leaves (binding a session it opened).
	MCPSessions   middleware.MCPSessions
	IngressAnswer func(resp *http.Response)
}

// plugged returns what Options.Plug makes of parts (nothing plugged when
// there is no Plug).
func (o Options) plugged(parts *Parts) (Plugins, error) {
	if o.Plug == nil {
		return Plugins{}, nil
	}
	return o.Plug(parts)
}

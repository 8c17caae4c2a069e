// Package sidecar assembles one Baton. It builds the request path (package
// proxy: the listeners, destination resolution, an edge's tries and their
// verdict, the transport, the error mapping) and plugs into it the
// capabilities built on top of it, each a package of its own. It is the one
// place where those packages meet: read New top to bottom to see what a
// Baton is made of, and docs/architecture.md for why.
//
// It may use every package of Baton; none may use it but the command and
// the tests that run whole Batons.
package sidecar

import (
	"github.com/batonproxy/baton/mcpsession"
	"github.com/batonproxy/baton/proxy"
)

// Baton is one assembled Baton: its request path, with the capabilities
// plugged in. Start, Shutdown and the listeners' addresses are the
// request path's.
type Baton struct {
	*proxy.Server
	// MCPSessions knows who opened each session of the agent's MCP server.
	MCPSessions *mcpsession.Sessions
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

	// MCP sessions: at ingress, who opened each session of the agent's
	// MCP server (docs/mcp.md).
	b.MCPSessions = mcpsession.New(p.Config.Agent, p.Store, p.Log)
	pl.MCPSessions, pl.IngressAnswer = b.MCPSessions, b.MCPSessions.Bind

	return pl, nil
}

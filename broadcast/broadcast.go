// Package broadcast sends one handoff to several agents (docs/broadcast.md):
// the agent sends one request to a group (Host: <group>, groups.<name> in
// config) or to the peers a Baton-Broadcast header lists, and its Baton
// sends it to each member as a handoff of its own, with its own key
// (derived from the broadcast's key and the member), record, retries,
// breaker and dead letter. The agent gets one answer: every member's
// status and body in one JSON document, or the problem
// broadcast-incomplete.
//
// It owns the Baton-Broadcast and Baton-Broadcast-Mode headers, routing a
// broadcast once destination resolution finds one (route.go), fanning it
// out to its members within its deadline (run.go), and the answer document
// (answer.go). It has no store keys, metrics or admin routes of its own:
// each member's handoff is recorded, measured and dead-lettered by the
// edge that sends it.
//
// It reaches the request path through Options (the configured groups, the
// routes to the peers); the request path asks it, at destination
// resolution, whether a request is a broadcast and has it route one, and
// runs its FanOut middleware right after the idempotency key. It uses
// middleware (the request's Info, member keys, a handoff's deadline),
// config and problem.
package broadcast

import (
	"net/url"

	"github.com/batonproxy/baton/config"
)

// The headers with which an agent broadcasts to peers it lists, whatever
// its Host: Header lists them (comma separated), HeaderMode says when the
// broadcast is met (all, any or quorum=N; all by default). Both are removed
// before anything is sent.
const (
	Header     = "Baton-Broadcast"
	HeaderMode = "Baton-Broadcast-Mode"
)

// adHocGroup is the edge name of a broadcast to a Baton-Broadcast list:
// one name for all of them, so that metrics and positions stay bounded.
const adHocGroup = "broadcast"

// Peers are the routes to the configured peers, as destination resolution
// has them (proxy.Parts.Peers).
type Peers interface {
	// PeerRoute returns peer's URL and the hop limit of the edge to it; ok
	// is false when peer is not a configured peer.
	PeerRoute(peer string) (target *url.URL, maxHops int, ok bool)
}

// Options are what a Broadcaster is built from.
type Options struct {
	// Config gives the agent's name, the groups, and limits.max_body_bytes,
	// which bounds each member's answer kept for the document.
	Config *config.Config
	// Peers are the routes to the members.
	Peers Peers
}

// Broadcaster routes broadcasts and sends them to their members.
type Broadcaster struct {
	agent   string
	peers   Peers
	groups  map[string]*spec
	maxBody int64 // bounds each member's answer kept for the document
}

// New returns the broadcaster of o.Config's groups.
func New(o Options) *Broadcaster {
	c := o.Config
	b := &Broadcaster{agent: c.Agent, peers: o.Peers, groups: make(map[string]*spec, len(c.Groups)),
		maxBody: c.Limits.MaxBodyBytes}
	for name, g := range c.Groups {
		b.groups[name] = &spec{name: name, Group: g}
	}
	return b
}

// spec is a resolved broadcast: its group's name and settings.
type spec struct {
	name string
	config.Group
}

// needed is how many members must answer 2xx for the broadcast's mode.
func (g *spec) needed() int {
	switch g.Mode {
	case config.BroadcastAny:
		return 1
	case config.BroadcastQuorum:
		return g.Quorum
	}
	return len(g.Members)
}

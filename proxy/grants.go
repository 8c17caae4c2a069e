package proxy

import (
	"time"

	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// grantBook remembers, per trace, the grant the inbound handoffs of the
// trace carried, narrowed by each, in this process: an agent's outbound
// handoffs leave through its own Baton, the one that delivered the inbound
// handoff, so no store round trip is needed on the hot path. It is bounded
// (first in, first out) and entries expire after ttl.
type grantBook struct {
	grants *state.FIFO[*trust.Grant]
}

const grantBookSize = 1 << 16

func newGrantBook(ttl time.Duration) *grantBook {
	return &grantBook{grants: state.NewFIFO[*trust.Grant](grantBookSize, ttl)}
}

// RememberGrant narrows the trace's grant by g: a later inbound handoff in
// the same trace (signed or not) can only narrow what the agent may do, never
// widen it.
func (b *grantBook) RememberGrant(traceID string, g *trust.Grant) {
	if g == nil {
		return
	}
	b.grants.Update(traceID, func(old *trust.Grant, ok bool) (*trust.Grant, bool) {
		if !ok {
			return g, true
		}
		return trust.Intersect(old, g), true
	})
}

func (b *grantBook) InboundGrant(traceID string) *trust.Grant {
	g, _ := b.grants.Get(traceID)
	return g
}

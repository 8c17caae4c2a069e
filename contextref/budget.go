package contextref

import (
	"fmt"
	"log/slog"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	tokencount "github.com/batonproxy/baton/handoff/tokens"
	"github.com/batonproxy/baton/middleware"
)

// budgetPolicies builds each outbound edge's budget and field policy once:
// the tokenizer's vocabulary is loaded when an edge names it.
func budgetPolicies(c *config.Config, log *slog.Logger) (func(in *middleware.Info) *middleware.BudgetPolicy, error) {
	byPeer := map[string]*middleware.BudgetPolicy{}
	for _, e := range c.Edges {
		x := e.Context
		if e.To == "" || x == nil || (x.Budget == nil && x.Fields == nil) {
			continue
		}
		p := &middleware.BudgetPolicy{}
		var model, name string
		if b := x.Budget; b != nil {
			p.MaxTokens, p.Trim = b.MaxTokens, b.Over == config.BudgetTrim
			model, name = b.Model, b.Tokenizer
		}
		ctr, err := tokencount.For(model, name)
		if err != nil {
			return nil, fmt.Errorf("contextref: edge to %s: %w", e.To, err)
		}
		if ctr.Note != "" {
			log.Warn("token budget estimated", "to", e.To, "note", ctr.Note)
		}
		p.Counter = ctr
		if f := x.Fields; f != nil {
			p.Envelope = handoff.FieldPolicy{Keep: f.Envelope.Keep, Drop: f.Envelope.Drop}
			p.Message = handoff.FieldPolicy{Keep: f.Message.Keep, Drop: f.Message.Drop}
		}
		byPeer[e.To] = p
	}
	return func(in *middleware.Info) *middleware.BudgetPolicy { return byPeer[in.To] }, nil
}

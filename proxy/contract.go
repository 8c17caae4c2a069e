package proxy

import (
	"fmt"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/middleware"
)

// compiledChecker is the envelope contract's checker, or why its schema
// did not compile.
type compiledChecker struct {
	c   *handoff.Checker
	err error
}

// compileChecker compiles the envelope schema on a goroutine of its own and
// returns where its checker arrives. The compilation takes about as long as
// the rest of New, which it runs beside on another CPU; New waits for it
// before the chains that use it are built, so a Server never exists
// without its checker.
func compileChecker() <-chan compiledChecker {
	ch := make(chan compiledChecker, 1) // buffered: New may return early
	go func() {
		c, err := handoff.NewChecker()
		ch <- compiledChecker{c, err}
	}()
	return ch
}

// contractPolicies resolves the envelope contract of every edge once, for
// each direction; an edge without a block of its own gets the top-level one.
func contractPolicies(c *config.Config) (out, in middleware.ContractPolicy, err error) {
	build := func(k config.Contract, where string) (handoff.Policy, error) {
		mode, err := handoff.ParseMode(k.Mode)
		if err != nil {
			return handoff.Policy{}, fmt.Errorf("config: %s: %w", where, err)
		}
		p := handoff.Policy{Mode: mode, Require: k.Require, MaxBytes: k.MaxBytes}
		if k.MinCompleteness != nil {
			p.MinCompleteness = *k.MinCompleteness
		}
		if err := p.Validate(); err != nil {
			return p, fmt.Errorf("config: %s: %w", where, err)
		}
		return p, nil
	}
	outs, ins := map[string]handoff.Policy{}, map[string]handoff.Policy{}
	for name := range c.Peers {
		if outs[name], err = build(c.ContractOut(name), "contract for edge to "+name); err != nil {
			return nil, nil, err
		}
	}
	for _, e := range c.Edges {
		if e.From != "" {
			if ins[e.From], err = build(c.ContractIn(e.From), "contract for edge from "+e.From); err != nil {
				return nil, nil, err
			}
		}
	}
	fallback, err := build(c.ContractIn(""), "contract")
	if err != nil {
		return nil, nil, err
	}
	out = func(in *middleware.Info) handoff.Policy { return outs[in.To] }
	in = func(i *middleware.Info) handoff.Policy {
		if p, ok := ins[i.From]; ok {
			return p
		}
		return fallback
	}
	return out, in, nil
}

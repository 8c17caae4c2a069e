package mesh

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/edgehealth"
)

// ModelFigures are what a Baton's agent's calls to one model API did over
// the announcement's Window, summed over the API's models
// (docs/model-calls.md): the calls that went out, how many of them
// failed, the tokens billed and their cost. API is the route's name or
// the host:port, as the agent's external edge to it is named after
// ExternalPrefix, so that the two are one node.
type ModelFigures struct {
	API     string  `json:"api"`
	Calls   float64 `json:"calls"`
	Failed  float64 `json:"failed,omitempty"`
	Tokens  float64 `json:"tokens"`
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// MaxModelAPIs bounds the model APIs a Baton announces: the busiest by
// tokens, then calls, over the window.
const MaxModelAPIs = 8

// modelFigures are a Baton's model APIs over the window since prev.
func modelFigures(prev, cur *edgehealth.Snapshot) []ModelFigures {
	apis := edgehealth.APIs(prev, cur)
	out := make([]ModelFigures, 0, len(apis))
	for api, c := range apis {
		out = append(out, ModelFigures{API: api, Calls: c.Calls, Failed: c.Failed, Tokens: c.Tokens, CostUSD: c.CostUSD})
	}
	slices.SortFunc(out, func(a, b ModelFigures) int {
		if c := cmp.Compare(b.Tokens, a.Tokens); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Calls, a.Calls); c != 0 {
			return c
		}
		return strings.Compare(a.API, b.API)
	})
	if len(out) > MaxModelAPIs {
		out = out[:MaxModelAPIs]
	}
	return out
}

// modelUse is a model API's last minute, per minute, summed over the
// Batons that call it (a node), or over one agent's (an edge).
type modelUse struct {
	tokens, calls, cost float64 // a minute
	n, failed           float64 // calls, over the Batons' windows
}

func (u *modelUse) add(m ModelFigures, window float64) {
	if window > 0 {
		perMin := 60 / window
		u.tokens += m.Tokens * perMin
		u.calls += m.Calls * perMin
		u.cost += m.CostUSD * perMin
	}
	u.n += m.Calls
	u.failed += m.Failed
}

// errorShare is the share of the calls that failed.
func (u *modelUse) errorShare() float64 {
	if u.n == 0 {
		return 0
	}
	return u.failed / u.n
}

// describe fills a model API node: its shape, its lines and its title.
func (u *modelUse) describe(n *Node) {
	n.Model, n.Sub = true, "model API"
	n.Sub2 = perMinute(u.tokens) + " tok/min · idle"
	if u.n > 0 {
		n.Sub2 = perMinute(u.tokens) + " tok/min · " + strconv.FormatFloat(100*u.errorShare(), 'f', 1, 64) + "% err"
	}
	n.Title = strings.TrimPrefix(n.Agent, ExternalPrefix) + ": model API, its last minute over every agent's Batons: " +
		strconv.FormatFloat(u.tokens, 'f', 0, 64) + " tokens/min, " + strconv.FormatFloat(u.calls, 'f', 1, 64) + " calls/min, " +
		strconv.FormatFloat(100*u.errorShare(), 'f', 1, 64) + "% failed"
	if u.cost > 0 {
		n.Title += ", $" + strconv.FormatFloat(u.cost, 'f', 4, 64) + "/min"
	}
}

// perMinute renders a count a minute compactly: 840, 1.2k, 35k, 1.2M.
func perMinute(v float64) string {
	switch {
	case v < 999.5:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v < 9950:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case v < 999500:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	}
	return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
}

package mesh

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

// External destinations are named in a Baton's metrics, and so in its
// announced edges, by ExternalPrefix and their name (a base-URL route's,
// else host:port), the first 16 of a Baton's; the ones after are counted
// together as OtherExternal (docs/metrics.md).
const (
	OtherExternal  = "_external"
	ExternalPrefix = OtherExternal + ":"
)

// MaxExternal bounds the external destinations drawn as nodes of their own
// per agent, busiest first; the rest of its external edges are drawn as one,
// to "other external".
const MaxExternal = 8

// isExternal reports whether an edge's "to" names an external destination.
func isExternal(to string) bool { return to == OtherExternal || strings.HasPrefix(to, ExternalPrefix) }

// Layout draws the mesh of the Batons announced: a node per agent and per
// external destination, an edge per pair summed over the sender's Batons.
func Layout(batons []Announcement) Graph {
	byAgent := map[string]*Node{}
	node := func(agent string) *Node {
		n := byAgent[agent]
		if n == nil {
			n = &Node{Agent: agent}
			byAgent[agent] = n
		}
		return n
	}
	type key struct{ from, to string }
	edges := map[key]*Edge{}
	add := func(k key, o *Edge) {
		if e := edges[k]; e != nil {
			e.merge(o)
			return
		}
		o.From, o.To = k.from, k.to
		edges[k] = o
	}
	externals := map[string][]*Edge{} // by agent
	uses := map[string]*modelUse{}    // by model API node
	edgeUses := map[key]*modelUse{}   // by agent and model API
	for _, a := range batons {
		n := node(a.Agent)
		n.Batons, n.Announced = append(n.Batons, a), true
		for _, f := range a.Edges {
			add(key{a.Agent, f.To}, edgeOf(f))
		}
		for _, m := range a.Models {
			if m.API == "" {
				continue
			}
			to := ExternalPrefix + m.API
			k := key{a.Agent, to}
			if !slices.ContainsFunc(a.Edges, func(f EdgeFigures) bool { return f.To == to }) {
				// The Baton counted its fetches there with others' (it
				// names its first 16 destinations): an edge of its own.
				add(k, modelEdge(m, a.Window))
			}
			use(uses, to).add(m, a.Window)
			use(edgeUses, k).add(m, a.Window)
		}
	}
	for k, u := range edgeUses {
		edges[k].Model, edges[k].TokensPerMin = true, u.tokens
	}
	for k, e := range edges {
		if isExternal(k.to) && k.to != OtherExternal {
			externals[k.from] = append(externals[k.from], e)
		}
	}
	for agent, es := range externals { // past MaxExternal: one edge, to other external
		if len(es) <= MaxExternal {
			continue
		}
		sort.Slice(es, func(i, j int) bool { // model APIs first, then the busiest
			if es[i].Model != es[j].Model {
				return es[i].Model
			}
			if es[i].Rate != es[j].Rate {
				return es[i].Rate > es[j].Rate
			}
			return es[i].To < es[j].To
		})
		for _, e := range es[MaxExternal:] {
			delete(edges, key{agent, e.To})
			add(key{agent, OtherExternal}, e)
		}
	}
	for k := range edges {
		n := node(k.to)
		if isExternal(k.to) {
			n.External, n.Sub = true, "external"
			n.Label = shorten(strings.TrimPrefix(k.to, ExternalPrefix), 20)
			if k.to == OtherExternal {
				n.Label = "other external"
			}
			if u := uses[k.to]; u != nil {
				u.describe(n)
			}
		}
	}
	nodes := make([]Node, 0, len(byAgent))
	for _, n := range byAgent {
		switch {
		case n.External:
		case !n.Announced:
			n.Sub = "not announced"
		case len(n.Batons) == 1:
			n.Sub, n.Link = "1 Baton", "http://"+n.Batons[0].Admin+"/console/"
		default:
			n.Sub, n.Link = strconv.Itoa(len(n.Batons))+" Batons", "http://"+n.Batons[0].Admin+"/console/"
		}
		nodes = append(nodes, *n)
	}
	es := make([]Edge, 0, len(edges))
	for _, e := range edges {
		sort.SliceStable(e.Traces, func(i, j int) bool { return e.Traces[i].At.After(e.Traces[j].At) })
		if len(e.Traces) > recentTraces {
			e.Traces = e.Traces[:recentTraces]
		}
		e.Class = healthClass(*e)
		e.Label, e.Label2 = edgeLabels(*e)
		es = append(es, *e)
	}
	return Draw(nodes, es)
}

// use is the figures of k in uses, made when new.
func use[K comparable](uses map[K]*modelUse, k K) *modelUse {
	u := uses[k]
	if u == nil {
		u = &modelUse{}
		uses[k] = u
	}
	return u
}

// modelEdge is an agent's edge to a model API from its model calls alone.
func modelEdge(m ModelFigures, window float64) *Edge {
	e := &Edge{To: ExternalPrefix + m.API, P99: "-"}
	if window > 0 {
		e.Rate = m.Calls / window
	}
	if m.Calls > 0 {
		e.ErrorShare = m.Failed / m.Calls
	}
	e.busiest = e.Rate
	return e
}

// edgeOf is one Baton's figures for an edge.
func edgeOf(f EdgeFigures) *Edge {
	r, _ := strconv.ParseFloat(f.Rate, 64)
	return &Edge{To: f.To, Rate: r, busiest: r, ErrorShare: f.Errors, P99: f.P99, Breaker: f.Breaker,
		Traces: append([]RecentTrace(nil), f.Traces...)}
}

// merge adds o's figures to e's: rates summed, the worst error share and
// breaker, the busiest one's p99, the traces of both.
func (e *Edge) merge(o *Edge) {
	if o.busiest > e.busiest { // the p99 shown: the busiest one's
		e.busiest, e.P99 = o.busiest, o.P99
	}
	e.Rate += o.Rate
	e.ErrorShare = max(e.ErrorShare, o.ErrorShare)
	e.Traces = append(e.Traces, o.Traces...)
	if worse(o.Breaker, e.Breaker) {
		e.Breaker = o.Breaker
	}
}

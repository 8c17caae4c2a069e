package middleware

// One edge's series: Edge with its label set and counter cells, how an edge
// is found or added (Edge, EdgeOf, addEdge, bounded by maxDynamicEdges), and
// observeCounters, which reports every edge's and store's counter totals
// when metrics are collected.

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxDynamicEdges bounds the edges labelled by name that the configuration
// does not list.
const maxDynamicEdges = 64

type edgeKey struct {
	side     Side
	from, to string
}

// cell is one counter series: its running total and, once it has been
// counted (or started at zero), the options it is observed with.
type cell struct {
	n    atomic.Int64
	opts atomic.Pointer[[]metric.ObserveOption]
}

// add counts n and reports whether the cell's options are built.
func (c *cell) add(n int64) bool {
	c.n.Add(n)
	return c.opts.Load() != nil
}

// observe reports the cell's total when it has been counted.
func (c *cell) observe(o metric.Observer, inst metric.Int64Observable) {
	if p := c.opts.Load(); p != nil {
		o.ObserveInt64(inst, c.n.Load(), *p...)
	}
}

// Edge is one edge's label set with everything built from it: the options
// the instruments take, ready to pass, and the edge's counter totals. Get
// one from Metrics.Edge or Metrics.EdgeOf; a nil *Edge (from a nil Metrics)
// records nothing.
type Edge struct {
	side     Side
	from, to string
	attrs    []attribute.KeyValue // from, to, side
	set      attribute.Set        // of attrs
	rec      []metric.RecordOption
	obs      []metric.ObserveOption
	hists    [nEdgeHists]atomic.Pointer[series] // each built on first use

	requests                                                  [nOutcomes][nClasses]cell
	dedupe                                                    [len(dedupeOutcomes)]cell
	sig                                                       [len(signatureReasons)]cell
	deny                                                      [len(denialReasons)]cell
	violations                                                [3][len(violationKinds)]cell // by handoff.Mode
	transitions                                               [len(breakerStates)]cell
	correlation                                               [len(correlationNames)]cell
	retries, deadLetters, uncorrelated, untrusted, injections cell
}

// label builds the options of c from the edge's labels and extra, once (the
// caller saw them missing).
func (e *Edge) label(c *cell, extra ...attribute.KeyValue) {
	opts := e.obs
	if len(extra) > 0 {
		kvs := make([]attribute.KeyValue, 0, len(e.attrs)+len(extra))
		kvs = append(append(kvs, e.attrs...), extra...)
		opts = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
	}
	c.opts.CompareAndSwap(nil, &opts)
}

func newEdge(side Side, from, to string) *Edge {
	e := &Edge{side: side, from: from, to: to,
		attrs: []attribute.KeyValue{keyFrom.String(from), keyTo.String(to), keySide.String(side.String())}}
	e.set = attribute.NewSet(e.attrs...)
	set := metric.WithAttributeSet(e.set)
	e.rec, e.obs = []metric.RecordOption{set}, []metric.ObserveOption{set}
	return e
}

// onEdge returns e's series of the i-th edge histogram.
func (m *Metrics) onEdge(e *Edge, i int) *series {
	if s := e.hists[i].Load(); s != nil {
		return s
	}
	e.hists[i].CompareAndSwap(nil, m.edgeHists[i].series(e.set, e.rec))
	return e.hists[i].Load()
}

// Edge returns the labels of an edge the configuration names, creating
// them; the proxy calls it at start-up for every configured edge, so that
// the edge's plain counters are exported from zero before the first
// request (rate and increase then see the first one).
func (m *Metrics) Edge(side Side, from, to string) *Edge {
	if m == nil {
		return nil
	}
	e := m.addEdge(edgeKey{side, from, to}, false)
	if side == Egress {
		for _, c := range []*cell{&e.retries, &e.deadLetters, &e.uncorrelated} {
			e.label(c)
		}
	}
	e.label(&e.untrusted)
	e.label(&e.injections)
	return e
}

// addEdge adds the edge under the lock; a dynamic edge past the bound gets
// the side's "_other" labels instead.
func (m *Metrics) addEdge(k edgeKey, dynamic bool) *Edge {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addEdgeLocked(k, dynamic)
}

// addEdgeLocked is addEdge with m.mu held.
func (m *Metrics) addEdgeLocked(k edgeKey, dynamic bool) *Edge {
	cur := *m.edges.Load()
	if e := cur[k]; e != nil {
		return e
	}
	if dynamic {
		if m.dynamic >= maxDynamicEdges {
			k.from = LabelOther
			if e := cur[k]; e != nil {
				return e
			}
		} else {
			m.dynamic++
		}
	}
	e := newEdge(k.side, k.from, k.to)
	next := make(map[edgeKey]*Edge, len(cur)+1)
	for key, v := range cur {
		next[key] = v
	}
	next[k] = e
	m.edges.Store(&next)
	return e
}

// EdgeOf returns the labels of the request's edge: at egress from this
// agent to the peer (ExternalLabel of its name for an external fetch,
// "_unknown" when the request was refused before its destination was
// resolved), at ingress
// from the sender ("_unknown" before HopGuard read it) to this agent.
func (m *Metrics) EdgeOf(in *Info) *Edge {
	if m == nil {
		return nil
	}
	k := edgeKey{side: in.Side}
	if in.Side == Ingress {
		k.from, k.to = in.From, in.Agent
		if k.from == "" {
			k.from = LabelUnknown
		}
	} else {
		k.from = in.Agent
		switch {
		case in.External != "":
			return m.externalEdge(in.Agent, in.ExternalName())
		case in.To != "":
			k.to = in.To
		default:
			k.to = LabelUnknown
		}
	}
	if e := (*m.edges.Load())[k]; e != nil {
		return e
	}
	return m.addEdge(k, true)
}

// observeCounters reports every counter total that has been counted.
func (m *Metrics) observeCounters(_ context.Context, o metric.Observer) error {
	for _, e := range *m.edges.Load() {
		for i := range e.requests {
			for j := range e.requests[i] {
				e.requests[i][j].observe(o, m.requests)
			}
		}
		for i := range e.dedupe {
			e.dedupe[i].observe(o, m.dedupe)
		}
		for i := range e.sig {
			e.sig[i].observe(o, m.sigFailures)
		}
		for i := range e.deny {
			e.deny[i].observe(o, m.denials)
		}
		for i := range e.violations {
			for j := range e.violations[i] {
				e.violations[i][j].observe(o, m.violations)
			}
		}
		for i := range e.transitions {
			e.transitions[i].observe(o, m.transitions)
		}
		e.retries.observe(o, m.retries)
		e.deadLetters.observe(o, m.deadLetters)
		e.uncorrelated.observe(o, m.uncorrelated)
		for i := range e.correlation {
			e.correlation[i].observe(o, m.correlation)
		}
		e.untrusted.observe(o, m.untrusted)
		e.injections.observe(o, m.injections)
	}
	for _, s := range *m.stores.Load() {
		s.errs.observe(o, m.storeErrors)
	}
	return nil
}

// maxExternalEdges bounds the external destinations labelled by name; the
// ones after are counted together, as "_external". maxExternalNames bounds
// the destinations whose edge is found without the lock.
const (
	maxExternalEdges = 16
	maxExternalNames = 256
)

// ExternalLabel is the "to" label of an external destination: "_external:"
// and its name (its base-URL route's, else its host:port).
func ExternalLabel(name string) string { return LabelExternal + ":" + name }

type externalKey struct{ agent, name string }

// externalEdge returns the edge of an external fetch from agent to the
// destination name: its own for the first maxExternalEdges destinations,
// the "_external" one for the rest.
func (m *Metrics) externalEdge(agent, name string) *Edge {
	k := externalKey{agent, name}
	if e := (*m.externals.Load())[k]; e != nil {
		return e
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.externals.Load()
	if e := cur[k]; e != nil {
		return e
	}
	to := LabelExternal
	if m.named < maxExternalEdges {
		to = ExternalLabel(name)
		m.named++
	}
	e := m.addEdgeLocked(edgeKey{side: Egress, from: agent, to: to}, false)
	if len(cur) < maxExternalNames {
		next := make(map[externalKey]*Edge, len(cur)+1)
		for key, v := range cur {
			next[key] = v
		}
		next[k] = e
		m.externals.Store(&next)
	}
	return e
}

// Package edgehealth reads a Baton's handoff health per edge from its
// Prometheus metrics (docs/metrics.md): requests, errors, latency
// quantiles, retries, the share of handoffs tied to the inbound handoff
// their agent was handling, breaker state and dead-letter depth. baton top
// and the admin console show these figures.
package edgehealth

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The series read, as Prometheus renders them.
const (
	seriesRequests = "baton_handoff_requests_total"
	seriesDuration = "baton_handoff_duration_seconds"
	seriesRetries  = "baton_handoff_retries_total"
	seriesCorrel   = "baton_handoff_correlation_total"
	seriesBreaker  = "baton_breaker_state"
	seriesDepth    = "baton_dead_letter_depth"
	seriesStart    = "process_start_time_seconds"
	seriesTarget   = "target_info"
	seriesTokens   = "baton_genai_tokens_total"
	seriesCost     = "baton_genai_cost_usd_total"
	seriesCalls    = "baton_genai_calls_total"
)

// Edge is an edge as its metrics label it.
type Edge struct{ From, To, Side string }

// Name renders from→to.
func (e Edge) Name() string { return e.From + "→" + e.To }

// Counts are an edge's cumulative figures. Tied and Untied count egress
// handoffs tied to the inbound handoff their agent was handling, and those
// tied to none (correlation none or ambiguous: keyed by their content).
type Counts struct {
	Requests, Failed, Retries float64
	Tied, Untied              float64
	Buckets                   map[float64]float64 // upper bound → cumulative count
	Breaker, Depth            float64             // NaN when not reported
}

// Snapshot is one scrape of one Baton.
type Snapshot struct {
	At      time.Time
	Agent   string    // from target_info, "" when absent
	Started time.Time // zero when the Baton does not say
	Edges   map[Edge]*Counts
	// Models are the agent's model calls, by model API and model
	// (docs/model-calls.md).
	Models map[Model]*ModelCounts
}

// Model is a model API (a route's name or a host:port) and a model, as the
// baton_genai_* series label them.
type Model struct{ API, Name string }

// ModelCounts are a model's cumulative figures: calls (Failed of them
// errors), tokens billed and their cost.
type ModelCounts struct {
	Calls, Failed, Tokens, CostUSD float64
}

// Read parses a scrape in the Prometheus text format taken at at.
func Read(r io.Reader, at time.Time) (*Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return Parse(fams, at), nil
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// Parse reads the figures from parsed metric families.
func Parse(fams map[string]*dto.MetricFamily, at time.Time) *Snapshot {
	s := &Snapshot{At: at, Edges: map[Edge]*Counts{}, Models: map[Model]*ModelCounts{}}
	model := func(m *dto.Metric) *ModelCounts {
		k := Model{label(m, "to"), label(m, "model")}
		c := s.Models[k]
		if c == nil {
			c = &ModelCounts{}
			s.Models[k] = c
		}
		return c
	}
	for _, m := range fams[seriesTokens].GetMetric() {
		model(m).Tokens += m.GetCounter().GetValue()
	}
	for _, m := range fams[seriesCost].GetMetric() {
		model(m).CostUSD += m.GetCounter().GetValue()
	}
	for _, m := range fams[seriesCalls].GetMetric() {
		c, v := model(m), m.GetCounter().GetValue()
		switch label(m, "type") {
		case "refused", "journal":
			continue // answered without going out
		case "error":
			c.Failed += v
		}
		c.Calls += v
	}
	edge := func(m *dto.Metric) *Counts {
		k := Edge{label(m, "from"), label(m, "to"), label(m, "side")}
		e := s.Edges[k]
		if e == nil {
			e = &Counts{Buckets: map[float64]float64{}, Breaker: math.NaN(), Depth: math.NaN()}
			s.Edges[k] = e
		}
		return e
	}
	for _, m := range fams[seriesRequests].GetMetric() {
		e, v := edge(m), m.GetCounter().GetValue()
		e.Requests += v
		if o := label(m, "outcome"); o == "failed" || o == "dead_lettered" ||
			(o == "delivered" && label(m, "status_class") == "5xx") {
			e.Failed += v
		}
	}
	for _, m := range fams[seriesDuration].GetMetric() {
		e := edge(m)
		for _, b := range m.GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				e.Buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		e.Buckets[math.Inf(1)] += float64(m.GetHistogram().GetSampleCount())
	}
	for _, m := range fams[seriesRetries].GetMetric() {
		edge(m).Retries += m.GetCounter().GetValue()
	}
	for _, m := range fams[seriesCorrel].GetMetric() {
		e, v := edge(m), m.GetCounter().GetValue()
		switch label(m, "correlation") {
		case "none", "ambiguous":
			e.Untied += v
		default:
			e.Tied += v
		}
	}
	for _, m := range fams[seriesBreaker].GetMetric() {
		edge(m).Breaker = m.GetGauge().GetValue()
	}
	for _, m := range fams[seriesDepth].GetMetric() {
		edge(m).Depth = m.GetGauge().GetValue()
	}
	for _, m := range fams[seriesStart].GetMetric() {
		if v := m.GetGauge().GetValue(); v > 0 {
			s.Started = time.Unix(0, int64(v*float64(time.Second)))
		}
	}
	for _, m := range fams[seriesTarget].GetMetric() {
		s.Agent = label(m, "baton_agent")
	}
	return s
}

// Since returns the figures added after before (all of them when before is
// nil, or when the counters went back: the Baton restarted).
func (e *Counts) Since(before *Counts) *Counts {
	if before == nil || before.Requests > e.Requests {
		return e
	}
	d := &Counts{Requests: e.Requests - before.Requests, Failed: e.Failed - before.Failed,
		Retries: max(e.Retries-before.Retries, 0), Tied: max(e.Tied-before.Tied, 0),
		Untied: max(e.Untied-before.Untied, 0), Buckets: map[float64]float64{}}
	for le, n := range e.Buckets {
		d.Buckets[le] = n - before.Buckets[le]
	}
	return d
}

// Row is one edge's figures as text, over a window: Total is the count
// since the Baton started, the others cover the window.
type Row struct {
	Edge
	Total                       float64
	Rate, ErrPct, P50, P95, P99 string // "-" when there is nothing to show
	Retries                     float64
	// Tied is the share of the window's egress handoffs tied to the inbound
	// handoff their agent was handling ("-" when none were counted): below
	// 100%, some got keys from their content (docs/resume.md).
	Tied                 string
	Breaker, DeadLetters string
}

// Rows returns the figures of cur's edges that carried requests or have a
// breaker, egress first, over the window since prev (since cur.Started
// when prev is nil; with neither there is no rate).
func Rows(prev, cur *Snapshot) (rows []Row, window time.Duration) {
	switch {
	case prev != nil:
		window = cur.At.Sub(prev.At)
	case !cur.Started.IsZero():
		window = cur.At.Sub(cur.Started)
	}
	keys := make([]Edge, 0, len(cur.Edges))
	for k, e := range cur.Edges {
		if e.Requests > 0 || !math.IsNaN(e.Breaker) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Side != b.Side {
			return a.Side == "egress"
		}
		if a.From != b.From {
			return a.From < b.From
		}
		return a.To < b.To
	})
	for _, k := range keys {
		e := cur.Edges[k]
		var before *Counts
		if prev != nil {
			before = prev.Edges[k]
		}
		d := e.Since(before)
		r := Row{Edge: k, Total: e.Requests, Rate: "-", ErrPct: "-", Retries: d.Retries,
			P50: Quantile(d.Buckets, 0.5), P95: Quantile(d.Buckets, 0.95), P99: Quantile(d.Buckets, 0.99),
			Breaker: BreakerName(e.Breaker), DeadLetters: GaugeText(e.Depth)}
		if window > 0 {
			r.Rate = strconv.FormatFloat(d.Requests/window.Seconds(), 'f', 1, 64)
		}
		if d.Requests > 0 {
			r.ErrPct = strconv.FormatFloat(100*d.Failed/d.Requests, 'f', 1, 64) + "%"
		}
		r.Tied = "-"
		if n := d.Tied + d.Untied; n > 0 {
			r.Tied = strconv.FormatFloat(100*d.Tied/n, 'f', 0, 64) + "%"
		}
		rows = append(rows, r)
	}
	return rows, window
}

// Quantile estimates the q-quantile from cumulative bucket counts, as
// Prometheus's histogram_quantile does: linear within the bucket it falls
// in; in the +Inf bucket it is "over" the largest bound.
func Quantile(buckets map[float64]float64, q float64) string {
	total := buckets[math.Inf(1)]
	if total <= 0 {
		return "-"
	}
	bounds := make([]float64, 0, len(buckets))
	for le := range buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		n := buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return ">" + Seconds(lower)
			}
			if n == below {
				return Seconds(le)
			}
			return Seconds(lower + (le-lower)*(rank-below)/(n-below))
		}
		lower, below = le, n
	}
	return "-"
}

// Seconds renders a latency compactly.
func Seconds(s float64) string {
	switch {
	case s < 0.001:
		return strconv.FormatFloat(s*1e6, 'f', 0, 64) + "µs"
	case s < 1:
		return strconv.FormatFloat(s*1e3, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(s, 'f', 2, 64) + "s"
}

// BreakerName renders a baton_breaker_state value.
func BreakerName(v float64) string {
	switch v {
	case 0:
		return "closed"
	case 1:
		return "half-open"
	case 2:
		return "open"
	}
	return "-"
}

// GaugeText renders a gauge, "-" when not reported.
func GaugeText(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const topUsage = `  baton top [--admin URL]... [--interval 2s] [--once]
                                 per-edge request rate, latency p50/p95/p99, error %,
                                 retries, breaker state and dead letters, from the
                                 /metrics of one or more Batons, refreshed in place
                                 (--once: one plain snapshot since each Baton started)
`

// The series baton top reads, as Prometheus renders them (docs/metrics.md).
const (
	seriesRequests = "baton_handoff_requests_total"
	seriesDuration = "baton_handoff_duration_seconds"
	seriesRetries  = "baton_handoff_retries_total"
	seriesBreaker  = "baton_breaker_state"
	seriesDepth    = "baton_dead_letter_depth"
	seriesStart    = "process_start_time_seconds"
	seriesTarget   = "target_info"
)

// topCmd shows handoff health per edge from Batons' /metrics. The first
// frame covers each Baton's life so far (rates averaged over its uptime);
// each later one the time since the frame before.
func topCmd(ctx context.Context, args []string, stdout io.Writer, env func(string) string) error {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var admins multiFlag
	fs.Var(&admins, "admin", "a Baton's admin listener (repeatable)")
	interval := fs.Duration("interval", 2*time.Second, "refresh interval")
	once := fs.Bool("once", false, "print one snapshot without terminal control codes and exit")
	if err := fs.Parse(args); err != nil {
		return usageError{msg: "top: " + err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{msg: fmt.Sprintf("top: unexpected argument %q", fs.Arg(0))}
	}
	if *interval <= 0 {
		return usageError{msg: "top: --interval must be positive"}
	}
	if len(admins) == 0 {
		admins = multiFlag{"http://" + defaultAdmin}
	}
	clients := make([]*adminClient, len(admins))
	for i, a := range admins {
		clients[i] = newAdminClient(a, env)
		clients[i].http.Timeout = max(*interval, time.Second)
	}
	prev := make([]*topSnapshot, len(clients))
	for {
		var frame bytes.Buffer
		var errs []error
		for i, c := range clients {
			cur, err := c.snapshot(ctx)
			if err != nil {
				errs = append(errs, err)
				fmt.Fprintf(&frame, "%s: %v\n\n", c.addr, err)
				continue
			}
			renderTop(&frame, c.addr, prev[i], cur)
			prev[i] = cur
		}
		if *once {
			_, err := stdout.Write(frame.Bytes())
			return errors.Join(append(errs, err)...)
		}
		// Home, clear, then the frame: the view refreshes in place.
		if _, err := io.WriteString(stdout, "\x1b[H\x1b[2J"+frame.String()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
}

// topEdge is an edge as top shows it.
type topEdge struct{ from, to, side string }

// topCounts are an edge's cumulative figures.
type topCounts struct {
	requests, failed, retries float64
	buckets                   map[float64]float64 // upper bound → cumulative count
	breaker, depth            float64             // NaN when not reported
}

// topSnapshot is one scrape of one Baton.
type topSnapshot struct {
	at      time.Time
	agent   string
	started time.Time // zero when the Baton does not say
	edges   map[topEdge]*topCounts
}

// snapshot scrapes the Baton's /metrics.
func (c *adminClient) snapshot(ctx context.Context) (*topSnapshot, error) {
	u := "http://" + c.addr + "/metrics"
	if strings.Contains(c.addr, "://") {
		u = strings.TrimSuffix(c.addr, "/") + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("admin %s: GET /metrics: %s", c.addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("admin %s: reading /metrics: %w", c.addr, err)
	}
	return parseTop(fams, time.Now()), nil
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// parseTop reads the figures top shows from a scrape.
func parseTop(fams map[string]*dto.MetricFamily, at time.Time) *topSnapshot {
	s := &topSnapshot{at: at, edges: map[topEdge]*topCounts{}}
	edge := func(m *dto.Metric) *topCounts {
		k := topEdge{label(m, "from"), label(m, "to"), label(m, "side")}
		e := s.edges[k]
		if e == nil {
			e = &topCounts{buckets: map[float64]float64{}, breaker: math.NaN(), depth: math.NaN()}
			s.edges[k] = e
		}
		return e
	}
	for _, m := range fams[seriesRequests].GetMetric() {
		e, v := edge(m), m.GetCounter().GetValue()
		e.requests += v
		if o := label(m, "outcome"); o == "failed" || o == "dead_lettered" ||
			(o == "delivered" && label(m, "status_class") == "5xx") {
			e.failed += v
		}
	}
	for _, m := range fams[seriesDuration].GetMetric() {
		e := edge(m)
		for _, b := range m.GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				e.buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		e.buckets[math.Inf(1)] += float64(m.GetHistogram().GetSampleCount())
	}
	for _, m := range fams[seriesRetries].GetMetric() {
		edge(m).retries += m.GetCounter().GetValue()
	}
	for _, m := range fams[seriesBreaker].GetMetric() {
		edge(m).breaker = m.GetGauge().GetValue()
	}
	for _, m := range fams[seriesDepth].GetMetric() {
		edge(m).depth = m.GetGauge().GetValue()
	}
	for _, m := range fams[seriesStart].GetMetric() {
		if v := m.GetGauge().GetValue(); v > 0 {
			s.started = time.Unix(0, int64(v*float64(time.Second)))
		}
	}
	for _, m := range fams[seriesTarget].GetMetric() {
		s.agent = label(m, "baton_agent")
	}
	return s
}

// renderTop writes one Baton's table: the window is since prev, or since
// the Baton started when prev is nil.
func renderTop(w io.Writer, addr string, prev, cur *topSnapshot) {
	var window time.Duration
	switch {
	case prev != nil:
		window = cur.at.Sub(prev.at)
	case !cur.started.IsZero():
		window = cur.at.Sub(cur.started)
	}
	head := addr
	if cur.agent != "" {
		head = cur.agent + " @ " + addr
	}
	if !cur.started.IsZero() {
		head += "  up " + cur.at.Sub(cur.started).Round(time.Second).String()
	}
	if prev != nil {
		head += "  last " + window.Round(time.Millisecond).String()
	} else {
		head += "  since start"
	}
	fmt.Fprintln(w, head)
	keys := make([]topEdge, 0, len(cur.edges))
	for k, e := range cur.edges {
		if e.requests > 0 || !math.IsNaN(e.breaker) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.side != b.side {
			return a.side == "egress"
		}
		if a.from != b.from {
			return a.from < b.from
		}
		return a.to < b.to
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "EDGE\tSIDE\tTOTAL\tREQ/S\tERR%\tP50\tP95\tP99\tRETRIES\tBREAKER\tDLQ\t")
	for _, k := range keys {
		e := cur.edges[k]
		var before *topCounts
		if prev != nil {
			before = prev.edges[k]
		}
		d := e.since(before)
		rate := "-"
		if window > 0 {
			rate = strconv.FormatFloat(d.requests/window.Seconds(), 'f', 1, 64)
		}
		errPct := "-"
		if d.requests > 0 {
			errPct = strconv.FormatFloat(100*d.failed/d.requests, 'f', 1, 64) + "%"
		}
		fmt.Fprintf(tw, "%s→%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", k.from, k.to, k.side, e.requests, rate, errPct,
			quantile(d.buckets, 0.5), quantile(d.buckets, 0.95), quantile(d.buckets, 0.99), d.retries,
			breakerName(e.breaker), gaugeText(e.depth))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// since returns the figures added after before (all of them when before is
// nil, or when the counters went back: the Baton restarted).
func (e *topCounts) since(before *topCounts) *topCounts {
	if before == nil || before.requests > e.requests {
		return e
	}
	d := &topCounts{requests: e.requests - before.requests, failed: e.failed - before.failed,
		retries: max(e.retries-before.retries, 0), buckets: map[float64]float64{}}
	for le, n := range e.buckets {
		d.buckets[le] = n - before.buckets[le]
	}
	return d
}

// quantile estimates the q-quantile from cumulative bucket counts, as
// Prometheus's histogram_quantile does: linear within the bucket it falls
// in; in the +Inf bucket it is "over" the largest bound.
func quantile(buckets map[float64]float64, q float64) string {
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
				return ">" + seconds(lower)
			}
			if n == below {
				return seconds(le)
			}
			return seconds(lower + (le-lower)*(rank-below)/(n-below))
		}
		lower, below = le, n
	}
	return "-"
}

// seconds renders a latency compactly.
func seconds(s float64) string {
	switch {
	case s < 0.001:
		return strconv.FormatFloat(s*1e6, 'f', 0, 64) + "µs"
	case s < 1:
		return strconv.FormatFloat(s*1e3, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(s, 'f', 2, 64) + "s"
}

func breakerName(v float64) string {
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

func gaugeText(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

package edgehealth

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	tests := []struct {
		buckets map[float64]float64
		q       float64
		want    string
	}{
		{map[float64]float64{0.01: 0, 0.1: 10, inf: 10}, 0.5, "55.0ms"},
		{map[float64]float64{0.001: 5, 0.01: 10, inf: 10}, 0.99, "9.8ms"},
		{map[float64]float64{1: 0, 10: 0, inf: 4}, 0.5, ">10.00s"},
		{map[float64]float64{0.0005: 4, inf: 4}, 0.5, "250µs"},
		{map[float64]float64{inf: 0}, 0.5, "-"},
	}
	for _, tc := range tests {
		if got := Quantile(tc.buckets, tc.q); got != tc.want {
			t.Errorf("Quantile(%v, %g) = %q, want %q", tc.buckets, tc.q, got, tc.want)
		}
	}
}

func TestRowsFromText(t *testing.T) {
	t.Parallel()
	const scrape = `# TYPE baton_handoff_requests_total counter
baton_handoff_requests_total{from="a",to="b",side="egress",outcome="delivered",status_class="2xx"} 3
baton_handoff_requests_total{from="a",to="b",side="egress",outcome="dead_lettered",status_class="5xx"} 1
# TYPE baton_handoff_duration_seconds histogram
baton_handoff_duration_seconds_bucket{from="a",to="b",side="egress",le="0.01"} 2
baton_handoff_duration_seconds_bucket{from="a",to="b",side="egress",le="0.1"} 4
baton_handoff_duration_seconds_bucket{from="a",to="b",side="egress",le="+Inf"} 4
baton_handoff_duration_seconds_sum{from="a",to="b",side="egress"} 0.1
baton_handoff_duration_seconds_count{from="a",to="b",side="egress"} 4
# TYPE baton_handoff_correlation_total counter
baton_handoff_correlation_total{from="a",to="b",side="egress",correlation="baggage"} 2
baton_handoff_correlation_total{from="a",to="b",side="egress",correlation="in-flight"} 1
baton_handoff_correlation_total{from="a",to="b",side="egress",correlation="none"} 1
# TYPE baton_breaker_state gauge
baton_breaker_state{from="a",to="b",side="egress"} 0
baton_breaker_state{from="a",to="idle",side="egress"} 2
# TYPE baton_dead_letter_depth gauge
baton_dead_letter_depth{from="a",to="b",side="egress"} 1
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1000
`
	s, err := Read(strings.NewReader(scrape), time.Unix(1010, 0))
	if err != nil {
		t.Fatal(err)
	}
	rows, window := Rows(nil, s)
	if window != 10*time.Second || len(rows) != 2 {
		t.Fatalf("window %s, rows %+v", window, rows)
	}
	r := rows[0]
	if r.Name() != "a→b" || r.Total != 4 || r.Rate != "0.4" || r.ErrPct != "25.0%" || r.Breaker != "closed" ||
		r.DeadLetters != "1" || r.P50 != "10.0ms" || r.Tied != "75%" {
		t.Errorf("a→b: %+v", r)
	}
	if idle := rows[1]; idle.To != "idle" || idle.Breaker != "open" || idle.ErrPct != "-" || idle.P99 != "-" || idle.Tied != "-" {
		t.Errorf("a→idle: %+v", idle)
	}
}

// TestModelRowsFromText: a model's tokens per second, cost per hour and
// error share over the window between two scrapes; journal hits and
// refusals are not calls that went out.
func TestModelRowsFromText(t *testing.T) {
	scrape := func(tokens, cost, live, failed, journal float64) string {
		return fmt.Sprintf(`# TYPE baton_genai_tokens_total counter
baton_genai_tokens_total{from="a",to="llm",model="m1",type="input"} %g
baton_genai_tokens_total{from="a",to="llm",model="m1",type="output"} 0
# TYPE baton_genai_cost_usd_total counter
baton_genai_cost_usd_total{from="a",to="llm",model="m1"} %g
# TYPE baton_genai_calls_total counter
baton_genai_calls_total{from="a",to="llm",model="m1",type="live"} %g
baton_genai_calls_total{from="a",to="llm",model="m1",type="error"} %g
baton_genai_calls_total{from="a",to="llm",model="m1",type="journal"} %g
`, tokens, cost, live, failed, journal)
	}
	t0 := time.Unix(1000, 0)
	prev, err := Read(strings.NewReader(scrape(1000, 0.5, 9, 1, 4)), t0)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Read(strings.NewReader(scrape(3000, 1.5, 17, 3, 40)), t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rows := ModelRows(prev, cur)
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	if r.API != "llm" || r.Name != "m1" || r.Total != 3000 || r.TokensPerSec != "200.0" || r.CostPerHour != "$360.0000" ||
		r.Calls != 10 || r.Err != "20.0%" {
		t.Errorf("row %+v", r)
	}
}

// TestAPIs: a model API's figures over a window are summed over its
// models; journal hits and refusals are no calls; a model seen first in
// the window counts whole, and one whose counts went down from zero.
func TestAPIs(t *testing.T) {
	t.Parallel()
	const before = `# TYPE baton_genai_tokens_total counter
baton_genai_tokens_total{from="a",to="llm",model="m1",type="input"} 1000
baton_genai_tokens_total{from="a",to="api.anthropic.com:443",model="c1",type="input"} 900
# TYPE baton_genai_cost_usd_total counter
baton_genai_cost_usd_total{from="a",to="llm",model="m1"} 0.5
# TYPE baton_genai_calls_total counter
baton_genai_calls_total{from="a",to="llm",model="m1",type="live"} 9
baton_genai_calls_total{from="a",to="llm",model="m1",type="error"} 1
baton_genai_calls_total{from="a",to="api.anthropic.com:443",model="c1",type="live"} 30
`
	const after = `# TYPE baton_genai_tokens_total counter
baton_genai_tokens_total{from="a",to="llm",model="m1",type="input"} 2500
baton_genai_tokens_total{from="a",to="llm",model="m1",type="output"} 500
baton_genai_tokens_total{from="a",to="llm",model="m2",type="input"} 400
baton_genai_tokens_total{from="a",to="api.anthropic.com:443",model="c1",type="input"} 100
# TYPE baton_genai_cost_usd_total counter
baton_genai_cost_usd_total{from="a",to="llm",model="m1"} 1.5
baton_genai_cost_usd_total{from="a",to="llm",model="m2"} 0.25
# TYPE baton_genai_calls_total counter
baton_genai_calls_total{from="a",to="llm",model="m1",type="live"} 14
baton_genai_calls_total{from="a",to="llm",model="m1",type="error"} 3
baton_genai_calls_total{from="a",to="llm",model="m1",type="journal"} 40
baton_genai_calls_total{from="a",to="llm",model="m1",type="refused"} 2
baton_genai_calls_total{from="a",to="llm",model="m2",type="live"} 2
baton_genai_calls_total{from="a",to="api.anthropic.com:443",model="c1",type="live"} 1
`
	t0 := time.Unix(1000, 0)
	prev, err := Read(strings.NewReader(before), t0)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Read(strings.NewReader(after), t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := APIs(prev, cur)
	want := map[string]ModelCounts{
		// m1: 17 - 10 calls, 2 of them failed, 2000 tokens, $1; m2 whole.
		"llm": {Calls: 9, Failed: 2, Tokens: 2400, CostUSD: 1.25},
		// Restarted: from zero.
		"api.anthropic.com:443": {Calls: 1, Tokens: 100},
	}
	if len(got) != len(want) || got["llm"] != want["llm"] || got["api.anthropic.com:443"] != want["api.anthropic.com:443"] {
		t.Errorf("APIs = %+v, want %+v", got, want)
	}
	if all := APIs(nil, cur); all["llm"].Calls != 19 || all["llm"].Tokens != 3400 {
		t.Errorf("since the start: %+v", all["llm"])
	}
}

package edgehealth

import (
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

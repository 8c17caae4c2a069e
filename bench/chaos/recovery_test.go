package chaos

import (
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// every returns a completion every step ms in [from, to) ms.
func every(step, from, to int) []time.Time {
	var out []time.Time
	for ms := from; ms < to; ms += step {
		out = append(out, at(ms))
	}
	return out
}

func TestFirstCompletion(t *testing.T) {
	t.Parallel()
	done := []time.Time{at(100), at(900), at(1500)}
	tests := []struct {
		name        string
		heal, until time.Time
		want        time.Duration
	}{
		{"the first after the heal", at(200), at(3000), 700 * time.Millisecond},
		{"one at the heal itself", at(900), at(3000), 0},
		{"none within the period", at(1600), at(3000), -1},
		{"one only after the period", at(1000), at(1400), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := firstCompletion(done, tt.heal, tt.until); got != tt.want {
				t.Errorf("firstCompletion = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFullRecovery(t *testing.T) {
	t.Parallel()
	const baseline = 20.0 // completions per second: full recovery starts at 16 per rateSpan, ends below 10
	join := func(parts ...[]time.Time) []time.Time {
		var out []time.Time
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name string
		done []time.Time
		want time.Duration
	}{
		{"at the rate from the heal", every(50, 0, 5000), 0},
		{"back after a silent second", every(50, 1000, 5000), time.Second},
		{"a burst at the heal, then a dip, then back", join(every(10, 0, 300), every(50, 2000, 5000)), 2 * time.Second},
		{"too slow throughout", every(100, 0, 5000), -1},
		{"back, then down again by the end", every(50, 0, 3000), -1},
		{"back, then a little slower", join(every(50, 0, 2000), every(70, 2000, 5000)), 0},
		{"back, then a stall, then back", join(every(50, 0, 1000), every(50, 2500, 5000)), 2500 * time.Millisecond},
		{"nothing", nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fullRecovery(tt.done, at(0), at(5000), baseline); got != tt.want {
				t.Errorf("fullRecovery = %v, want %v", got, tt.want)
			}
		})
	}
	if got := fullRecovery(every(50, 0, 5000), at(0), at(5000), 0); got != -1 {
		t.Errorf("fullRecovery without a baseline = %v, want -1", got)
	}
}

func TestWaitsPast(t *testing.T) {
	t.Parallel()
	heal := at(1000)
	try := func(id string, start, end, status int, dead string) attempt {
		return attempt{id: id, start: at(start), latency: time.Duration(end-start) * time.Millisecond, status: status, dead: dead}
	}
	load := []attempt{
		try("done-before", 100, 200, 200, ""),
		try("in-flight", 800, 1300, 200, ""),
		try("retrying", 500, 600, 503, ""), try("retrying", 900, 950, 0, ""), try("retrying", 1100, 1700, 200, ""),
		try("dead-letter", 900, 1200, 502, "dl-1"),
		try("given-up-before", 100, 400, 503, ""),
		try("given-up-after", 200, 1400, 0, ""),
		try("placed-after", 1100, 3000, 200, ""),
	}
	open, longest := waitsPast(ordersOf(load), heal)
	if open != 4 || longest != 700*time.Millisecond {
		t.Errorf("waitsPast = %d open, longest %v; want 4 (in-flight, retrying, dead-letter, given-up-after), 700ms", open, longest)
	}
}

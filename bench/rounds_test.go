package main

// Rounds, medians and their JSON: how the harness reports a run.

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// inRound returns a row of a round that succeeded, with proxy CPU us µs/req
// (none when us is 0, as for direct).
func inRound(round int, name string, rps, us float64) Row {
	r := Row{Name: name, Round: round, Status: statusOK, RPS: rps}
	if us > 0 {
		r.ProxyCPUUsPerReq = &us
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestRounds(t *testing.T) {
	t.Parallel()
	failed := func(round int, name string) Row {
		return Row{Name: name, Round: round, Status: statusFailed, Note: "probe"}
	}
	ready := func(r Row, ms float64) Row {
		r.Instances = []InstanceStat{{Name: "baton", ReadyMs: &ms}}
		return r
	}
	tests := []struct {
		name string
		rows []Row
		// records is the summary's records (memory) pair: median RPS and
		// CPU, and each round's RPS; nil when it should be unavailable.
		records *OnOff
		// direct is each row's ratio to direct, in row order; -1 for none.
		direct []float64
		want   []string
		not    []string
	}{
		{
			name: "3 rounds: odd count",
			rows: []Row{
				inRound(1, rowDirect, 2000, 0), inRound(1, rowFloor, 1500, 100), inRound(1, rowBaton1, 1000, 120),
				inRound(1, rowBaton2, 910, 224), inRound(1, rowBaton2NoRecords, 1000, 200),
				inRound(2, rowDirect, 2000, 0), inRound(2, rowFloor, 1500, 100), inRound(2, rowBaton1, 1000, 140),
				inRound(2, rowBaton2, 860, 230), inRound(2, rowBaton2NoRecords, 1000, 200),
				inRound(3, rowDirect, 2000, 0), inRound(3, rowFloor, 1500, 100), inRound(3, rowBaton1, 1000, 121),
				inRound(3, rowBaton2, 880, 220), inRound(3, rowBaton2NoRecords, 1000, 200),
			},
			records: &OnOff{RPS: 0.88, CPU: ptr(1.12), Each: []float64{0.91, 0.86, 0.88}},
			want: []string{
				// One round alone (1.40) would have missed.
				"baton-1hop CPU/req ÷ go-floor CPU/req = 1.21, median of 3 rounds (1.20, 1.40, 1.21) (target ≤ 1.3: met)",
				"baton-2hop CPU/req ÷ (2 × go-floor CPU/req) = 1.12, median of 3 rounds (1.12, 1.15, 1.10) (two Batons",
				"records on ÷ off throughput (memory) = 0.88, median of 3 rounds (0.91, 0.86, 0.88) (target ≥ 0.85: met); proxy CPU/req on ÷ off = 1.12",
			},
			not: []string{"n/a", "dedupe on", "failed"},
		},
		{
			name: "2 rounds: even count, ratio to direct per round",
			rows: []Row{
				inRound(1, rowDirect, 1000, 0), inRound(1, rowFloor, 800, 100), ready(inRound(1, rowBaton1, 500, 120), 12),
				inRound(1, rowBaton2, 700, 130), inRound(1, rowBaton2NoRecords, 1000, 100),
				inRound(2, rowDirect, 2000, 0), inRound(2, rowFloor, 800, 100), ready(inRound(2, rowBaton1, 500, 150), 13),
				inRound(2, rowBaton2, 900, 110), inRound(2, rowBaton2NoRecords, 1000, 100),
			},
			records: &OnOff{RPS: 0.80, CPU: ptr(1.20), Each: []float64{0.70, 0.90}},
			direct:  []float64{1, 0.8, 0.5, 0.7, 1, 1, 0.4, 0.25, 0.45, 0.5},
			want: []string{
				"Baton start → admin /readyz 200 (polled every 1ms): baton-1hop #1 12.0ms; baton-1hop #2 13.0ms",
				"baton-1hop CPU/req ÷ go-floor CPU/req = 1.35, median of 2 rounds (1.20, 1.50) (target ≤ 1.3: MISSED)",
				// Round 2 alone (0.90) would have met the target.
				"records on ÷ off throughput (memory) = 0.80, median of 2 rounds (0.70, 0.90) (target ≥ 0.85: MISSED); proxy CPU/req on ÷ off = 1.20",
			},
		},
		{
			name: "a row of a pair failed in one round",
			rows: []Row{
				inRound(1, rowDirect, 1000, 0), inRound(1, rowFloor, 800, 100), inRound(1, rowBaton1, 500, 120),
				inRound(1, rowBaton2, 950, 110), inRound(1, rowBaton2NoRecords, 1000, 100),
				failed(2, rowDirect), inRound(2, rowFloor, 800, 100), inRound(2, rowBaton1, 500, 126),
				inRound(2, rowBaton2, 500, 300), failed(2, rowBaton2NoRecords),
				inRound(3, rowDirect, 1000, 0), failed(3, rowFloor), inRound(3, rowBaton1, 500, 120),
				inRound(3, rowBaton2, 870, 130), inRound(3, rowBaton2NoRecords, 1000, 100),
			},
			records: &OnOff{RPS: 0.91, CPU: ptr(1.20), Each: []float64{0.95, 0.87}},
			direct:  []float64{1, 0.8, 0.5, 0.95, 1, -1, -1, -1, -1, -1, 1, -1, 0.5, 0.87, 1},
			want: []string{
				"baton-1hop CPU/req ÷ go-floor CPU/req = 1.23, median of 2 rounds (1.20, 1.26, n/a) (target ≤ 1.3: met)",
				"records on ÷ off throughput (memory) = 0.91, median of 2 rounds (0.95, n/a, 0.87) (target ≥ 0.85: met); proxy CPU/req on ÷ off = 1.20",
				"direct #2 failed: probe",
				"baton-2hop-norecords #2 failed: probe",
				"go-floor #3 failed: probe",
			},
		},
		{
			name: "a pair failed in every round",
			rows: []Row{
				inRound(1, rowBaton2, 900, 110), failed(1, rowBaton2NoRecords),
				inRound(2, rowBaton2, 900, 110), failed(2, rowBaton2NoRecords),
			},
			want: []string{
				"records on ÷ off throughput (memory) = n/a (needs baton-2hop and baton-2hop-norecords to succeed)",
				"baton-2hop-norecords #1 failed: probe",
				"baton-2hop-norecords #2 failed: probe",
			},
			not: []string{"median"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := &results{Rows: tt.rows}
			res.derive()
			rounds := 0
			for _, r := range tt.rows {
				rounds = max(rounds, r.Round)
			}
			if len(res.Rounds) != rounds {
				t.Errorf("Rounds: got %d summaries, want %d", len(res.Rounds), rounds)
			}
			got := res.Summary.RecordsMemory
			switch w := tt.records; {
			case w == nil && got != nil:
				t.Errorf("records (memory): got %+v, want none", got)
			case w != nil && got == nil:
				t.Errorf("records (memory): got none, want %+v", w)
			case w != nil:
				if !near(got.RPS, w.RPS) || got.CPU == nil || !near(*got.CPU, *w.CPU) {
					t.Errorf("records (memory): got RPS %v CPU %v, want the medians %v, %v", got.RPS, fmtPtr(got.CPU), w.RPS, *w.CPU)
				}
				if !slices.EqualFunc(got.Each, w.Each, near) {
					t.Errorf("records (memory) Each: got %v, want %v", got.Each, w.Each)
				}
			}
			for i, w := range tt.direct {
				r := res.Rows[i]
				switch {
				case w < 0 && r.RatioToDirect != nil:
					t.Errorf("%s: ratio to direct %v, want none", r.label(), *r.RatioToDirect)
				case w >= 0 && (r.RatioToDirect == nil || !near(*r.RatioToDirect, w)):
					t.Errorf("%s: ratio to direct %s, want %v (the direct row of its round)", r.label(), fmtPtr(r.RatioToDirect), w)
				}
			}
			all := strings.Join(res.findings(), "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("findings lack %q:\n%s", w, all)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(all, n) {
					t.Errorf("findings have %q:\n%s", n, all)
				}
			}
		})
	}
}

func ptr(v float64) *float64 { return &v }

func fmtPtr(v *float64) string {
	if v == nil {
		return "nil"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []float64
		want *float64
	}{
		{nil, nil},
		{[]float64{3}, ptr(3)},
		{[]float64{3, 1, 2}, ptr(2)},
		{[]float64{4, 1, 3, 2}, ptr(2.5)},
		{[]float64{0.9, 0.7}, ptr(0.8)},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.in)
		got := median(in)
		if (got == nil) != (tt.want == nil) || got != nil && !near(*got, *tt.want) {
			t.Errorf("median(%v): got %s, want %s", tt.in, fmtPtr(got), fmtPtr(tt.want))
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("median(%v) reordered its argument to %v; Each relies on round order", tt.in, in)
		}
	}
}

// TestMedianEveryRatio checks that medianOf takes the median of every ratio
// of Summary: one left out of ratios() or pairs() would be nil here.
func TestMedianEveryRatio(t *testing.T) {
	t.Parallel()
	res := &results{}
	for round := 1; round <= 2; round++ {
		for _, name := range rowNames {
			us := 100.0
			if name == rowDirect {
				us = 0
			}
			res.Rows = append(res.Rows, inRound(round, name, 1000, us))
		}
	}
	res.derive()
	for _, s := range append([]Summary{res.Summary}, res.Rounds...) {
		v := reflect.ValueOf(s)
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Pointer && f.IsNil() {
				t.Errorf("%s is nil with every row in every round", v.Type().Field(i).Name)
			}
		}
	}
}

func TestRoundsJSON(t *testing.T) {
	t.Parallel()
	enc := func(rows []Row) string {
		res := &results{Rows: rows}
		res.derive()
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	single := enc([]Row{inRound(0, rowBaton2, 900, 110), inRound(0, rowBaton2NoRecords, 1000, 100)})
	for _, n := range []string{`"round"`, `"rounds"`, `"rps_on_over_off_each"`, `"repeat"`} {
		if strings.Contains(single, n) {
			t.Errorf("single run: JSON has %s:\n%s", n, single)
		}
	}
	repeated := enc([]Row{
		inRound(1, rowBaton2, 900, 110), inRound(1, rowBaton2NoRecords, 1000, 100),
		inRound(2, rowBaton2, 800, 110), inRound(2, rowBaton2NoRecords, 1000, 100),
	})
	for _, w := range []string{`"round":1`, `"round":2`, `"rounds":[{`, `"rps_on_over_off_each":[0.9,0.8]`} {
		if !strings.Contains(repeated, w) {
			t.Errorf("repeated run: JSON lacks %s:\n%s", w, repeated)
		}
	}
}

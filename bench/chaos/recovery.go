package chaos

import (
	"slices"
	"sort"
	"time"
)

// What recovery after a fault is measured by. Each figure starts at the
// heal, the moment the harness ended the fault, and looks at the load's
// attempts only (not the resume's).
const (
	// rateSpan is the span over which the completion rate is taken, stepped
	// by rateStep.
	rateSpan = time.Second
	rateStep = 100 * time.Millisecond
	// recoveredShare is the share of the warm-up's completion rate a span
	// must reach to start full recovery, and relapseShare the share below
	// which a later span ends it again. recoveredShare is below 1 because
	// the rate wobbles from one second to the next and drifts over a run by
	// some percent; relapseShare is well below it so that only a stall, not
	// that wobble, counts as not recovered.
	recoveredShare = 0.8
	relapseShare   = 0.5
)

// completions returns when each completed attempt of load got its answer,
// in order.
func completions(load []attempt) []time.Time {
	var done []time.Time
	for _, a := range load {
		if a.ok() {
			done = append(done, a.end())
		}
	}
	slices.SortFunc(done, func(x, y time.Time) int { return x.Compare(y) })
	return done
}

// countIn counts the times of sorted done in [from, to).
func countIn(done []time.Time, from, to time.Time) int {
	lo, _ := slices.BinarySearchFunc(done, from, func(t, x time.Time) int { return t.Compare(x) })
	hi, _ := slices.BinarySearchFunc(done, to, func(t, x time.Time) int { return t.Compare(x) })
	return hi - lo
}

// ratePerSecond is the completions per second in [from, to).
func ratePerSecond(done []time.Time, from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	return float64(countIn(done, from, to)) / to.Sub(from).Seconds()
}

// firstCompletion is the time from heal to the first answer after it that
// completed an order, within [heal, until); -1 when there is none.
func firstCompletion(done []time.Time, heal, until time.Time) time.Duration {
	i, _ := slices.BinarySearchFunc(done, heal, func(t, x time.Time) int { return t.Compare(x) })
	if i == len(done) || !done[i].Before(until) {
		return -1
	}
	return done[i].Sub(heal)
}

// fullRecovery is the time from heal to full recovery: the first
// completion in the first span (rateSpan long, spans a rateStep apart from
// heal on, ending by until) whose completion rate is recoveredShare of
// baseline or more, and after which no span falls below relapseShare of
// it. Taking the completion rather than the span's start keeps the figure
// from running ahead of the load by the share a span may miss. -1 when no
// span qualifies (the run had not recovered when the recovery period
// ended).
func fullRecovery(done []time.Time, heal, until time.Time, baseline float64) time.Duration {
	if baseline <= 0 {
		return -1
	}
	enter := recoveredShare * baseline * rateSpan.Seconds()
	relapse := relapseShare * baseline * rateSpan.Seconds()
	from := time.Duration(-1)
	for step := time.Duration(0); !heal.Add(step + rateSpan).After(until); step += rateStep {
		n := float64(countIn(done, heal.Add(step), heal.Add(step+rateSpan)))
		switch {
		case n < relapse || n == 0:
			from = -1
		case from < 0 && n >= enter:
			from = step
		}
	}
	if from < 0 {
		return -1
	}
	return firstCompletion(done, heal.Add(from), until) + from
}

// waitsPast counts the orders open at heal (placed before it, and neither
// completed nor answered with a dead letter nor given up on by then) and
// returns the longest that one of them waited after heal for its end: the
// answer that completed it or named a dead letter, or else the last answer
// before its client gave up. byOrder holds each order's load attempts in
// the order they were made.
func waitsPast(byOrder map[string][]attempt, heal time.Time) (open int, longest time.Duration) {
	for _, as := range byOrder {
		if !as[0].start.Before(heal) {
			continue
		}
		last := as[len(as)-1]
		for _, a := range as {
			if a.final() {
				last = a
				break
			}
		}
		if !last.end().After(heal) {
			continue // ended before the heal
		}
		open++
		longest = max(longest, last.end().Sub(heal))
	}
	return open, longest
}

// ordersOf groups the attempts by order, each order's in the order made.
func ordersOf(load []attempt) map[string][]attempt {
	m := map[string][]attempt{}
	for _, a := range load {
		m[a.id] = append(m[a.id], a)
	}
	for _, as := range m {
		sort.SliceStable(as, func(i, j int) bool { return as[i].start.Before(as[j].start) })
	}
	return m
}

// recovery is the time from end to the start of the first whole second of
// attempts, within [end, until), in which every attempt succeeded; -1 when
// there is none.
func recovery(attempts []attempt, end, until time.Time) time.Duration {
	var in []attempt
	for _, a := range attempts {
		if !a.start.Before(end) && a.start.Before(until) {
			in = append(in, a)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].start.Before(in[j].start) })
	for step := time.Duration(0); end.Add(step + time.Second).Before(until.Add(time.Millisecond)); step += 100 * time.Millisecond {
		from, to := end.Add(step), end.Add(step+time.Second)
		n, bad := 0, 0
		for _, a := range in {
			if !a.start.Before(from) && a.start.Before(to) {
				n++
				if !a.ok() {
					bad++
				}
			}
		}
		if n > 0 && bad == 0 {
			return step
		}
	}
	return -1
}

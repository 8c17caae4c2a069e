package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// phase is one fault of the schedule: on from start to end, then the load
// goes on until after.
type phase struct {
	name              string
	start, end, after time.Time
}

// Window is what the clients saw over a span of a run.
type Window struct {
	Requests  int           `json:"requests"`
	OK        int           `json:"ok"`
	Dead      int           `json:"dead_lettered"` // answers naming a dead letter
	Errors    int           `json:"errors"`        // other answers, and no answer
	ErrorRate float64       `json:"error_rate"`
	P50       time.Duration `json:"p50"`
	P99       time.Duration `json:"p99"`
}

// PhaseReport is one fault's figures. The durations after the fault are
// counted from its end (the heal); -1 is "not within the recovery period".
type PhaseReport struct {
	Fault   string        `json:"fault"`
	During  Window        `json:"during"`
	After   Window        `json:"after"`
	Recover time.Duration `json:"time_to_recover"` // to the first whole second without errors

	OpenAtHeal      int           `json:"open_at_heal"`             // orders placed before the heal and not ended at it
	FirstCompletion time.Duration `json:"time_to_first_completion"` // to the first answer that completed an order
	FullRecovery    time.Duration `json:"time_to_full_recovery"`    // to when the completion rate is back for good (recovery.go)
	LongestWait     time.Duration `json:"longest_wait_after_heal"`  // the longest an order open at the heal waited past it
}

// Report is what a run found.
type Report struct {
	Options Options       `json:"-"`
	Phases  []phase       `json:"-"`
	Faults  []PhaseReport `json:"faults"`
	Overall Window        `json:"overall"`
	// Baseline is the completion rate of the warm-up, before any fault:
	// what full recovery is measured against.
	Baseline float64 `json:"warmup_completions_per_second"`

	Placed       int `json:"placed"`        // orders the clients placed
	Completed    int `json:"completed"`     // ...that completed during the load
	DeadLettered int `json:"dead_lettered"` // ...that ended as a dead letter
	Open         int `json:"open"`          // ...that the client gave up on without either
	Resumed      int `json:"resumed"`       // orders re-sent after the load
	Final        int `json:"final"`         // orders completed in the end

	Duplicates int      `json:"duplicates"`   // orders booked more than once
	Lost       int      `json:"lost"`         // orders neither completed nor a dead letter a Baton lists
	Unresumed  int      `json:"unresumed"`    // listed dead letters still not completed after the resume
	ReRuns     int      `json:"relay_reruns"` // runs of agents a and b past the first for one order (answered from the windows below)
	Stray      Stray    `json:"stray_port_calls"`
	Notes      []string `json:"notes,omitempty"`
}

// Stray counts the calls agents a and b made, through their Batons'
// egress, to the next agent's own host and port: no peer's name or port,
// so never a handoff.
type Stray struct {
	Sent      int `json:"sent"`
	Refused   int `json:"refused"`   // 403 unknown-destination, as they must be
	Answered  int `json:"answered"`  // any other answer
	Delivered int `json:"delivered"` // calls that reached an agent: the run fails
}

// phaseAt names the phase of the run that t falls in: a fault, the
// recovery after it, or the resume after the load.
func (r *Report) phaseAt(t time.Time) string {
	for _, p := range r.Phases {
		switch {
		case t.Before(p.start):
		case t.Before(p.end):
			return "during " + p.name
		case t.Before(p.after):
			return "after " + p.name
		}
	}
	return "the resume"
}

// check counts the side effects per order and what became of each order.
func (r *Report) check(c *cluster, before, after map[string]keyState) {
	effects := c.agents.effectsOf()
	for id, st := range after {
		n := effects[id]
		switch {
		case n > 1:
			r.Duplicates++
			r.note(fmt.Sprintf("order %s booked %d times:", id, n))
			for _, b := range c.agents.bookingsOf(id) {
				r.note(fmt.Sprintf("  at %s (%s), run %d of agent b, traceparent %q, idempotency key %q",
					b.at.Sub(r.Phases[0].start).Round(time.Millisecond), r.phaseAt(b.at), b.run, b.trace, b.key))
			}
		case st.completed && n == 0:
			r.note(fmt.Sprintf("order %s completed without a booking", id))
			r.Lost++
		}
		if st.completed {
			r.Final++
			continue
		}
		dl := st.deadLetter
		if dl == "" {
			dl = before[id].deadLetter
		}
		if dl != "" && listed(c, dl) {
			r.Unresumed++
			continue
		}
		r.Lost++
		r.note(fmt.Sprintf("order %s lost: %s, and no Baton lists a dead letter for it", id, st))
	}
	s := &c.agents.stray
	r.Stray = Stray{Sent: int(s.sent.Load()), Refused: int(s.refused.Load()), Answered: int(s.answered.Load()), Delivered: int(s.arrived.Load())}
	if r.Stray.Delivered > 0 {
		r.note(fmt.Sprintf("%d stray-port call(s) reached an agent", r.Stray.Delivered))
	}
	for _, agent := range []string{"a", "b"} {
		for _, n := range c.agents.runsOf(agent) {
			if n > 1 {
				r.ReRuns += n - 1
			}
		}
	}
}

// listed reports whether a Baton of the chain lists id as a dead letter.
func listed(c *cluster, id string) bool {
	cl := &http.Client{Timeout: 2 * time.Second}
	for _, b := range c.batons {
		resp, err := cl.Get("http://" + b.admin + "/v1/deadletters/" + id)
		if err != nil {
			continue
		}
		var rec struct{ State string }
		_ = json.NewDecoder(resp.Body).Decode(&rec)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && rec.State == "dead" {
			return true
		}
	}
	return false
}

func (r *Report) note(s string) {
	if len(r.Notes) < 20 {
		r.Notes = append(r.Notes, s)
	}
}

// measure computes each phase's windows and recovery from the attempts.
func (r *Report) measure(attempts []attempt) {
	r.Overall = window(attempts, time.Time{}, time.Now())
	var load []attempt
	for _, a := range attempts {
		if !a.resuming {
			load = append(load, a)
		}
	}
	done, orders := completions(load), ordersOf(load)
	warm := r.Phases[0]
	r.Baseline = ratePerSecond(done, warm.start, warm.end)
	for _, p := range r.Phases[1:] {
		pr := PhaseReport{Fault: p.name, During: window(attempts, p.start, p.end), After: window(attempts, p.end, p.after),
			Recover: recovery(attempts, p.end, p.after), FirstCompletion: firstCompletion(done, p.end, p.after),
			FullRecovery: fullRecovery(done, p.end, p.after, r.Baseline)}
		pr.OpenAtHeal, pr.LongestWait = waitsPast(orders, p.end)
		r.Faults = append(r.Faults, pr)
	}
}

// window summarises the attempts started in [from, to).
func window(attempts []attempt, from, to time.Time) Window {
	var w Window
	var lat []time.Duration
	for _, a := range attempts {
		if a.start.Before(from) || !a.start.Before(to) {
			continue
		}
		w.Requests++
		lat = append(lat, a.latency)
		switch {
		case a.ok():
			w.OK++
		case a.dead != "":
			w.Dead++
		default:
			w.Errors++
		}
	}
	if w.Requests > 0 {
		w.ErrorRate = float64(w.Requests-w.OK) / float64(w.Requests)
		slices.Sort(lat)
		w.P50, w.P99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return w
}

// within writes a duration after a heal, or that it was longer than the
// recovery period.
func (r *Report) within(d time.Duration) string {
	if d < 0 {
		return ">" + ms(r.Options.Recover)
	}
	return ms(d)
}

func ms(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

func (r *Report) write(w io.Writer) {
	fmt.Fprintf(w, "\n%-14s %9s %7s %6s %7s %9s %9s | %9s %7s %9s %9s | %9s\n", "fault", "requests", "ok", "dead", "err%",
		"p50", "p99", "after", "err%", "p50", "p99", "recovered")
	for _, p := range r.Faults {
		fmt.Fprintf(w, "%-14s %9d %7d %6d %6.1f%% %9s %9s | %9d %6.1f%% %9s %9s | %9s\n", p.Fault, p.During.Requests, p.During.OK,
			p.During.Dead, 100*p.During.ErrorRate, ms(p.During.P50), ms(p.During.P99), p.After.Requests, 100*p.After.ErrorRate,
			ms(p.After.P50), ms(p.After.P99), ms(p.Recover))
	}
	o := r.Overall
	fmt.Fprintf(w, "%-14s %9d %7d %6d %6.1f%% %9s %9s\n\n", "overall", o.Requests, o.OK, o.Dead, 100*o.ErrorRate, ms(o.P50), ms(o.P99))
	fmt.Fprintf(w, "after each fault's end: warm-up %.0f completions/s; full recovery: a second at %.0f%% of that or more, none below %.0f%% after it\n",
		r.Baseline, 100*recoveredShare, 100*relapseShare)
	fmt.Fprintf(w, "%-14s %12s %12s %12s %14s\n", "fault", "open at heal", "first done", "full", "longest wait")
	for _, p := range r.Faults {
		fmt.Fprintf(w, "%-14s %12d %12s %12s %14s\n", p.Fault, p.OpenAtHeal, r.within(p.FirstCompletion),
			r.within(p.FullRecovery), ms(p.LongestWait))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "orders placed %d: completed %d, dead-lettered %d, given up %d; resumed %d; completed in the end %d\n",
		r.Placed, r.Completed, r.DeadLettered, r.Open, r.Resumed, r.Final)
	fmt.Fprintf(w, "side effects: %d order(s) booked more than once; lost: %d; dead letters still listed: %d\n",
		r.Duplicates, r.Lost, r.Unresumed)
	fmt.Fprintf(w, "agents a and b re-ran %d time(s) for an order they had done (their calls answered from the windows below)\n", r.ReRuns)
	fmt.Fprintf(w, "stray-port calls: %d sent, %d refused (403 unknown-destination), %d answered otherwise, %d delivered to an agent\n",
		r.Stray.Sent, r.Stray.Refused, r.Stray.Answered, r.Stray.Delivered)
	for _, n := range r.Notes {
		fmt.Fprintln(w, "  ", n)
	}
}

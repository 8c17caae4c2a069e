package middleware

// The edge counters recorded outside Measure: retries, dead letters and
// breaker transitions, which the proxy's transport counts on an egress edge,
// and the untrusted-content labels and flagged injections.

// Retries counts tries after the first on an egress edge.
func (m *Metrics) Retries(e *Edge, n int) {
	if m == nil || e == nil || n <= 0 {
		return
	}
	if !e.retries.add(int64(n)) {
		e.label(&e.retries)
	}
}

// DeadLetter counts a handoff dead-lettered on an egress edge.
func (m *Metrics) DeadLetter(e *Edge) {
	if m == nil || e == nil {
		return
	}
	if !e.deadLetters.add(1) {
		e.label(&e.deadLetters)
	}
}

// BreakerTransition counts the breaker of an egress edge entering state (0
// closed, 1 half-open, 2 open).
func (m *Metrics) BreakerTransition(e *Edge, state int) {
	if m == nil || e == nil || state < 0 || state >= len(breakerStates) {
		return
	}
	if c := &e.transitions[state]; !c.add(1) {
		e.label(c, keyState.String(breakerStates[state]))
	}
}

// Untrusted counts, on the request's edge (EdgeOf), the untrusted-content
// labels attached to a handoff and whether its content was flagged as a
// likely prompt injection. The untrusted-content tracking calls it once
// per handoff it labels.
func (m *Metrics) Untrusted(e *Edge, labelled int, flagged bool) {
	if m == nil || e == nil {
		return
	}
	if labelled > 0 && !e.untrusted.add(int64(labelled)) {
		e.label(&e.untrusted)
	}
	if flagged && !e.injections.add(1) {
		e.label(&e.injections)
	}
}

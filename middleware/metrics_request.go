package middleware

// What a finished request records: Measure, the middleware that records it
// once the request is done, and the request's duration, outcome, hops,
// contract, dedupe, signature, policy, untrusted-content and correlation
// series on its edge.

import (
	"net/http"
	"time"
)

// Measure returns the middleware that records each request's metrics when
// it ends. A nil m gives a middleware that does nothing.
func Measure(m *Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if m == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer m.ended(r)
			next.ServeHTTP(w, r)
		})
	}
}

func (m *Metrics) ended(r *http.Request) {
	m.served.Add(1)
	if in := InfoFromContext(r.Context()); in != nil {
		m.request(r.Method, in, time.Since(in.Start))
	}
}

// Served returns how many requests the egress and ingress listeners have
// served: what changed nothing in the metrics while it stays the same (a
// nil Metrics: 0).
func (m *Metrics) Served() int64 {
	if m == nil {
		return 0
	}
	return m.served.Load()
}

// outcomeOf tells what became of the request.
func outcomeOf(in *Info) outcome {
	switch {
	case in.Dedupe == DedupeReplayed:
		return outcomeReplayed
	case in.DeadLetter != "":
		return outcomeDeadLettered
	case !in.Delivered, in.PolicyDenial != "":
		return outcomeRefused
	case in.Err != nil || in.Status() == 0:
		return outcomeFailed
	}
	return outcomeDelivered
}

// request records everything a finished request tells.
func (m *Metrics) request(method string, in *Info, d time.Duration) {
	e := m.EdgeOf(in)
	status := in.Status()
	secs := d.Seconds()
	m.onEdge(e, edgeDuration).record(secs)
	if int(in.Side) < len(m.server) && m.server[in.Side] != nil {
		m.server[in.Side].point(method, status).record(secs)
	}
	o, cl := outcomeOf(in), classOf(status)
	if c := &e.requests[o][cl]; !c.add(1) {
		e.label(c, keyOutcome.String(outcomeNames[o]), keyStatusClass.String(classNames[cl]))
	}
	if in.Hop > 0 && in.Handoff() {
		m.onEdge(e, edgeHops).recordInt(int64(in.Hop))
	}
	if in.Contract != nil {
		m.contract(e, in)
	}
	if in.Dedupe != "" {
		for i, v := range dedupeOutcomes {
			if v == in.Dedupe {
				if c := &e.dedupe[i]; !c.add(1) {
					e.label(c, keyOutcome.String(string(v)))
				}
			}
		}
	}
	if in.SignatureFailure != "" {
		i := reasonIndex(signatureReasons[:], in.SignatureFailure)
		if c := &e.sig[i]; !c.add(1) {
			e.label(c, keyReason.String(signatureReasons[i]))
		}
	}
	if in.PolicyDenial != "" {
		i := reasonIndex(denialReasons[:], in.PolicyDenial)
		if c := &e.deny[i]; !c.add(1) {
			e.label(c, keyReason.String(denialReasons[i]))
		}
	}
	if in.Labels != nil || in.Injection != nil {
		n := 0
		if in.Labels != nil {
			n = len(in.Labels.Spans)
		}
		m.Untrusted(e, n, in.Injection != nil)
	}
	if in.Side == Egress && in.Handoff() && in.To != "" && in.Compensation == nil {
		e.countCorrelation(in)
		if in.Uncorrelated && !e.uncorrelated.add(1) {
			e.label(&e.uncorrelated)
		}
	}
}

func (m *Metrics) contract(e *Edge, in *Info) {
	res, pol := in.Contract, in.ContractPolicy
	m.onEdge(e, edgeCompleteness).record(res.Completeness)
	size := len(res.Envelope)
	m.onEdge(e, edgeEnvSize).recordInt(int64(size))
	if pol.MaxBytes > 0 {
		m.onEdge(e, edgeEnvRatio).record(float64(size) / float64(pol.MaxBytes))
	}
	mode := int(pol.Mode)
	if mode >= len(e.violations) {
		return
	}
	for _, v := range res.Violations {
		k := kindIndex(v.Kind)
		if c := &e.violations[mode][k]; !c.add(1) {
			e.label(c, keyMode.String(pol.Mode.String()), keyKind.String(string(violationKinds[k])))
		}
	}
}

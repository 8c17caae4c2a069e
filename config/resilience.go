package config

import (
	"time"
)

// Retry configures retries of an outbound edge. The top-level block applies
// to every peer; an outbound edge's block overrides the keys it sets.
type Retry struct {
	// Attempts is the number of retries after the first try; 0 means none.
	Attempts *int `yaml:"attempts"`
	// Backoff is the base of the exponential backoff (full jitter).
	Backoff Duration `yaml:"backoff"`
	// MaxBackoff caps one wait, Retry-After included.
	MaxBackoff Duration `yaml:"max_backoff"`
	// Budget is the largest share of requests that may be retries over
	// BudgetWindow (0.2: at most one retry per five requests), so that a
	// struggling peer is not hammered. A few retries per window are always
	// allowed so that a quiet edge can still retry.
	Budget *float64 `yaml:"budget"`
	// BudgetWindow is the rolling window of the budget.
	BudgetWindow Duration `yaml:"budget_window"`
	// PerTryTimeout bounds each attempt until response headers; 0: only
	// timeouts.upstream_header applies.
	PerTryTimeout Duration `yaml:"per_try_timeout"`
	// Timeout bounds all attempts together until response headers; 0: none.
	Timeout Duration `yaml:"timeout"`
	// AgentRetryAfter retries an answer the receiving agent itself marks as
	// safe to try again: a 429 or 503 that carries Retry-After (the agent
	// says it did not act). Off, an agent's own failure answer is final:
	// only what surely did not reach the agent is retried (docs/resilience.md).
	AgentRetryAfter *bool `yaml:"agent_retry_after"`
}

// Breaker configures the circuit breaker of a peer.
type Breaker struct {
	// Failures is the number of consecutive failures that open the breaker.
	Failures int `yaml:"failures"`
	// OpenFor is how long the breaker stays open, when it opens, before
	// letting a probe through (half-open).
	OpenFor Duration `yaml:"open_for"`
	// MaxOpenFor caps the open time, which doubles with each failed probe
	// (proxy/breaker.go). Unset, it is DefaultBreakerMaxOpenFor, or OpenFor
	// when that is longer.
	MaxOpenFor Duration `yaml:"max_open_for"`
	// HalfOpenRequests is how many probes may run while half-open.
	HalfOpenRequests int `yaml:"half_open_requests"`
}

// Records configures handoff records and checkpoints.
type Records struct {
	// Enabled turns records, checkpoints and dead letters on (the default)
	// or off. Off, nothing is written to the store for them; a dead letter
	// is only logged and cannot be replayed.
	Enabled *bool `yaml:"enabled"`
	// Retention is how long records, checkpoints and dead letters are kept.
	Retention Duration `yaml:"retention"`
	// MaxBodyBytes caps the request body stored with a checkpoint; a larger
	// (or streamed) request is recorded without its body, is never retried
	// and cannot be replayed.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
}

// Resilience defaults.
const (
	DefaultRetryAttempts     = 2
	DefaultRetryBackoff      = 100 * time.Millisecond
	DefaultRetryMaxBackoff   = 2 * time.Second
	DefaultRetryBudget       = 0.2
	DefaultBudgetWindow      = 10 * time.Second
	DefaultBreakerFailures   = 5
	DefaultBreakerOpenFor    = time.Second
	DefaultBreakerMaxOpenFor = 30 * time.Second
	DefaultHalfOpenRequests  = 1
	DefaultRetention         = 7 * 24 * time.Hour
	DefaultRecordBodyBytes   = 1 << 20
)

func (r Retry) over(o *Retry) Retry {
	if o == nil {
		return r
	}
	if o.Attempts != nil {
		r.Attempts = o.Attempts
	}
	if o.Backoff != 0 {
		r.Backoff = o.Backoff
	}
	if o.MaxBackoff != 0 {
		r.MaxBackoff = o.MaxBackoff
	}
	if o.Budget != nil {
		r.Budget = o.Budget
	}
	if o.BudgetWindow != 0 {
		r.BudgetWindow = o.BudgetWindow
	}
	if o.PerTryTimeout != 0 {
		r.PerTryTimeout = o.PerTryTimeout
	}
	if o.Timeout != 0 {
		r.Timeout = o.Timeout
	}
	if o.AgentRetryAfter != nil {
		r.AgentRetryAfter = o.AgentRetryAfter
	}
	return r
}

func (b Breaker) over(o *Breaker) Breaker {
	if o == nil {
		return b
	}
	if o.Failures != 0 {
		b.Failures = o.Failures
	}
	if o.OpenFor != 0 {
		b.OpenFor = o.OpenFor
	}
	if o.MaxOpenFor != 0 {
		b.MaxOpenFor = o.MaxOpenFor
	}
	if o.HalfOpenRequests != 0 {
		b.HalfOpenRequests = o.HalfOpenRequests
	}
	return b
}

// RecordsOn reports whether records are enabled.
func (c *Config) RecordsOn() bool { return c.Records.Enabled == nil || *c.Records.Enabled }

// RetryFor returns the complete retry settings of the outbound edge to peer.
func (c *Config) RetryFor(peer string) Retry {
	attempts, budget, agentRetry := DefaultRetryAttempts, DefaultRetryBudget, false
	r := Retry{Attempts: &attempts, Backoff: Duration(DefaultRetryBackoff), MaxBackoff: Duration(DefaultRetryMaxBackoff),
		Budget: &budget, BudgetWindow: Duration(DefaultBudgetWindow), AgentRetryAfter: &agentRetry}.over(&c.Retry)
	if e, ok := c.OutEdge(peer); ok {
		r = r.over(e.Retry)
	}
	return r
}

// BreakerFor returns the complete breaker settings of peer.
func (c *Config) BreakerFor(peer string) Breaker {
	b := c.topBreaker()
	if e, ok := c.OutEdge(peer); ok {
		b = b.over(e.Breaker)
	}
	return b.capped()
}

// defaultBreaker is what the breaker keys mean unset, max_open_for aside
// (capped).
func defaultBreaker() Breaker {
	return Breaker{Failures: DefaultBreakerFailures, OpenFor: Duration(DefaultBreakerOpenFor),
		HalfOpenRequests: DefaultHalfOpenRequests}
}

// topBreaker is the top-level breaker block over the defaults, max_open_for
// left unset when the block does not set it.
func (c *Config) topBreaker() Breaker { return defaultBreaker().over(&c.Breaker) }

// capped sets an unset max_open_for: the default cap, or open_for when that
// is longer, so that a long open_for alone keeps its meaning.
func (b Breaker) capped() Breaker {
	if b.MaxOpenFor == 0 {
		b.MaxOpenFor = max(Duration(DefaultBreakerMaxOpenFor), b.OpenFor)
	}
	return b
}

func validateRetry(bad badFunc, path string, r *Retry) {
	if r == nil {
		return
	}
	if r.Attempts != nil && (*r.Attempts < 0 || *r.Attempts > 10) {
		bad(path+".attempts", *r.Attempts, "must be between 0 (no retry) and 10")
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"backoff", r.Backoff}, {"max_backoff", r.MaxBackoff}, {"budget_window", r.BudgetWindow},
		{"per_try_timeout", r.PerTryTimeout}, {"timeout", r.Timeout}} {
		if d.v < 0 {
			bad(path+"."+d.key, d.v.D().String(), "must be a duration >= 0")
		}
	}
	if r.Backoff > 0 && r.MaxBackoff > 0 && r.MaxBackoff < r.Backoff {
		bad(path+".max_backoff", r.MaxBackoff.D().String(), "must not be shorter than backoff ("+r.Backoff.D().String()+")")
	}
	if r.Budget != nil && (*r.Budget < 0 || *r.Budget > 1) {
		bad(path+".budget", *r.Budget, "must be a share between 0 and 1, like 0.2")
	}
}

// validateBreaker checks the breaker block b at path, which overrides the
// settings under (the defaults, or the top-level block for an edge's).
func validateBreaker(bad badFunc, path string, b *Breaker, under Breaker) {
	if b == nil {
		return
	}
	if b.Failures < 0 {
		bad(path+".failures", b.Failures, "must be >= 1")
	}
	if b.OpenFor < 0 {
		bad(path+".open_for", b.OpenFor.D().String(), "must be a duration > 0")
	}
	if b.MaxOpenFor < 0 {
		bad(path+".max_open_for", b.MaxOpenFor.D().String(), "must be a duration > 0")
	}
	if b.HalfOpenRequests < 0 {
		bad(path+".half_open_requests", b.HalfOpenRequests, "must be >= 1")
	}
	if b.OpenFor < 0 || b.MaxOpenFor < 0 {
		return
	}
	// Only a block that sets one of the two is told: an edge that sets
	// neither inherits a problem reported on the top-level block.
	switch all := under.over(b).capped(); {
	case all.MaxOpenFor >= all.OpenFor:
	case b.MaxOpenFor != 0:
		bad(path+".max_open_for", b.MaxOpenFor.D().String(),
			"must not be shorter than open_for ("+all.OpenFor.D().String()+"): the breaker opens for open_for first, then longer while probes fail")
	case b.OpenFor != 0:
		bad(path+".open_for", b.OpenFor.D().String(),
			"must not be longer than max_open_for ("+all.MaxOpenFor.D().String()+", set in breaker); set max_open_for on this block too")
	}
}

func (c *Config) validateRecords(bad badFunc) {
	if c.Records.Retention < 0 {
		bad("records.retention", c.Records.Retention.D().String(), "must be a duration > 0")
	}
	if c.Records.MaxBodyBytes < 0 {
		bad("records.max_body_bytes", c.Records.MaxBodyBytes, "must be >= 0")
	}
}

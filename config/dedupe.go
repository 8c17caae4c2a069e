package config

import (
	"fmt"
	"net/http"
	"time"
)

// Dedupe configures the ingress dedupe window: delivery to the local agent at
// most once per (sender, edge, Idempotency-Key) for the window. The
// top-level block sets it for every inbound edge; an inbound edge's own block
// overrides the keys it sets.
type Dedupe struct {
	// Enabled turns the window on (the default) or off.
	Enabled *bool `yaml:"enabled"`
	// Methods lists the covered methods; default POST and PATCH.
	Methods []string `yaml:"methods"`
	// Window is how long a final response is kept and replayed; default 24h.
	Window Duration `yaml:"window"`
	// Lease is the TTL of an in-flight claim, renewed every third of it while
	// the agent works. It bounds a claim only where its holder cannot be
	// told dead (store.holder_timeout does, in seconds): a claim whose
	// holder died is free long before. Default 30s.
	Lease Duration `yaml:"lease"`
	// ReplayErrors stores the agent's 5xx responses too (Stripe-style), for
	// agents whose failures can come after a side effect. Default false: a
	// 5xx releases the key so that a retry runs again.
	ReplayErrors *bool `yaml:"replay_errors"`
	// RequireKey refuses a covered request without a key with 400.
	RequireKey *bool `yaml:"require_key"`
	// OnStoreError is fail_closed (default: 503, nothing delivered) or
	// fail_open (deliver without the window, log and count).
	OnStoreError string `yaml:"on_store_error"`
	// MaxResponseBytes caps the response body kept for replay; a longer
	// response is recorded as completed without its body. Default 1 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
}

// Dedupe defaults.
const (
	DefaultDedupeWindow   = 24 * time.Hour
	DefaultDedupeLease    = 30 * time.Second
	DefaultDedupeMaxBytes = 1 << 20
	FailClosed            = "fail_closed"
	FailOpen              = "fail_open"
)

// DefaultDedupeMethods are the methods covered when none are configured.
func DefaultDedupeMethods() []string { return []string{http.MethodPost, http.MethodPatch} }

// over returns d with every key set in o replacing d's.
func (d Dedupe) over(o *Dedupe) Dedupe {
	if o == nil {
		return d
	}
	if o.Enabled != nil {
		d.Enabled = o.Enabled
	}
	if o.Methods != nil {
		d.Methods = o.Methods
	}
	if o.Window != 0 {
		d.Window = o.Window
	}
	if o.Lease != 0 {
		d.Lease = o.Lease
	}
	if o.ReplayErrors != nil {
		d.ReplayErrors = o.ReplayErrors
	}
	if o.RequireKey != nil {
		d.RequireKey = o.RequireKey
	}
	if o.OnStoreError != "" {
		d.OnStoreError = o.OnStoreError
	}
	if o.MaxResponseBytes != 0 {
		d.MaxResponseBytes = o.MaxResponseBytes
	}
	return d
}

// builtinDedupe is the window with every key at its default.
func builtinDedupe() Dedupe {
	on, off := true, false
	return Dedupe{
		Enabled: &on, Methods: DefaultDedupeMethods(), Window: Duration(DefaultDedupeWindow),
		Lease: Duration(DefaultDedupeLease), ReplayErrors: &off, RequireKey: &off,
		OnStoreError: FailClosed, MaxResponseBytes: DefaultDedupeMaxBytes,
	}
}

// DedupeFor returns the complete dedupe settings of the inbound edge from
// sender: the defaults, then the top-level block, then the edge's block.
// Every field of the result is set.
func (c *Config) DedupeFor(from string) Dedupe {
	d := builtinDedupe().over(&c.Dedupe)
	if e, ok := c.InEdge(from); ok {
		d = d.over(e.Dedupe)
	}
	return d
}

func validateDedupe(bad badFunc, path string, d *Dedupe) {
	if d == nil {
		return
	}
	for i, m := range d.Methods {
		if !token(m) || m != upper(m) {
			bad(fmt.Sprintf("%s.methods[%d]", path, i), m, "must be an HTTP method in upper case, like POST")
		}
	}
	if d.Window < 0 {
		bad(path+".window", d.Window.D().String(), "must be a duration > 0")
	}
	if d.Lease < 0 || (d.Lease > 0 && d.Lease < 30*Duration(time.Millisecond)) {
		bad(path+".lease", d.Lease.D().String(), "must be a duration of at least 30ms")
	}
	if d.Window > 0 && d.Lease > d.Window {
		bad(path+".lease", d.Lease.D().String(), "must not be longer than the window ("+d.Window.D().String()+")")
	}
	switch d.OnStoreError {
	case "", FailClosed, FailOpen:
	default:
		bad(path+".on_store_error", d.OnStoreError, "must be fail_closed or fail_open")
	}
	if d.MaxResponseBytes < 0 {
		bad(path+".max_response_bytes", d.MaxResponseBytes, "must be >= 0")
	}
}

// token reports whether s is an RFC 9110 token (a method name).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || (c < 'A' && c != '!' && c != '#' && c != '$' && c != '%' && c != '&' &&
			c != '\'' && c != '*' && c != '+' && c != '-' && c != '.' && !(c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

package config

import (
	"fmt"
	"time"
)

// Taint is how this Baton follows untrusted text across its agent: what it
// fingerprints, how long and how much it keeps, and when an outbound field
// counts as copied from untrusted content. See docs/untrusted-content.md.
type Taint struct {
	// Track turns fingerprinting on (default true); off, Baton still carries
	// and enforces the labels it receives but finds no copies.
	Track *bool `yaml:"track"`
	// TTL is how long the agent's untrusted fingerprints are kept after
	// they were last written (with Redis, up to an eighth longer).
	TTL Duration `yaml:"ttl"`
	// MaxFingerprints bounds the fingerprints kept for the agent; the
	// oldest half is dropped whole when it is reached. Default: 200000 with
	// Redis; a quarter of store.memory.max_entries with the memory store,
	// whose other entries (dedupe windows, records) it must not crowd out.
	MaxFingerprints int `yaml:"max_fingerprints"`
	// MaxScanBytes is how much of one external response or handoff body is
	// fingerprinted; the rest passes unscanned (and says so).
	MaxScanBytes int64 `yaml:"max_scan_bytes"`
	// MinSpanBytes: string values shorter than this are not fingerprinted.
	MinSpanBytes int `yaml:"min_span_bytes"`
	// MinMatches and MinFraction: a field is copied untrusted text when at
	// least MinMatches of its fingerprints, or MinFraction of them, are
	// untrusted ones (0: the calibrated defaults).
	MinMatches  int     `yaml:"min_matches"`
	MinFraction float64 `yaml:"min_fraction"`
	// InjectionScore is the injection-signal score at or above which an
	// untrusted span is flagged (0: the default).
	InjectionScore float64 `yaml:"injection_score"`
}

// Taint defaults.
const (
	DefaultTaintTTL        = 24 * time.Hour
	DefaultMaxFingerprints = 200_000
	DefaultMaxScanBytes    = 256 << 10
	DefaultMinSpanBytes    = 24
)

// Tracking reports whether fingerprinting is on.
func (t Taint) Tracking() bool { return t.Track == nil || *t.Track }

func (t *Taint) applyDefaults(s Store) {
	if t.TTL == 0 {
		t.TTL = Duration(DefaultTaintTTL)
	}
	if t.MaxFingerprints == 0 {
		t.MaxFingerprints = DefaultMaxFingerprints
		if s.Redis == nil && s.Memory.MaxEntries > 0 {
			t.MaxFingerprints = max(s.Memory.MaxEntries/4, 1)
		}
	}
	if t.MaxScanBytes == 0 {
		t.MaxScanBytes = DefaultMaxScanBytes
	}
	if t.MinSpanBytes == 0 {
		t.MinSpanBytes = DefaultMinSpanBytes
	}
}

// Untrusted delivery modes (edge `untrusted`) and injection actions (edge
// `on_injection`).
const (
	UntrustedTag        = "tag"
	UntrustedSpotlight  = "spotlight"
	UntrustedQuarantine = "quarantine"
	UntrustedReject     = "reject"
	InjectionFlag       = "flag"
)

// UntrustedMode returns the inbound edge's delivery mode for untrusted
// content and its injection action, defaulted.
func (e Edge) UntrustedMode() (mode, onInjection string) {
	mode, onInjection = e.Untrusted, e.OnInjection
	if mode == "" {
		mode = UntrustedTag
	}
	if onInjection == "" {
		onInjection = InjectionFlag
	}
	return mode, onInjection
}

func (c *Config) validateTaint(bad badFunc) {
	t := c.Taint
	if t.TTL < 0 {
		bad("taint.ttl", t.TTL.D().String(), "must be a duration > 0")
	}
	if t.MaxFingerprints < 0 {
		bad("taint.max_fingerprints", t.MaxFingerprints, "must be > 0")
	}
	if m := c.Store.Memory.MaxEntries; c.Store.Redis == nil && m > 0 && t.MaxFingerprints > m/2 {
		bad("taint.max_fingerprints", t.MaxFingerprints, fmt.Sprintf("must be at most half of store.memory.max_entries (%d) with the memory store, so that fingerprints never crowd out dedupe windows and records", m))
	}
	if t.MaxScanBytes < 0 {
		bad("taint.max_scan_bytes", t.MaxScanBytes, "must be > 0")
	}
	if t.MinSpanBytes < 0 {
		bad("taint.min_span_bytes", t.MinSpanBytes, "must be > 0")
	}
	if t.MinMatches < 0 {
		bad("taint.min_matches", t.MinMatches, "must be >= 0 (0: the default)")
	}
	if t.MinFraction < 0 || t.MinFraction > 1 {
		bad("taint.min_fraction", t.MinFraction, "must be between 0 and 1 (0: the default)")
	}
	if t.InjectionScore < 0 || t.InjectionScore > 1 {
		bad("taint.injection_score", t.InjectionScore, "must be between 0 and 1 (0: the default)")
	}
	for i, e := range c.Edges {
		path := fmt.Sprintf("edges[%d]", i)
		switch e.Untrusted {
		case "", UntrustedTag, UntrustedSpotlight, UntrustedQuarantine, UntrustedReject:
		default:
			bad(path+".untrusted", e.Untrusted, "must be tag, spotlight, quarantine or reject")
		}
		switch e.OnInjection {
		case "", InjectionFlag, UntrustedQuarantine, UntrustedReject:
		default:
			bad(path+".on_injection", e.OnInjection, "must be flag, quarantine or reject")
		}
		if (e.Untrusted != "" || e.OnInjection != "") && e.From == "" {
			bad(path, nil, "untrusted and on_injection apply to inbound edges (from) only: they decide what the local agent receives")
		}
	}
}

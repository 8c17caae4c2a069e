package config

import (
	"strings"
	"testing"
	"time"
)

func TestDedupeFor(t *testing.T) {
	t.Parallel()
	c, err := Parse(strings.NewReader(`agent: summarizer
upstream: http://127.0.0.1:9
dedupe: {window: 1h, require_key: true}
edges:
  - {from: analyst, dedupe: {lease: 2s, replay_errors: true, methods: [POST]}}
  - {from: planner}
  - {from: auditor, dedupe: {enabled: false}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		from string
		want func(d Dedupe) bool
	}{
		{"edge overrides, top level fills", "analyst", func(d Dedupe) bool {
			return d.Lease.D() == 2*time.Second && *d.ReplayErrors && d.Window.D() == time.Hour && *d.RequireKey &&
				len(d.Methods) == 1 && *d.Enabled && d.OnStoreError == FailClosed && d.MaxResponseBytes == DefaultDedupeMaxBytes
		}},
		{"edge without block takes top level", "planner", func(d Dedupe) bool {
			return d.Lease.D() == DefaultDedupeLease && !*d.ReplayErrors && d.Window.D() == time.Hour && *d.RequireKey &&
				strings.Join(d.Methods, ",") == "POST,PATCH"
		}},
		{"unlisted sender takes top level", "stranger", func(d Dedupe) bool { return *d.RequireKey && *d.Enabled }},
		{"disabled edge", "auditor", func(d Dedupe) bool { return !*d.Enabled && *d.RequireKey }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if d := c.DedupeFor(tc.from); !tc.want(d) {
				t.Errorf("DedupeFor(%s) = %+v", tc.from, d)
			}
		})
	}
}

func TestDedupeValidation(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader(`agent: summarizer
upstream: http://127.0.0.1:9
peers: {b: {url: http://127.0.0.1:1}}
dedupe: {methods: [post, "GET X"], lease: 10ms, on_store_error: maybe, max_response_bytes: -1}
edges:
  - {to: b, dedupe: {window: 1h}}
  - {from: a, dedupe: {window: 1s, lease: 2s}}
`), nil)
	if err == nil {
		t.Fatal("invalid dedupe settings accepted")
	}
	for _, want := range []string{
		`dedupe.methods[0]: must be an HTTP method in upper case, like POST, got "post"`,
		`dedupe.methods[1]: must be an HTTP method in upper case, like POST, got "GET X"`,
		`dedupe.lease: must be a duration of at least 30ms, got "10ms"`,
		`dedupe.on_store_error: must be fail_closed or fail_open, got "maybe"`,
		`dedupe.max_response_bytes: must be >= 0, got -1`,
		`edges[0].dedupe: applies to inbound edges (from) only`,
		`edges[1].dedupe.lease: must not be longer than the window (1s), got "2s"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

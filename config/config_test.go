package config

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// example is the reference file from the issue: it must load.
const example = `agent: analyst
upstream: http://127.0.0.1:9001
listen: {egress: 127.0.0.1:15001, ingress: 0.0.0.0:15006, admin: 127.0.0.1:15000}
store: {redis: {url: redis://127.0.0.1:6379/0}}
peers: {summarizer: {url: http://127.0.0.1:16006}}
external: {allow: ["api.example.com:443"]}
edges:
  - {to: summarizer, max_hops: 8}
  - {from: planner, max_hops: 8}
`

// minimal is the least a file must say.
const minimal = "agent: analyst\nupstream: http://127.0.0.1:9001\n"

// edit returns example with old replaced by new, failing if old is absent so
// that a row cannot silently test the unchanged file.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(example, old) {
		t.Fatalf("example does not contain %q", old)
	}
	return strings.Replace(example, old, new, 1)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func journalDefaults() Journal {
	return Journal{Retention: Duration(DefaultRetention), MaxEntryBytes: DefaultJournalEntryBytes, MaxHandlingBytes: DefaultJournalHandlingBytes}
}

// defaults is what minimal decodes to, before Validate fills the parsed URL.
func defaults() Config {
	return Config{
		Agent:         "analyst",
		Upstream:      "http://127.0.0.1:9001",
		LogLevel:      "info",
		ShutdownGrace: Duration(15 * time.Second),
		Listen:        Listen{Egress: "127.0.0.1:15001", Ingress: "0.0.0.0:15006", Admin: "127.0.0.1:15000"},
		Store:         Store{Memory: Memory{MaxEntries: 100_000, MaxBytes: 64 << 20}, HolderTimeout: Duration(DefaultHolderTimeout)},
		Limits:        Limits{MaxBodyBytes: 10 << 20},
		Records:       Records{Retention: Duration(DefaultRetention), MaxBodyBytes: DefaultRecordBodyBytes},
		Trust:         Trust{Skew: Duration(DefaultSkew)},
		Taint:         Taint{TTL: Duration(DefaultTaintTTL), MaxFingerprints: DefaultMemoryEntries / 4, MaxScanBytes: DefaultMaxScanBytes, MinSpanBytes: DefaultMinSpanBytes},
		Journal:       journalDefaults(),
		Approvals:     Approvals{Expires: Duration(DefaultApprovalExpiry)},
		Timeouts: Timeouts{
			ReadHeader:     Duration(10 * time.Second),
			Idle:           Duration(120 * time.Second),
			Dial:           Duration(5 * time.Second),
			UpstreamHeader: Duration(60 * time.Second),
		},
	}
}

// lines splits a joined error into its problems, one a line.
func lines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// assertFieldErrors checks that err is a join of *FieldError only, which is
// what `baton validate` relies on to print one problem a line.
func assertFieldErrors(t *testing.T, err error) {
	t.Helper()
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Errorf("problem %q is a %T, want *FieldError", e, e)
		}
	}
}

func dump(c *Config) string {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want func(t *testing.T) Config
	}{
		{
			name: "the reference example, with every default applied",
			in:   example,
			want: func(t *testing.T) Config {
				c := defaults()
				c.UpstreamURL = mustURL(t, "http://127.0.0.1:9001")
				c.Store.Redis = &Redis{
					URL:         "redis://127.0.0.1:6379/0",
					DialTimeout: Duration(2 * time.Second),
					OpTimeout:   Duration(time.Second),
				}
				c.Peers = map[string]Peer{"summarizer": {
					URL:       "http://127.0.0.1:16006",
					ParsedURL: mustURL(t, "http://127.0.0.1:16006"),
				}}
				c.External.Allow = []string{"api.example.com:443"}
				c.Edges = []Edge{{To: "summarizer", MaxHops: 8}, {From: "planner", MaxHops: 8}}
				c.Taint.MaxFingerprints = DefaultMaxFingerprints // Redis: not bounded by the memory store
				return c
			},
		},
		{
			name: "a minimal file takes every default",
			in:   minimal,
			want: func(t *testing.T) Config {
				c := defaults()
				c.UpstreamURL = mustURL(t, "http://127.0.0.1:9001")
				return c
			},
		},
		{
			name: "an edge without max_hops gets the default, an explicit one is kept",
			in:   minimal + "edges: [{from: planner}, {from: critic, max_hops: 3}]\n",
			want: func(t *testing.T) Config {
				c := defaults()
				c.UpstreamURL = mustURL(t, "http://127.0.0.1:9001")
				c.Edges = []Edge{{From: "planner", MaxHops: DefaultMaxHops}, {From: "critic", MaxHops: 3}}
				return c
			},
		},
		{
			name: "explicit values are kept, not defaulted",
			in: minimal + `log_level: debug
shutdown_grace: 1m30s
listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}
store:
  redis: {addrs: [10.0.0.1:26379, 10.0.0.2:26379], master_name: mymaster, db: 2, pool_size: 20, dial_timeout: 3s, op_timeout: 250ms, prefix: "b:"}
  memory: {max_entries: 10, max_bytes: 1024}
  holder_timeout: 500ms
limits: {max_body_bytes: 1}
timeouts: {read_header: 1s, read: 2s, idle: 3s, dial: 4s, upstream_header: 5s}
`,
			want: func(t *testing.T) Config {
				return Config{
					Agent:         "analyst",
					Upstream:      "http://127.0.0.1:9001",
					UpstreamURL:   mustURL(t, "http://127.0.0.1:9001"),
					LogLevel:      "debug",
					ShutdownGrace: Duration(90 * time.Second),
					Listen:        Listen{Egress: "127.0.0.1:0", Ingress: "127.0.0.1:0", Admin: "127.0.0.1:0"},
					Store: Store{
						Redis: &Redis{
							Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, MasterName: "mymaster",
							DB: 2, PoolSize: 20, Prefix: "b:",
							DialTimeout: Duration(3 * time.Second), OpTimeout: Duration(250 * time.Millisecond),
						},
						Memory:        Memory{MaxEntries: 10, MaxBytes: 1024},
						HolderTimeout: Duration(500 * time.Millisecond),
					},
					Limits:  Limits{MaxBodyBytes: 1},
					Records: Records{Retention: Duration(DefaultRetention), MaxBodyBytes: DefaultRecordBodyBytes},
					Trust:   Trust{Skew: Duration(DefaultSkew)},
					Taint:   Taint{TTL: Duration(DefaultTaintTTL), MaxFingerprints: DefaultMaxFingerprints, MaxScanBytes: DefaultMaxScanBytes, MinSpanBytes: DefaultMinSpanBytes},
					Journal: journalDefaults(), Approvals: Approvals{Expires: Duration(DefaultApprovalExpiry)},
					Timeouts: Timeouts{
						ReadHeader: Duration(time.Second), Read: Duration(2 * time.Second), Idle: Duration(3 * time.Second),
						Dial: Duration(4 * time.Second), UpstreamHeader: Duration(5 * time.Second),
					},
				}
			},
		},
		{
			name: "anchors and merge keys work as in any YAML",
			in: minimal + `peers: {a: {url: "http://10.0.0.1:15006"}, b: {url: "http://10.0.0.2:15006"}}
edges:
  - &out {to: a, max_hops: 4}
  - {<<: *out, to: b}
`,
			want: func(t *testing.T) Config {
				c := defaults()
				c.UpstreamURL = mustURL(t, "http://127.0.0.1:9001")
				c.Peers = map[string]Peer{
					"a": {URL: "http://10.0.0.1:15006", ParsedURL: mustURL(t, "http://10.0.0.1:15006")},
					"b": {URL: "http://10.0.0.2:15006", ParsedURL: mustURL(t, "http://10.0.0.2:15006")},
				}
				c.Edges = []Edge{{To: "a", MaxHops: 4}, {To: "b", MaxHops: 4}}
				return c
			},
		},
		{
			name: "a trailing empty document is ignored",
			in:   minimal + "---\n",
			want: func(t *testing.T) Config {
				c := defaults()
				c.UpstreamURL = mustURL(t, "http://127.0.0.1:9001")
				return c
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(strings.NewReader(tt.in), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if want := tt.want(t); !reflect.DeepEqual(*got, want) {
				t.Errorf("Parse got\n%s\nwant\n%s", dump(got), dump(&want))
			}
		})
	}
}

func TestParseUnknownKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "top level, near miss",
			in:   minimal + "uptsream: http://x\n",
			want: []string{`uptsream: unknown key, did you mean upstream? (line 3)`},
		},
		{
			name: "top level, no near miss",
			in:   minimal + "frobnicate: {window: 1h}\n",
			want: []string{`frobnicate: unknown key, want one of agent, upstream, log_level, shutdown_grace, listen, store, peers, groups, external, edges, dedupe, retry, breaker, records, contract, identity, trust, taint, journal, models, approvals, tls, compensation, admin_token, profiling, limits, timeouts, intercept (line 3)`},
		},
		{
			name: "nested under listen",
			in:   minimal + "listen: {egres: 127.0.0.1:15001}\n",
			want: []string{`listen.egres: unknown key, did you mean egress? (line 3)`},
		},
		{
			name: "nested under store.redis",
			in:   minimal + "store:\n  redis:\n    url: redis://h:6379\n    passwd: x\n",
			want: []string{`store.redis.passwd: unknown key, did you mean password? (line 6)`},
		},
		{
			name: "under a peer",
			in:   minimal + "peers: {b: {url: 'http://h:1', key: abc}}\n",
			want: []string{`peers.b.key: unknown key, want one of url, ports (line 3)`},
		},
		{
			name: "in a list item",
			in:   minimal + "edges:\n  - {from: a}\n  - {from: b, retries: 3}\n",
			want: []string{`edges[1].retries: unknown key, want one of to, from, max_hops, dedupe, retry, breaker, auto_replay, contract, require_signature, posture, grant, untrusted, on_injection, journal, mcp, confirm, context, side_effects, callers, chain_budget (line 5)`},
		},
		{
			name: "in a merged mapping",
			in:   minimal + "edges: [{<<: {hops: 2}, from: a}]\n",
			want: []string{`edges[0].hops: unknown key, want one of to, from, max_hops, dedupe, retry, breaker, auto_replay, contract, require_signature, posture, grant, untrusted, on_injection, journal, mcp, confirm, context, side_effects, callers, chain_budget (line 3)`},
		},
		{
			name: "fields filled by Validate are not keys",
			in:   minimal + "upstreamurl: http://x\n",
			want: []string{`upstreamurl: unknown key, want one of agent, upstream, log_level, shutdown_grace, listen, store, peers, groups, external, edges, dedupe, retry, breaker, records, contract, identity, trust, taint, journal, models, approvals, tls, compensation, admin_token, profiling, limits, timeouts, intercept (line 3)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(strings.NewReader(tt.in), nil)
			if got := lines(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse error lines\n got: %q\nwant: %q", got, tt.want)
			}
			assertFieldErrors(t, err)
		})
	}
}

func TestParseSeveralProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "every decoding problem, in file order",
			in: `agent: analyst
agnet: analyst
listen: {egres: 127.0.0.1:1}
shutdown_grace: soon
edges:
  - {to: a, max_hops: lots}
  - {to: b, to: c}
agent: planner
`,
			want: []string{
				`agnet: unknown key, did you mean agent? (line 2)`,
				`listen.egres: unknown key, did you mean egress? (line 3)`,
				`shutdown_grace: must be a duration like 15s or 1m30s, got "soon" (line 4)`,
				`edges[0].max_hops: must be an integer, got "lots" (line 6)`,
				`edges[1].to: duplicate key, first set on line 7 (line 7)`,
				`agent: duplicate key, first set on line 1 (line 8)`,
			},
		},
		{
			name: "every validation problem, in field order",
			in: `agent: Analyst
upstream: localhost:9001
log_level: loud
listen: {egress: 127.0.0.1:15001, admin: 127.0.0.1:15001}
store: {redis: {}}
peers: {summarizer: {url: 'http://127.0.0.1:16006?x=1'}}
external: {allow: [example.com]}
edges:
  - {to: summarizer, max_hops: 8}
  - {to: critic, max_hops: 0}
limits: {max_body_bytes: -5}
`,
			want: []string{
				`agent: must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit, got "Analyst"`,
				`upstream: must be the http(s) URL of the local agent, like http://127.0.0.1:8080 (no http:// or https://), got "localhost:9001"`,
				`log_level: must be one of debug, info, warn, error, got "loud"`,
				`listen.admin: must not use the same port as listen.egress, got "127.0.0.1:15001"`,
				`store.redis: must set url (single node) or addrs (Sentinel with master_name, or Cluster)`,
				`peers.summarizer.url: must be the http(s) URL of the peer's Baton ingress (no query or fragment allowed), got "http://127.0.0.1:16006?x=1"`,
				`external.allow[0]: must be host:port, e.g. api.example.com:443 or *.example.com:443, got "example.com"`,
				`edges[1].to: must name a peer under peers, got "critic"`,
				`edges[1].max_hops: must be between 1 and 255, got 0`,
				`limits.max_body_bytes: must be > 0, got -5`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(strings.NewReader(tt.in), nil)
			if got := lines(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse error lines\n got: %q\nwant: %q", got, tt.want)
			}
			assertFieldErrors(t, err)
		})
	}
}

func TestEdges(t *testing.T) {
	t.Parallel()
	c, err := Parse(strings.NewReader(example), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		lookup func(string) (Edge, bool)
		peer   string
		want   Edge
		wantOK bool
	}{
		{name: "outbound edge", lookup: c.OutEdge, peer: "summarizer", want: Edge{To: "summarizer", MaxHops: 8}, wantOK: true},
		{name: "no outbound edge", lookup: c.OutEdge, peer: "planner"},
		{name: "inbound edge", lookup: c.InEdge, peer: "planner", want: Edge{From: "planner", MaxHops: 8}, wantOK: true},
		{name: "no inbound edge", lookup: c.InEdge, peer: "summarizer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := tt.lookup(tt.peer)
			if !reflect.DeepEqual(got, tt.want) || ok != tt.wantOK {
				t.Errorf("lookup(%q) = %+v, %v; want %+v, %v", tt.peer, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	if got := EdgeName("analyst", "summarizer"); got != "analyst→summarizer" {
		t.Errorf("EdgeName = %q", got)
	}
}

// TestBreakerFor: the breaker settings of a peer are the defaults, under
// the top-level block, under the peer's edge; max_open_for, unset, is the
// default cap or open_for when that is longer.
func TestBreakerFor(t *testing.T) {
	t.Parallel()
	const peers = "peers: {b: {url: http://127.0.0.1:1}, c: {url: http://127.0.0.1:2}}\n"
	tests := []struct {
		name string
		in   string
		peer string
		want Breaker
	}{
		{
			name: "defaults",
			in:   minimal + peers,
			peer: "b",
			want: Breaker{Failures: 5, OpenFor: Duration(time.Second), MaxOpenFor: Duration(30 * time.Second), HalfOpenRequests: 1},
		},
		{
			name: "top-level block",
			in:   minimal + peers + "breaker: {failures: 3, open_for: 200ms, max_open_for: 5s, half_open_requests: 2}\n",
			peer: "b",
			want: Breaker{Failures: 3, OpenFor: Duration(200 * time.Millisecond), MaxOpenFor: Duration(5 * time.Second), HalfOpenRequests: 2},
		},
		{
			name: "an open_for longer than the default cap is its own cap",
			in:   minimal + peers + "breaker: {open_for: 1m}\n",
			peer: "b",
			want: Breaker{Failures: 5, OpenFor: Duration(time.Minute), MaxOpenFor: Duration(time.Minute), HalfOpenRequests: 1},
		},
		{
			name: "an edge overrides the keys it sets",
			in:   minimal + peers + "breaker: {open_for: 2s, max_open_for: 10s}\nedges: [{to: b, breaker: {max_open_for: 1m}}]\n",
			peer: "b",
			want: Breaker{Failures: 5, OpenFor: Duration(2 * time.Second), MaxOpenFor: Duration(time.Minute), HalfOpenRequests: 1},
		},
		{
			name: "another edge keeps the top-level block",
			in:   minimal + peers + "breaker: {open_for: 2s, max_open_for: 10s}\nedges: [{to: b, breaker: {max_open_for: 1m}}]\n",
			peer: "c",
			want: Breaker{Failures: 5, OpenFor: Duration(2 * time.Second), MaxOpenFor: Duration(10 * time.Second), HalfOpenRequests: 1},
		},
		{
			name: "an edge's long open_for raises the default cap",
			in:   minimal + peers + "edges: [{to: b, breaker: {open_for: 45s}}]\n",
			peer: "b",
			want: Breaker{Failures: 5, OpenFor: Duration(45 * time.Second), MaxOpenFor: Duration(45 * time.Second), HalfOpenRequests: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(strings.NewReader(tt.in), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.BreakerFor(tt.peer); got != tt.want {
				t.Errorf("BreakerFor(%q) = %+v, want %+v", tt.peer, got, tt.want)
			}
		})
	}
}

func TestFieldError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *FieldError
		want string
	}{
		{name: "path, expectation and value", err: &FieldError{Path: "edges[2].max_hops", Value: 0, Expect: "must be between 1 and 255"}, want: "edges[2].max_hops: must be between 1 and 255, got 0"},
		{name: "string values are quoted", err: &FieldError{Path: "agent", Value: "A", Expect: "must be lowercase"}, want: `agent: must be lowercase, got "A"`},
		{name: "no value", err: &FieldError{Path: "store.redis", Expect: "must set url"}, want: "store.redis: must set url"},
		{name: "with a line", err: &FieldError{Path: "listen.egres", Expect: "unknown key", Line: 3}, want: "listen.egres: unknown key (line 3)"},
		{name: "the whole file", err: &FieldError{Expect: "the file must be a mapping", Line: 1}, want: "the file must be a mapping (line 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

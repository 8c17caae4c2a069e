package config

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
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
		Store:         Store{Memory: Memory{MaxEntries: 100_000, MaxBytes: 64 << 20}},
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
						Memory: Memory{MaxEntries: 10, MaxBytes: 1024},
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

// TestParseInvalid holds one row per problem; each must produce exactly the
// expected lines.
func TestParseInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   func(t *testing.T) string
		want []string
	}{
		{
			name: "untrusted-content settings out of range",
			in: func(*testing.T) string {
				return minimal + "taint: {max_fingerprints: 60000, min_fraction: 1.5, injection_score: -1}\n" +
					"peers: {b: {url: http://127.0.0.1:1}}\nedges: [{to: b, untrusted: spotlight}, {from: c, untrusted: mask, on_injection: ignore}]\n"
			},
			want: []string{
				`taint.max_fingerprints: must be at most half of store.memory.max_entries (100000) with the memory store, so that fingerprints never crowd out dedupe windows and records, got 60000`,
				`taint.min_fraction: must be between 0 and 1 (0: the default), got 1.5`,
				`taint.injection_score: must be between 0 and 1 (0: the default), got -1`,
				`edges[0]: untrusted and on_injection apply to inbound edges (from) only: they decide what the local agent receives`,
				`edges[1].untrusted: must be tag, spotlight, quarantine or reject, got "mask"`,
				`edges[1].on_injection: must be flag, quarantine or reject, got "ignore"`,
			},
		},
		{
			name: "journal settings",
			in: func(*testing.T) string {
				return minimal + "external: {allow: [api.example.com:443, \"*.example.org:443\"]}\n" +
					"journal: {hosts: [api.example.com:443, \"*.x.example.org:443\", search.example.net:443, nope], " +
					"retention: 10ms, max_entry_bytes: 2048, max_handling_bytes: 1024, vary: [\"a b\"]}\n" +
					"peers: {b: {url: http://127.0.0.1:1}}\nedges: [{to: b, journal: true}, {from: c, journal: true}]\n"
			},
			want: []string{
				`journal.hosts[2]: must be allowed by external.allow (a host Baton does not let the agent reach has nothing to journal), got "search.example.net:443"`,
				`journal.hosts[3]: must be host:port, e.g. api.example.com:443 or *.example.com:443, got "nope"`,
				`journal.retention: must be a duration of at least 1s, got "10ms"`,
				`journal.max_handling_bytes: must be >= journal.max_entry_bytes, got 1024`,
				`journal.vary[0]: must be a header name, got "a b"`,
				`edges[1].journal: applies to outbound edges (to) only: the calling agent's Baton keeps the journal`,
			},
		},
		{
			name: "mcp tool globs",
			in: func(*testing.T) string {
				return minimal + "peers: {b: {url: http://127.0.0.1:1}}\nedges: [{to: b, mcp: {allow_tools: [\"search_[\"], deny_tools: [\"\"]}}]\n"
			},
			want: []string{
				`edges[0].mcp.allow_tools[0]: must be a tool name or a glob like search_*, got "search_["`,
				`edges[0].mcp.deny_tools[0]: must be a tool name or a glob like search_*, got ""`,
			},
		},
		{
			name: "confirmation gates",
			in: func(*testing.T) string {
				return minimal + "peers: {b: {url: http://127.0.0.1:1}}\n" +
					"approvals: {expires: 10ms, notify: ftp://x, approvers: [{name: analyst, token_env: T}, {name: bob}, {name: carol, keys: [nokey]}]}\n" +
					"edges: [{to: b, confirm: {wait: 1h, when: [{}, {target: \"/[\", field: amount, over: 1}, {methods: [post], over: 2}]}},\n" +
					"  {from: c, confirm: {}}]\n"
			},
			want: []string{
				`approvals.expires: must be a duration of at least 1s, got "10ms"`,
				`approvals.notify: must be an http:// or https:// URL, got "ftp://x"`,
				`approvals.approvers[0].name: must not be the agent's own name nor admin: an approver is a person, never the agent, got "analyst"`,
				`approvals.approvers[1]: must set token_env or keys`,
				`approvals.approvers[2].keys[0]: must be "KEYID PUBLICKEY" as baton keygen prints it, got "nokey"`,
				`edges[0].confirm.wait: must be between 0 and 10m, got "1h0m0s"`,
				`edges[0].confirm.when[0]: sets no condition: leave when empty to hold every handoff`,
				`edges[0].confirm.when[1].target: must be a name or a glob, got "/["`,
				`edges[0].confirm.when[1].field: must be a JSON pointer like /side_effects/0/amount, got "amount"`,
				`edges[0].confirm.when[2].methods[0]: must be an HTTP method in capitals, got "post"`,
				`edges[0].confirm.when[2]: over and equals need field`,
				`edges[1].confirm: applies to outbound edges (to) only: the sending agent's Baton holds the handoff`,
			},
		},
		{
			name: "a gate with nobody to decide",
			in: func(*testing.T) string {
				return minimal + "peers: {b: {url: http://127.0.0.1:1}}\nedges: [{to: b, confirm: {}}]\n"
			},
			want: []string{`approvals.approvers: must name an approver, or admin_token be set: a confirmation gate needs someone to decide`},
		},
		// The document as a whole.
		{
			name: "a list instead of a mapping",
			in:   func(*testing.T) string { return "- agent: analyst\n" },
			want: []string{`the file must be a mapping of keys like "agent: analyst", got a list (line 1)`},
		},
		{
			name: "a bare scalar",
			in:   func(*testing.T) string { return "analyst\n" },
			want: []string{`the file must be a mapping of keys like "agent: analyst", got "analyst" (line 1)`},
		},
		{
			name: "a second document",
			in:   func(*testing.T) string { return minimal + "---\nagent: planner\n" },
			want: []string{`the file must hold one YAML document, but another starts here (line 3)`},
		},
		{
			name: "an empty file still needs agent and upstream",
			in:   func(*testing.T) string { return "" },
			want: []string{
				`agent: must be set (here or by BATON_AGENT) to this agent's name, like analyst`,
				`upstream: must be set (here or by BATON_UPSTREAM) to the local agent's URL, like http://127.0.0.1:8080`,
			},
		},

		// Decoding: keys and types, with paths and lines.
		{
			name: "duplicate top-level key",
			in:   func(*testing.T) string { return example + "agent: planner\n" },
			want: []string{`agent: duplicate key, first set on line 1 (line 10)`},
		},
		{
			name: "duplicate peer",
			in: func(t *testing.T) string {
				return edit(t, "peers: {summarizer: {url: http://127.0.0.1:16006}}", "peers: {summarizer: {url: http://127.0.0.1:16006}, summarizer: {}}")
			},
			want: []string{`peers.summarizer: duplicate key, first set on line 5 (line 5)`},
		},
		{
			name: "duration that is not one",
			in:   func(*testing.T) string { return example + "shutdown_grace: abc\n" },
			want: []string{`shutdown_grace: must be a duration like 15s or 1m30s, got "abc" (line 10)`},
		},
		{
			name: "duration without a unit",
			in:   func(*testing.T) string { return example + "timeouts: {idle: 30}\n" },
			want: []string{`timeouts.idle: must be a duration like 15s or 1m30s, got "30" (line 10)`},
		},
		{
			name: "a key set twice in a flow mapping",
			in:   func(*testing.T) string { return example + "limits: {max_body_bytes: 1, max_body_bytes: 2}\n" },
			want: []string{`limits.max_body_bytes: duplicate key, first set on line 10 (line 10)`},
		},
		{
			name: "nested duration given as a list",
			in: func(t *testing.T) string {
				return edit(t, "{redis: {url: redis://127.0.0.1:6379/0}}", "{redis: {url: redis://127.0.0.1:6379/0, op_timeout: [1s]}}")
			},
			want: []string{`store.redis.op_timeout: must be a duration like 15s or 1m30s, got a list (line 4)`},
		},
		{
			name: "integer that is not one",
			in: func(t *testing.T) string {
				return edit(t, "{to: summarizer, max_hops: 8}", "{to: summarizer, max_hops: many}")
			},
			want: []string{`edges[0].max_hops: must be an integer, got "many" (line 8)`},
		},
		{
			name: "mapping where a string belongs",
			in:   func(t *testing.T) string { return edit(t, "agent: analyst", "agent: {name: analyst}") },
			want: []string{`agent: must be a string, got a mapping (line 1)`},
		},
		{
			name: "list where a mapping belongs",
			in: func(t *testing.T) string {
				return edit(t, "listen: {egress: 127.0.0.1:15001, ingress: 0.0.0.0:15006, admin: 127.0.0.1:15000}", "listen: [127.0.0.1:15001]")
			},
			want: []string{`listen: must be a mapping, got a list (line 3)`},
		},
		{
			name: "mapping where a list belongs",
			in: func(t *testing.T) string {
				return edit(t, `external: {allow: ["api.example.com:443"]}`, `external: {allow: {api.example.com: 443}}`)
			},
			want: []string{`external.allow: must be a list, got a mapping (line 6)`},
		},
		{
			name: "empty list item",
			in:   func(t *testing.T) string { return example + "  - ~\n" },
			want: []string{`edges[2]: must not be empty (line 10)`},
		},

		// Validation: one row per rule.
		{
			name: "agent with capitals",
			in:   func(t *testing.T) string { return edit(t, "agent: analyst", "agent: Analyst") },
			want: []string{`agent: must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit, got "Analyst"`},
		},
		{
			name: "agent too long",
			in:   func(t *testing.T) string { return edit(t, "agent: analyst", "agent: "+strings.Repeat("a", 64)) },
			want: []string{`agent: must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit, got "` + strings.Repeat("a", 64) + `"`},
		},
		{
			name: "upstream with another scheme",
			in: func(t *testing.T) string {
				return edit(t, "upstream: http://127.0.0.1:9001", "upstream: ftp://127.0.0.1:9001")
			},
			want: []string{`upstream: must be the http(s) URL of the local agent, like http://127.0.0.1:8080 (scheme must be http or https), got "ftp://127.0.0.1:9001"`},
		},
		{
			name: "upstream without a host",
			in:   func(t *testing.T) string { return edit(t, "upstream: http://127.0.0.1:9001", "upstream: http:///x") },
			want: []string{`upstream: must be the http(s) URL of the local agent, like http://127.0.0.1:8080 (no host), got "http:///x"`},
		},
		{
			name: "upstream with a query",
			in: func(t *testing.T) string {
				return edit(t, "upstream: http://127.0.0.1:9001", "upstream: http://127.0.0.1:9001/?a=b")
			},
			want: []string{`upstream: must be the http(s) URL of the local agent, like http://127.0.0.1:8080 (no query or fragment allowed), got "http://127.0.0.1:9001/?a=b"`},
		},
		{
			name: "upstream password is not repeated",
			in: func(t *testing.T) string {
				return edit(t, "upstream: http://127.0.0.1:9001", "upstream: ftp://u:hunter2@h")
			},
			want: []string{`upstream: must be the http(s) URL of the local agent, like http://127.0.0.1:8080 (scheme must be http or https), got "ftp://u:xxxxx@h"`},
		},
		{
			name: "log level unknown",
			in:   func(*testing.T) string { return example + "log_level: verbose\n" },
			want: []string{`log_level: must be one of debug, info, warn, error, got "verbose"`},
		},
		{
			name: "shutdown grace negative",
			in:   func(*testing.T) string { return example + "shutdown_grace: -1s\n" },
			want: []string{`shutdown_grace: must be a duration >= 0, got "-1s"`},
		},
		{
			name: "listen address without a port",
			in:   func(t *testing.T) string { return edit(t, "egress: 127.0.0.1:15001", "egress: 127.0.0.1") },
			want: []string{`listen.egress: must be host:port, like 127.0.0.1:15001, got "127.0.0.1"`},
		},
		{
			name: "listen port out of range",
			in:   func(t *testing.T) string { return edit(t, "admin: 127.0.0.1:15000", "admin: 127.0.0.1:65536") },
			want: []string{`listen.admin: must have a port between 0 and 65535, got "127.0.0.1:65536"`},
		},
		{
			name: "listen addresses equal",
			in:   func(t *testing.T) string { return edit(t, "admin: 127.0.0.1:15000", "admin: 127.0.0.1:15001") },
			want: []string{`listen.admin: must not use the same port as listen.egress, got "127.0.0.1:15001"`},
		},
		{
			name: "listen port taken by a wildcard address",
			in:   func(t *testing.T) string { return edit(t, "admin: 127.0.0.1:15000", "admin: 127.0.0.1:15006") },
			want: []string{`listen.admin: must not use the same port as listen.ingress, got "127.0.0.1:15006"`},
		},
		{
			name: "redis with neither url nor addrs",
			in: func(t *testing.T) string {
				return edit(t, "{redis: {url: redis://127.0.0.1:6379/0}}", "{redis: {db: 1}}")
			},
			want: []string{`store.redis: must set url (single node) or addrs (Sentinel with master_name, or Cluster)`},
		},
		{
			name: "redis with both url and addrs",
			in: func(t *testing.T) string {
				return edit(t, "{redis: {url: redis://127.0.0.1:6379/0}}", "{redis: {url: redis://127.0.0.1:6379/0, addrs: [10.0.0.1:6379]}}")
			},
			want: []string{`store.redis.url: must not be set together with store.redis.addrs, got "redis://127.0.0.1:6379/0"`},
		},
		{
			name: "redis url with another scheme",
			in: func(t *testing.T) string {
				return edit(t, "url: redis://127.0.0.1:6379/0", "url: http://127.0.0.1:6379")
			},
			want: []string{`store.redis.url: must be a redis://, rediss:// or unix:// URL, got "http://127.0.0.1:6379"`},
		},
		{
			name: "redis url password is not repeated",
			in:   func(t *testing.T) string { return edit(t, "url: redis://127.0.0.1:6379/0", "url: 'redis://:s3cret@'") },
			want: []string{`store.redis.url: must name a host, like redis://127.0.0.1:6379/0, got "redis://:xxxxx@"`},
		},
		{
			name: "redis unix url without a path",
			in:   func(t *testing.T) string { return edit(t, "url: redis://127.0.0.1:6379/0", "url: 'unix://'") },
			want: []string{`store.redis.url: must name a socket path, like unix:///run/redis.sock, got "unix://"`},
		},
		{
			name: "redis master name with url",
			in: func(t *testing.T) string {
				return edit(t, "url: redis://127.0.0.1:6379/0", "url: redis://127.0.0.1:6379/0, master_name: mymaster")
			},
			want: []string{`store.redis.master_name: must be used with addrs (the Sentinel addresses), not url, got "mymaster"`},
		},
		{
			name: "redis addr without a port",
			in: func(t *testing.T) string {
				return edit(t, "url: redis://127.0.0.1:6379/0", "addrs: [10.0.0.1], master_name: m")
			},
			want: []string{`store.redis.addrs[0]: must be host:port, like 10.0.0.1:6379, got "10.0.0.1"`},
		},
		{
			name: "redis cluster with a db",
			in: func(t *testing.T) string {
				return edit(t, "url: redis://127.0.0.1:6379/0", "addrs: [10.0.0.1:6379, 10.0.0.2:6379], db: 3")
			},
			want: []string{`store.redis.db: must be 0 with Redis Cluster (several addrs and no master_name), got 3`},
		},
		{
			name: "redis negative numbers and durations",
			in: func(t *testing.T) string {
				return edit(t, "url: redis://127.0.0.1:6379/0", "url: redis://127.0.0.1:6379/0, db: -1, pool_size: -2, dial_timeout: -1s, op_timeout: -2s")
			},
			want: []string{
				`store.redis.db: must be >= 0, got -1`,
				`store.redis.pool_size: must be >= 0, got -2`,
				`store.redis.dial_timeout: must be a duration >= 0, got "-1s"`,
				`store.redis.op_timeout: must be a duration >= 0, got "-2s"`,
			},
		},
		{
			name: "memory bounds negative",
			in: func(t *testing.T) string {
				return edit(t, "{redis: {url: redis://127.0.0.1:6379/0}}", "{memory: {max_entries: -1, max_bytes: -2}}")
			},
			want: []string{
				`store.memory.max_entries: must be >= 0, got -1`,
				`store.memory.max_bytes: must be >= 0, got -2`,
			},
		},
		{
			name: "peer name with capitals",
			in:   func(t *testing.T) string { return edit(t, "peers: {summarizer:", "peers: {Summarizer:") },
			want: []string{
				`peers.Summarizer: the peer's name must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit, got "Summarizer"`,
				`edges[0].to: must name a peer under peers, got "summarizer"`,
			},
		},
		{
			name: "peer is this agent",
			in:   func(t *testing.T) string { return edit(t, "agent: analyst", "agent: summarizer") },
			want: []string{`peers.summarizer: must not be this Baton's own agent, got "summarizer"`},
		},
		{
			name: "peer without a url",
			in: func(t *testing.T) string {
				return edit(t, "{summarizer: {url: http://127.0.0.1:16006}}", "{summarizer: {}}")
			},
			want: []string{`peers.summarizer.url: must be set to the http(s) URL of the peer's Baton ingress, like http://10.0.0.7:15006`},
		},
		{
			name: "peer url with another scheme",
			in: func(t *testing.T) string {
				return edit(t, "url: http://127.0.0.1:16006", "url: grpc://127.0.0.1:16006")
			},
			want: []string{`peers.summarizer.url: must be the http(s) URL of the peer's Baton ingress (scheme must be http or https), got "grpc://127.0.0.1:16006"`},
		},
		{
			name: "external host without a port",
			in:   func(t *testing.T) string { return edit(t, `"api.example.com:443"`, `"api.example.com"`) },
			want: []string{`external.allow[0]: must be host:port, e.g. api.example.com:443 or *.example.com:443, got "api.example.com"`},
		},
		{
			name: "external port zero",
			in:   func(t *testing.T) string { return edit(t, `"api.example.com:443"`, `"api.example.com:0"`) },
			want: []string{`external.allow[0]: must have a port between 1 and 65535, got "api.example.com:0"`},
		},
		{
			name: "external wildcard in the middle",
			in:   func(t *testing.T) string { return edit(t, `"api.example.com:443"`, `"api.*.com:443"`) },
			want: []string{`external.allow[0]: must be a host name or IP, with at most a leading *. wildcard, got "api.*.com:443"`},
		},
		{
			name: "edge with neither to nor from",
			in:   func(*testing.T) string { return example + "  - {max_hops: 2}\n" },
			want: []string{`edges[2]: must set to (an outbound edge) or from (an inbound edge)`},
		},
		{
			name: "edge with both to and from",
			in:   func(*testing.T) string { return example + "  - {to: summarizer, from: planner}\n" },
			want: []string{`edges[2]: must set only one of to and from, got to "summarizer" and from "planner"`},
		},
		{
			name: "edge to an unknown peer",
			in:   func(*testing.T) string { return example + "  - {to: critic}\n" },
			want: []string{`edges[2].to: must name a peer under peers, got "critic"`},
		},
		{
			name: "edge from a bad name",
			in:   func(*testing.T) string { return example + "  - {from: Critic}\n" },
			want: []string{`edges[2].from: must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit, got "Critic"`},
		},
		{
			name: "edge from this agent",
			in:   func(*testing.T) string { return example + "  - {from: analyst}\n" },
			want: []string{`edges[2].from: must not be this Baton's own agent, got "analyst"`},
		},
		{
			name: "edge repeated",
			in:   func(*testing.T) string { return example + "  - {to: summarizer}\n  - {from: planner}\n" },
			want: []string{
				`edges[2].to: must not repeat edges[0], got "summarizer"`,
				`edges[3].from: must not repeat edges[1], got "planner"`,
			},
		},
		{
			name: "explicit max_hops 0 is not read as unset",
			in: func(t *testing.T) string {
				return edit(t, "{from: planner, max_hops: 8}", "{from: planner, max_hops: 0}")
			},
			want: []string{`edges[1].max_hops: must be between 1 and 255, got 0`},
		},
		{
			name: "max_hops too large",
			in: func(t *testing.T) string {
				return edit(t, "{to: summarizer, max_hops: 8}", "{to: summarizer, max_hops: 256}")
			},
			want: []string{`edges[0].max_hops: must be between 1 and 255, got 256`},
		},
		{
			name: "max body negative",
			in:   func(*testing.T) string { return example + "limits: {max_body_bytes: -1}\n" },
			want: []string{`limits.max_body_bytes: must be > 0, got -1`},
		},
		{
			name: "timeouts negative",
			in: func(*testing.T) string {
				return example + "timeouts: {read_header: -1s, read: -2s, idle: -3s, dial: -4s, upstream_header: -5s}\n"
			},
			want: []string{
				`timeouts.read_header: must be a duration >= 0, got "-1s"`,
				`timeouts.read: must be a duration >= 0, got "-2s"`,
				`timeouts.idle: must be a duration >= 0, got "-3s"`,
				`timeouts.dial: must be a duration >= 0, got "-4s"`,
				`timeouts.upstream_header: must be a duration >= 0, got "-5s"`,
			},
		},
		{
			name: "a long bad value is shortened",
			in:   func(*testing.T) string { return example + "log_level: " + strings.Repeat("x", 100) + "\n" },
			want: []string{`log_level: must be one of debug, info, warn, error, got "` + strings.Repeat("x", 80) + `"...`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(strings.NewReader(tt.in(t)), nil)
			if err == nil {
				t.Fatalf("Parse succeeded, want %q\n%s", tt.want, dump(c))
			}
			if c != nil {
				t.Errorf("Parse returned a config with its error")
			}
			if got := lines(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse error lines\n got: %q\nwant: %q", got, tt.want)
			}
			assertFieldErrors(t, err)
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
			want: []string{`frobnicate: unknown key, want one of agent, upstream, log_level, shutdown_grace, listen, store, peers, groups, external, edges, dedupe, retry, breaker, records, contract, identity, trust, taint, journal, approvals, tls, compensation, admin_token, limits, timeouts, intercept (line 3)`},
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
			want: []string{`edges[1].retries: unknown key, want one of to, from, max_hops, dedupe, retry, breaker, auto_replay, contract, require_signature, posture, grant, untrusted, on_injection, journal, mcp, confirm, context, side_effects, callers (line 5)`},
		},
		{
			name: "in a merged mapping",
			in:   minimal + "edges: [{<<: {hops: 2}, from: a}]\n",
			want: []string{`edges[0].hops: unknown key, want one of to, from, max_hops, dedupe, retry, breaker, auto_replay, contract, require_signature, posture, grant, untrusted, on_injection, journal, mcp, confirm, context, side_effects, callers (line 3)`},
		},
		{
			name: "fields filled by Validate are not keys",
			in:   minimal + "upstreamurl: http://x\n",
			want: []string{`upstreamurl: unknown key, want one of agent, upstream, log_level, shutdown_grace, listen, store, peers, groups, external, edges, dedupe, retry, breaker, records, contract, identity, trust, taint, journal, approvals, tls, compensation, admin_token, limits, timeouts, intercept (line 3)`},
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

func TestParseEnv(t *testing.T) {
	t.Parallel()
	withRedis := minimal + "store: {redis: {url: redis://127.0.0.1:6379/0, password: fromfile}}\n"
	tests := []struct {
		name    string
		in      string
		env     map[string]string
		check   func(t *testing.T, c *Config)
		wantErr []string
	}{
		{
			name: "BATON_AGENT overrides the file",
			in:   minimal,
			env:  map[string]string{"BATON_AGENT": "planner"},
			check: func(t *testing.T, c *Config) {
				if c.Agent != "planner" {
					t.Errorf("Agent = %q, want planner", c.Agent)
				}
			},
		},
		{
			name: "BATON_AGENT and BATON_UPSTREAM configure an empty file",
			in:   "",
			env:  map[string]string{"BATON_AGENT": "planner", "BATON_UPSTREAM": "http://127.0.0.1:7000"},
			check: func(t *testing.T, c *Config) {
				if c.Agent != "planner" || c.Upstream != "http://127.0.0.1:7000" || c.UpstreamURL.Host != "127.0.0.1:7000" {
					t.Errorf("Agent, Upstream = %q, %q", c.Agent, c.Upstream)
				}
			},
		},
		{
			name: "BATON_UPSTREAM overrides the file",
			in:   minimal,
			env:  map[string]string{"BATON_UPSTREAM": "https://agent.local:8443/base"},
			check: func(t *testing.T, c *Config) {
				if c.UpstreamURL.String() != "https://agent.local:8443/base" {
					t.Errorf("UpstreamURL = %v", c.UpstreamURL)
				}
			},
		},
		{
			name: "BATON_LOG_LEVEL overrides the file",
			in:   minimal + "log_level: warn\n",
			env:  map[string]string{"BATON_LOG_LEVEL": "debug"},
			check: func(t *testing.T, c *Config) {
				if c.LogLevel != "debug" {
					t.Errorf("LogLevel = %q, want debug", c.LogLevel)
				}
			},
		},
		{
			name: "BATON_INTERCEPT_MODE overrides the file",
			in:   minimal + "intercept: {mode: proxy}\n",
			env:  map[string]string{"BATON_INTERCEPT_MODE": "transparent"},
			check: func(t *testing.T, c *Config) {
				if !c.Transparent() {
					t.Errorf("Intercept.Mode = %q, want transparent", c.Intercept.Mode)
				}
			},
		},
		{
			name: "BATON_SHUTDOWN_GRACE overrides the file",
			in:   minimal + "shutdown_grace: 5s\n",
			env:  map[string]string{"BATON_SHUTDOWN_GRACE": "45s"},
			check: func(t *testing.T, c *Config) {
				if c.ShutdownGrace.D() != 45*time.Second {
					t.Errorf("ShutdownGrace = %v, want 45s", c.ShutdownGrace.D())
				}
			},
		},
		{
			name: "BATON_REDIS_PASSWORD overrides the file",
			in:   withRedis,
			env:  map[string]string{"BATON_REDIS_PASSWORD": "fromenv"},
			check: func(t *testing.T, c *Config) {
				if c.Store.Redis.Password != "fromenv" {
					t.Errorf("Password = %q, want fromenv", c.Store.Redis.Password)
				}
			},
		},
		{
			name: "BATON_REDIS_PASSWORD alone does not switch on redis",
			in:   minimal,
			env:  map[string]string{"BATON_REDIS_PASSWORD": "fromenv"},
			check: func(t *testing.T, c *Config) {
				if c.Store.Redis != nil {
					t.Errorf("Store.Redis = %+v, want nil", c.Store.Redis)
				}
			},
		},
		{
			name: "an empty variable counts as unset",
			in:   withRedis,
			env:  map[string]string{"BATON_AGENT": "", "BATON_REDIS_PASSWORD": "", "BATON_SHUTDOWN_GRACE": ""},
			check: func(t *testing.T, c *Config) {
				if c.Agent != "analyst" || c.Store.Redis.Password != "fromfile" || c.ShutdownGrace.D() != DefaultShutdownGrace {
					t.Errorf("Agent, Password, ShutdownGrace = %q, %q, %v", c.Agent, c.Store.Redis.Password, c.ShutdownGrace.D())
				}
			},
		},
		{
			name:    "malformed BATON_SHUTDOWN_GRACE names the variable and its text",
			in:      minimal,
			env:     map[string]string{"BATON_SHUTDOWN_GRACE": "soon"},
			wantErr: []string{`shutdown_grace: must be a duration like 15s or 1m30s (from BATON_SHUTDOWN_GRACE), got "soon"`},
		},
		{
			name:    "negative BATON_SHUTDOWN_GRACE",
			in:      minimal,
			env:     map[string]string{"BATON_SHUTDOWN_GRACE": "-3s"},
			wantErr: []string{`shutdown_grace: must be a duration >= 0 (from BATON_SHUTDOWN_GRACE), got "-3s"`},
		},
		{
			name: "bad values from the environment say so, next to the file's problems",
			in:   minimal + "edges: [{to: nobody}]\n",
			env: map[string]string{
				"BATON_AGENT": "Bad Name", "BATON_UPSTREAM": "127.0.0.1:9001",
				"BATON_LOG_LEVEL": "INFO", "BATON_SHUTDOWN_GRACE": "1 minute",
			},
			wantErr: []string{
				`shutdown_grace: must be a duration like 15s or 1m30s (from BATON_SHUTDOWN_GRACE), got "1 minute"`,
				`agent: must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit (from BATON_AGENT), got "Bad Name"`,
				`upstream: must be the http(s) URL of the local agent, like http://127.0.0.1:8080 (no http:// or https://) (from BATON_UPSTREAM), got "127.0.0.1:9001"`,
				`log_level: must be one of debug, info, warn, error (from BATON_LOG_LEVEL), got "INFO"`,
				`edges[0].to: must name a peer under peers, got "nobody"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(strings.NewReader(tt.in), envOf(tt.env))
			if tt.wantErr != nil {
				if got := lines(err); !reflect.DeepEqual(got, tt.wantErr) {
					t.Errorf("Parse error lines\n got: %q\nwant: %q", got, tt.wantErr)
				}
				assertFieldErrors(t, err)
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "baton.yaml")
	if err := os.WriteFile(good, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{name: "a good file", path: good},
		{name: "a missing file", path: filepath.Join(dir, "missing.yaml"), wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(tt.path, envOf(nil))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Load error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.Agent != "analyst" {
				t.Errorf("Agent = %q", c.Agent)
			}
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

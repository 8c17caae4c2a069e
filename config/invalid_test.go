package config

import (
	"reflect"
	"strings"
	"testing"
)

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
			name: "breaker open times",
			in: func(*testing.T) string {
				return minimal + "breaker: {open_for: 1m, max_open_for: 10s}\n" +
					"peers: {b: {url: http://127.0.0.1:1}, c: {url: http://127.0.0.1:2}, d: {url: http://127.0.0.1:3}, e: {url: http://127.0.0.1:4}}\n" +
					"edges: [{to: b, breaker: {open_for: 5s}}, {to: c, breaker: {max_open_for: 30s}}, {to: d, breaker: {failures: 2}},\n" +
					"  {to: e, breaker: {open_for: 2s, max_open_for: -1s}}]\n"
			},
			want: []string{
				`edges[1].breaker.max_open_for: must not be shorter than open_for (1m0s): the breaker opens for open_for first, then longer while probes fail, got "30s"`,
				`edges[3].breaker.max_open_for: must be a duration > 0, got "-1s"`,
				`breaker.max_open_for: must not be shorter than open_for (1m0s): the breaker opens for open_for first, then longer while probes fail, got "10s"`,
			},
		},
		{
			name: "an edge's open_for past the top-level max_open_for",
			in: func(*testing.T) string {
				return minimal + "breaker: {open_for: 1s, max_open_for: 10s}\npeers: {b: {url: http://127.0.0.1:1}}\nedges: [{to: b, breaker: {open_for: 20s}}]\n"
			},
			want: []string{`edges[0].breaker.open_for: must not be longer than max_open_for (10s, set in breaker); set max_open_for on this block too, got "20s"`},
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
			name: "holder timeout too short to renew",
			in: func(t *testing.T) string {
				return edit(t, "{redis: {url: redis://127.0.0.1:6379/0}}", "{redis: {url: redis://127.0.0.1:6379/0}, holder_timeout: 100ms}")
			},
			want: []string{`store.holder_timeout: must be a duration of at least 300ms, got "100ms"`},
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
			name: "TLS interception",
			in: func(t *testing.T) string {
				return example + "intercept: {tls: {hosts: [api.other.com:443, api.example.com], ca: {cert_file: /ca.crt}, bundle: ca.pem, leaf_ttl: 1m, cache_size: -1}}\n"
			},
			want: []string{
				`intercept.tls.hosts[0]: must be allowed by external.allow (Baton terminates TLS only to hosts the agent may reach), got "api.other.com:443"`,
				`intercept.tls.hosts[1]: must be host:port, e.g. api.example.com:443 or *.example.com:443, got "api.example.com"`,
				`intercept.tls.ca: must set both cert_file and key_file, or neither (a CA made at start)`,
				`intercept.tls.bundle: must be an absolute path, got "ca.pem"`,
				`intercept.tls.leaf_ttl: must be a duration from 10m to 168h, got "1m0s"`,
				`intercept.tls.cache_size: must be an integer > 0, got -1`,
			},
		},
		{
			name: "base-URL routes",
			in: func(t *testing.T) string {
				return edit(t, `external: {allow: ["api.example.com:443"]}`, `external: {allow: ["api.example.com:443"], routes: [`+
					`{name: OpenAI}, {name: llm}, {name: azure-openai}, {name: anthropic}, {name: anthropic}, {name: x, url: "ftp://h/"}, {name: y, url: "https://u:p@h/"}]}`)
			},
			want: []string{
				`external.routes[0].name: must be lowercase letters, digits and dashes, like openai, got "OpenAI"`,
				`external.routes[1].url: must be set to the upstream's base URL, like https://llm.example.com/v1/ (known without one: anthropic, gemini, openai)`,
				`external.routes[2].url: must be set: azure-openai has no public endpoint (give your resource's, like https://NAME.openai.azure.com/)`,
				`external.routes[4].name: must be unique among external.routes, got "anthropic"`,
				`external.routes[5].url: must be an http(s) base URL (scheme must be http or https), got "ftp://h/"`,
				`external.routes[6].url: must be a base URL with no credentials, query or fragment, got "https://u:xxxxx@h/"`,
			},
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

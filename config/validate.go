package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// agentName is the shape of agent and peer names: they travel in headers and
// appear in Host, so they are DNS-label-like.
var agentName = bounded{max: 63, re: regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)}

// bounded is a pattern and the longest string it matches. The bound is
// checked apart from the pattern: a repetition such as {0,61} compiles to
// that many copies of its class, which every process that imports config
// would pay for at start (a third of a millisecond for these three).
type bounded struct {
	max int
	re  *regexp.Regexp
}

// MatchString reports whether s is at most b.max bytes and matches b.re.
func (b bounded) MatchString(s string) bool { return len(s) <= b.max && b.re.MatchString(s) }

const expectName = "must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit"

// FieldError is one problem with one field. Its text is the path, what is
// expected, the bad value when there is one, and the line when known:
//
//	edges[2].max_hops: must be between 1 and 255, got 0
//	listen.egres: unknown key, did you mean egress? (line 3)
type FieldError struct {
	Path   string // e.g. edges[2].max_hops; empty for the file as a whole
	Value  any    // the bad value; nil when there is none to show
	Expect string // what is expected
	Line   int    // 1-based line in the file, 0 when unknown (Validate does not know lines)
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Expect)
	if e.Value != nil {
		b.WriteString(", got ")
		b.WriteString(show(e.Value))
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	return b.String()
}

// maxShown bounds how much of a bad value a message repeats.
const maxShown = 80

func show(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		if len(v) > maxShown {
			return strconv.Quote(v[:maxShown]) + "..."
		}
		return strconv.Quote(v)
	default:
		s = fmt.Sprint(v)
	}
	if len(s) > maxShown {
		s = s[:maxShown] + "..."
	}
	return s
}

// Validate checks the configuration and reports every problem at once (up to
// fifty, then a count of the rest), as errors.Join of *FieldError. It has no
// side effects beyond filling the parsed fields (UpstreamURL, Peer.ParsedURL)
// of the fields that are valid.
func (c *Config) Validate() error {
	errs := append([]error(nil), c.envErrs...)
	bad := func(path string, v any, expect string) {
		if name, ok := c.fromEnv[path]; ok {
			expect += " (from " + name + ")"
		}
		errs = append(errs, &FieldError{Path: path, Value: v, Expect: expect})
	}

	switch {
	case c.Agent == "":
		bad("agent", nil, "must be set (here or by BATON_AGENT) to this agent's name, like analyst")
	case !agentName.MatchString(c.Agent):
		bad("agent", c.Agent, expectName)
	}
	if c.Upstream == "" {
		bad("upstream", nil, "must be set (here or by BATON_UPSTREAM) to the local agent's URL, like http://127.0.0.1:8080")
	} else if u, err := parseHTTPURL(c.Upstream); err != nil {
		bad("upstream", redact(c.Upstream), "must be the http(s) URL of the local agent, like http://127.0.0.1:8080 ("+err.Error()+")")
	} else {
		c.UpstreamURL = u
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", c.LogLevel, "must be one of debug, info, warn, error")
	}
	if c.ShutdownGrace < 0 {
		bad("shutdown_grace", c.ShutdownGrace.D().String(), "must be a duration >= 0")
	}

	c.validateListen(bad)
	c.validateStore(bad)
	c.validatePeers(bad)
	for i, a := range c.External.Allow {
		if err := checkAllow(a); err != nil {
			bad(fmt.Sprintf("external.allow[%d]", i), a, err.Error())
		}
	}
	c.validateRoutes(bad)
	c.validateEdges(bad)
	c.validateCallers(bad)
	c.validateGroups(bad)
	validateDedupe(bad, "dedupe", &c.Dedupe)
	validateRetry(bad, "retry", &c.Retry)
	validateBreaker(bad, "breaker", &c.Breaker, defaultBreaker())
	c.validateRecords(bad)
	validateContract(bad, "contract", &c.Contract)
	c.validateTrust(bad)
	c.validateIntercept(bad)
	c.validateTaint(bad)
	c.validateJournal(bad)
	c.validateModels(bad)
	c.validateInterceptTLS(bad)
	c.validateMCP(bad)
	c.validateConfirm(bad)
	c.validateContext(bad)
	c.validateCompensation(bad)
	c.validateTLS(bad)

	if c.Limits.MaxBodyBytes < 1 {
		bad("limits.max_body_bytes", c.Limits.MaxBodyBytes, "must be > 0")
	}
	for _, t := range []struct {
		path string
		d    Duration
	}{
		{"timeouts.read_header", c.Timeouts.ReadHeader},
		{"timeouts.read", c.Timeouts.Read},
		{"timeouts.idle", c.Timeouts.Idle},
		{"timeouts.dial", c.Timeouts.Dial},
		{"timeouts.upstream_header", c.Timeouts.UpstreamHeader},
	} {
		if t.d < 0 {
			bad(t.path, t.d.D().String(), "must be a duration >= 0")
		}
	}
	return join(errs)
}

type badFunc func(path string, v any, expect string)

func (c *Config) validateListen(bad badFunc) {
	type listener struct {
		path, host string
		port       int
	}
	var seen []listener
	for _, l := range []struct{ path, addr string }{
		{"listen.egress", c.Listen.Egress},
		{"listen.ingress", c.Listen.Ingress},
		{"listen.admin", c.Listen.Admin},
	} {
		host, port, err := net.SplitHostPort(l.addr)
		if err != nil {
			bad(l.path, l.addr, "must be host:port, like 127.0.0.1:15001")
			continue
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			bad(l.path, l.addr, "must have a port between 0 and 65535")
			continue
		}
		// Port 0 asks the kernel for a free port, so it never collides. A
		// wildcard host takes the port on every address, so it collides
		// with any host.
		for _, o := range seen {
			if p != 0 && o.port == p && (o.host == host || wildcard(o.host) || wildcard(host)) {
				bad(l.path, l.addr, "must not use the same port as "+o.path)
				break
			}
		}
		seen = append(seen, listener{l.path, host, p})
	}
}

func wildcard(host string) bool {
	return host == "" || host == "0.0.0.0" || host == "::"
}

func (c *Config) validateStore(bad badFunc) {
	if r := c.Store.Redis; r != nil {
		switch {
		case r.URL == "" && len(r.Addrs) == 0:
			bad("store.redis", nil, "must set url (single node) or addrs (Sentinel with master_name, or Cluster)")
		case r.URL != "" && len(r.Addrs) > 0:
			bad("store.redis.url", redact(r.URL), "must not be set together with store.redis.addrs")
		case r.URL != "":
			if err := checkRedisURL(r.URL); err != nil {
				bad("store.redis.url", redact(r.URL), err.Error())
			}
			if r.MasterName != "" {
				bad("store.redis.master_name", r.MasterName, "must be used with addrs (the Sentinel addresses), not url")
			}
		}
		for i, a := range r.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				bad(fmt.Sprintf("store.redis.addrs[%d]", i), a, "must be host:port, like 10.0.0.1:6379")
			}
		}
		if r.DB < 0 {
			bad("store.redis.db", r.DB, "must be >= 0")
		} else if r.DB != 0 && len(r.Addrs) > 1 && r.MasterName == "" {
			bad("store.redis.db", r.DB, "must be 0 with Redis Cluster (several addrs and no master_name)")
		}
		if r.PoolSize < 0 {
			bad("store.redis.pool_size", r.PoolSize, "must be >= 0")
		}
		if r.DialTimeout < 0 {
			bad("store.redis.dial_timeout", r.DialTimeout.D().String(), "must be a duration >= 0")
		}
		if r.OpTimeout < 0 {
			bad("store.redis.op_timeout", r.OpTimeout.D().String(), "must be a duration >= 0")
		}
	}
	if h := c.Store.HolderTimeout; h != 0 && h.D() < 300*time.Millisecond {
		bad("store.holder_timeout", h.D().String(), "must be a duration of at least 300ms")
	}
	if c.Store.Memory.MaxEntries < 0 {
		bad("store.memory.max_entries", c.Store.Memory.MaxEntries, "must be >= 0")
	}
	if c.Store.Memory.MaxBytes < 0 {
		bad("store.memory.max_bytes", c.Store.Memory.MaxBytes, "must be >= 0")
	}
}

func (c *Config) validatePeers(bad badFunc) {
	names := make([]string, 0, len(c.Peers))
	for name := range c.Peers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := c.Peers[name]
		path := "peers." + name
		switch {
		case !agentName.MatchString(name):
			bad(path, name, "the peer's name "+expectName)
		case name == c.Agent:
			bad(path, name, "must not be this Baton's own agent")
		}
		for i, port := range p.Ports {
			if port < 1 || port > 65535 {
				bad(fmt.Sprintf("%s.ports[%d]", path, i), port, "must be a port from 1 to 65535")
			}
		}
		if p.URL == "" {
			bad(path+".url", nil, "must be set to the http(s) URL of the peer's Baton ingress, like http://10.0.0.7:15006")
		} else if u, err := parseHTTPURL(p.URL); err != nil {
			bad(path+".url", redact(p.URL), "must be the http(s) URL of the peer's Baton ingress ("+err.Error()+")")
		} else {
			p.ParsedURL = u
			c.Peers[name] = p
		}
	}
}

func (c *Config) validateEdges(bad badFunc) {
	to, from := map[string]int{}, map[string]int{}
	for i, e := range c.Edges {
		path := fmt.Sprintf("edges[%d]", i)
		switch {
		case e.To == "" && e.From == "":
			bad(path, nil, "must set to (an outbound edge) or from (an inbound edge)")
		case e.To != "" && e.From != "":
			bad(path, nil, fmt.Sprintf("must set only one of to and from, got to %q and from %q", e.To, e.From))
		case e.To != "":
			if _, ok := c.Peers[e.To]; !ok {
				bad(path+".to", e.To, "must name a peer under peers")
			} else if j, dup := to[e.To]; dup {
				bad(path+".to", e.To, fmt.Sprintf("must not repeat edges[%d]", j))
			} else {
				to[e.To] = i
			}
		default:
			if !agentName.MatchString(e.From) {
				bad(path+".from", e.From, expectName)
			} else if e.From == c.Agent {
				bad(path+".from", e.From, "must not be this Baton's own agent")
			} else if j, dup := from[e.From]; dup {
				bad(path+".from", e.From, fmt.Sprintf("must not repeat edges[%d]", j))
			} else {
				from[e.From] = i
			}
		}
		if e.MaxHops < 1 || e.MaxHops > 255 {
			bad(path+".max_hops", e.MaxHops, "must be between 1 and 255")
		}
		if e.Dedupe != nil && e.To != "" {
			bad(path+".dedupe", nil, "applies to inbound edges (from) only: the receiver's Baton keeps the window")
		}
		validateDedupe(bad, path+".dedupe", e.Dedupe)
		if e.From != "" && (e.Retry != nil || e.Breaker != nil || e.AutoReplay) {
			bad(path, nil, "retry, breaker and auto_replay apply to outbound edges (to) only: the sender's Baton retries")
		}
		validateRetry(bad, path+".retry", e.Retry)
		validateContract(bad, path+".contract", e.Contract)
		validateBreaker(bad, path+".breaker", e.Breaker, c.topBreaker())
	}
}

func parseHTTPURL(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		return nil, errors.New("no http:// or https://")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("scheme must be http or https")
	}
	if u.Host == "" {
		return nil, errors.New("no host")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("no query or fragment allowed")
	}
	return u, nil
}

func checkRedisURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("must be a redis://, rediss:// or unix:// URL")
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			return errors.New("must name a host, like redis://127.0.0.1:6379/0")
		}
	case "unix":
		if u.Path == "" {
			return errors.New("must name a socket path, like unix:///run/redis.sock")
		}
	default:
		return errors.New("must be a redis://, rediss:// or unix:// URL")
	}
	return nil
}

// redact hides a password in a URL, so that a problem report can be pasted
// into an issue: redis://:secret@host becomes redis://:xxxxx@host.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
		return s
	}
	// Unparseable: hide everything between the scheme and the last '@'.
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 && i < at {
		start = i + 3
	}
	return s[:start] + "xxxxx" + s[at:]
}

func checkAllow(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("must be host:port, e.g. api.example.com:443 or *.example.com:443")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return errors.New("must have a port between 1 and 65535")
	}
	h := strings.TrimPrefix(host, "*.")
	if h == "" || strings.Contains(h, "*") {
		return errors.New("must be a host name or IP, with at most a leading *. wildcard")
	}
	return nil
}

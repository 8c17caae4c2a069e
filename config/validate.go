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
)

// agentName is the shape of agent and peer names: they travel in headers and
// appear in Host, so they are DNS-label-like.
var agentName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// FieldError is one problem with one field.
type FieldError struct {
	Path   string // e.g. edges[2].max_hops
	Value  any    // the bad value
	Expect string // what is expected
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s, got %s", e.Path, e.Expect, show(e.Value))
}

func show(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case nil:
		return "nothing"
	default:
		return fmt.Sprint(v)
	}
}

// Validate checks the configuration and reports every problem at once, as
// errors.Join of *FieldError. It has no side effects beyond filling the
// parsed fields (UpstreamURL, Peer.ParsedURL) of a valid configuration.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path string, v any, expect string) {
		errs = append(errs, &FieldError{Path: path, Value: v, Expect: expect})
	}

	if !agentName.MatchString(c.Agent) {
		bad("agent", c.Agent, "must be a lowercase name of letters, digits, '.', '_' or '-' (at most 63)")
	}
	if u, err := parseHTTPURL(c.Upstream); err != nil {
		bad("upstream", c.Upstream, "must be an http(s) URL of the local agent like http://127.0.0.1:8080 ("+err.Error()+")")
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

	addrs := map[string]string{}
	for _, l := range []struct{ path, addr string }{
		{"listen.egress", c.Listen.Egress},
		{"listen.ingress", c.Listen.Ingress},
		{"listen.admin", c.Listen.Admin},
	} {
		if _, port, err := net.SplitHostPort(l.addr); err != nil {
			bad(l.path, l.addr, "must be host:port")
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			bad(l.path, l.addr, "must have a port between 0 and 65535")
		} else if other, dup := addrs[l.addr]; dup && p != 0 {
			bad(l.path, l.addr, "must differ from "+other)
		} else {
			addrs[l.addr] = l.path
		}
	}

	if r := c.Store.Redis; r != nil {
		switch {
		case r.URL == "" && len(r.Addrs) == 0:
			bad("store.redis", nil, "must set url (single node) or addrs (Sentinel with master_name, or Cluster)")
		case r.URL != "" && len(r.Addrs) > 0:
			bad("store.redis.url", r.URL, "must not be set together with store.redis.addrs")
		case r.URL != "":
			if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
				bad("store.redis.url", r.URL, "must be a redis://, rediss:// or unix:// URL")
			}
		}
		for i, a := range r.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				bad(fmt.Sprintf("store.redis.addrs[%d]", i), a, "must be host:port")
			}
		}
		if r.DB < 0 {
			bad("store.redis.db", r.DB, "must be >= 0")
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
	if c.Store.Memory.MaxEntries < 0 {
		bad("store.memory.max_entries", c.Store.Memory.MaxEntries, "must be >= 0")
	}
	if c.Store.Memory.MaxBytes < 0 {
		bad("store.memory.max_bytes", c.Store.Memory.MaxBytes, "must be >= 0")
	}

	names := make([]string, 0, len(c.Peers))
	for name := range c.Peers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := c.Peers[name]
		path := "peers." + name
		if !agentName.MatchString(name) {
			bad(path, name, "must be a lowercase agent name")
		}
		if name == c.Agent {
			bad(path, name, "must not be this Baton's own agent")
		}
		if u, err := parseHTTPURL(p.URL); err != nil {
			bad(path+".url", p.URL, "must be the http(s) URL of the peer's Baton ingress ("+err.Error()+")")
		} else {
			p.ParsedURL = u
			c.Peers[name] = p
		}
	}

	for i, a := range c.External.Allow {
		if err := checkAllow(a); err != nil {
			bad(fmt.Sprintf("external.allow[%d]", i), a, err.Error())
		}
	}

	seen := map[string]int{}
	for i, e := range c.Edges {
		path := fmt.Sprintf("edges[%d]", i)
		switch {
		case e.To == "" && e.From == "":
			bad(path, nil, "must set to (outbound) or from (inbound)")
		case e.To != "" && e.From != "":
			bad(path, e.To+"/"+e.From, "must set only one of to and from")
		case e.To != "":
			if _, ok := c.Peers[e.To]; !ok {
				bad(path+".to", e.To, "must name a peer under peers")
			}
		default:
			if !agentName.MatchString(e.From) {
				bad(path+".from", e.From, "must be a lowercase agent name")
			}
		}
		key := "to:" + e.To + "|from:" + e.From
		if j, dup := seen[key]; dup {
			bad(path, key, fmt.Sprintf("must not repeat edges[%d]", j))
		}
		seen[key] = i
		if e.MaxHops < 1 || e.MaxHops > 255 {
			bad(path+".max_hops", e.MaxHops, "must be between 1 and 255")
		}
	}

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
	return errors.Join(errs...)
}

func parseHTTPURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("empty")
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

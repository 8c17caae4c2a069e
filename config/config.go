// Package config holds the one set of types for Baton's YAML configuration
// file: strict decoding (an unknown key is an error), defaults, BATON_*
// environment overrides for the top-level scalars, and a pure Validate that
// reports every problem at once. Durations, URLs and addresses are parsed
// here, once, never per request. It imports nothing else of Baton.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the whole of a Baton's configuration file.
type Config struct {
	// Agent is this Baton's agent identity, sent as Baton-Agent.
	Agent string `yaml:"agent"`
	// Upstream is the local agent's base URL, where ingress delivers.
	Upstream string `yaml:"upstream"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// ShutdownGrace bounds how long in-flight requests may run after
	// SIGTERM or SIGINT before the listeners are closed.
	ShutdownGrace Duration `yaml:"shutdown_grace"`

	Listen   Listen          `yaml:"listen"`
	Store    Store           `yaml:"store"`
	Peers    map[string]Peer `yaml:"peers"`
	External External        `yaml:"external"`
	Edges    []Edge          `yaml:"edges"`
	Limits   Limits          `yaml:"limits"`
	Timeouts Timeouts        `yaml:"timeouts"`

	// UpstreamURL is Upstream parsed by Load.
	UpstreamURL *url.URL `yaml:"-"`
}

// Listen holds the three listener addresses.
type Listen struct {
	Egress  string `yaml:"egress"`
	Ingress string `yaml:"ingress"`
	Admin   string `yaml:"admin"`
}

// Store selects the state store. With Redis unset the in-memory store is used.
type Store struct {
	Redis  *Redis `yaml:"redis"`
	Memory Memory `yaml:"memory"`
}

// Redis configures a go-redis UniversalClient. URL covers a single node;
// Addrs with MasterName selects Sentinel; several Addrs without it, Cluster.
type Redis struct {
	URL        string   `yaml:"url"`
	Addrs      []string `yaml:"addrs"`
	MasterName string   `yaml:"master_name"`
	Username   string   `yaml:"username"`
	// Password may also come from BATON_REDIS_PASSWORD so that it need not
	// sit in the file.
	Password    string   `yaml:"password"`
	DB          int      `yaml:"db"`
	Prefix      string   `yaml:"prefix"`
	DialTimeout Duration `yaml:"dial_timeout"`
	OpTimeout   Duration `yaml:"op_timeout"`
	PoolSize    int      `yaml:"pool_size"`
}

// Memory bounds the in-memory store.
type Memory struct {
	MaxEntries int   `yaml:"max_entries"`
	MaxBytes   int64 `yaml:"max_bytes"`
}

// Peer is another agent's Baton, reached at its ingress URL.
type Peer struct {
	URL string `yaml:"url"`

	// ParsedURL is URL parsed by Load.
	ParsedURL *url.URL `yaml:"-"`
}

// External lists the non-agent hosts the agent may reach through egress.
type External struct {
	// Allow holds host:port entries; a leading "*." matches any subdomain.
	Allow []string `yaml:"allow"`
}

// Edge is a handoff edge: To names an outbound edge from this agent, From
// an inbound edge to it. Exactly one of them is set.
type Edge struct {
	To      string `yaml:"to"`
	From    string `yaml:"from"`
	MaxHops int    `yaml:"max_hops"`
}

// Limits bounds request sizes.
type Limits struct {
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
}

// Timeouts configures the listeners and the outbound transport.
type Timeouts struct {
	ReadHeader     Duration `yaml:"read_header"`
	Read           Duration `yaml:"read"`
	Idle           Duration `yaml:"idle"`
	Dial           Duration `yaml:"dial"`
	UpstreamHeader Duration `yaml:"upstream_header"`
}

// Duration is a time.Duration written as a Go duration string ("15s").
type Duration time.Duration

// UnmarshalYAML parses a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration like 15s", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: want a duration like 15s, got %q", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Defaults for the fields a file may leave out.
const (
	DefaultEgress         = "127.0.0.1:15001"
	DefaultIngress        = "0.0.0.0:15006"
	DefaultAdmin          = "127.0.0.1:15000"
	DefaultMaxHops        = 8
	DefaultMaxBodyBytes   = 10 << 20
	DefaultMemoryEntries  = 100_000
	DefaultMemoryBytes    = 256 << 20
	DefaultShutdownGrace  = 15 * time.Second
	DefaultReadHeader     = 10 * time.Second
	DefaultIdle           = 120 * time.Second
	DefaultDial           = 5 * time.Second
	DefaultUpstreamHeader = 60 * time.Second
)

// Load reads, decodes strictly, applies defaults and environment overrides,
// and validates the file at path.
func Load(path string, env func(string) string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	return Parse(f, env)
}

// Parse decodes strictly, applies defaults and environment overrides, and
// validates. env looks up environment variables (os.Getenv in production).
func Parse(r io.Reader, env func(string) string) (*Config, error) {
	c, err := Decode(r)
	if err != nil {
		return nil, err
	}
	if env != nil {
		c.ApplyEnv(env)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Decode decodes YAML strictly: unknown keys and duplicate keys are errors.
// An empty document yields the zero Config.
func Decode(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("config: reading: %w", err)
	}
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// ApplyEnv overrides the top-level scalars from BATON_AGENT, BATON_UPSTREAM,
// BATON_LOG_LEVEL and BATON_SHUTDOWN_GRACE, and the Redis password from
// BATON_REDIS_PASSWORD. A malformed duration is left for Validate to report.
func (c *Config) ApplyEnv(env func(string) string) {
	if v := env("BATON_AGENT"); v != "" {
		c.Agent = v
	}
	if v := env("BATON_UPSTREAM"); v != "" {
		c.Upstream = v
	}
	if v := env("BATON_LOG_LEVEL"); v != "" {
		c.LogLevel = v
	}
	if v := env("BATON_SHUTDOWN_GRACE"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			c.ShutdownGrace = Duration(d)
		} else {
			c.ShutdownGrace = -1
		}
	}
	if v := env("BATON_REDIS_PASSWORD"); v != "" && c.Store.Redis != nil {
		c.Store.Redis.Password = v
	}
}

// ApplyDefaults fills in every field the file left out.
func (c *Config) ApplyDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	defD := func(d *Duration, v time.Duration) {
		if *d == 0 {
			*d = Duration(v)
		}
	}
	def(&c.Listen.Egress, DefaultEgress)
	def(&c.Listen.Ingress, DefaultIngress)
	def(&c.Listen.Admin, DefaultAdmin)
	def(&c.LogLevel, "info")
	defD(&c.ShutdownGrace, DefaultShutdownGrace)
	defD(&c.Timeouts.ReadHeader, DefaultReadHeader)
	defD(&c.Timeouts.Idle, DefaultIdle)
	defD(&c.Timeouts.Dial, DefaultDial)
	defD(&c.Timeouts.UpstreamHeader, DefaultUpstreamHeader)
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Store.Memory.MaxEntries == 0 {
		c.Store.Memory.MaxEntries = DefaultMemoryEntries
	}
	if c.Store.Memory.MaxBytes == 0 {
		c.Store.Memory.MaxBytes = DefaultMemoryBytes
	}
	if r := c.Store.Redis; r != nil {
		defD(&r.DialTimeout, 2*time.Second)
		defD(&r.OpTimeout, time.Second)
	}
	for i := range c.Edges {
		if c.Edges[i].MaxHops == 0 {
			c.Edges[i].MaxHops = DefaultMaxHops
		}
	}
}

// OutEdge returns the outbound edge to peer, if configured.
func (c *Config) OutEdge(peer string) (Edge, bool) {
	for _, e := range c.Edges {
		if e.To == peer {
			return e, true
		}
	}
	return Edge{}, false
}

// InEdge returns the inbound edge from peer, if configured.
func (c *Config) InEdge(peer string) (Edge, bool) {
	for _, e := range c.Edges {
		if e.From == peer {
			return e, true
		}
	}
	return Edge{}, false
}

// EdgeName renders an edge as "from→to" for logs and spans.
func EdgeName(from, to string) string {
	var b strings.Builder
	b.Grow(len(from) + len(to) + 3)
	b.WriteString(from)
	b.WriteString("→")
	b.WriteString(to)
	return b.String()
}

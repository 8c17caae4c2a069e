// Package config holds the one set of types for Baton's YAML configuration
// file: strict decoding (an unknown key is an error), defaults, BATON_*
// environment overrides for the top-level scalars, and a pure Validate that
// reports every problem at once. Durations, URLs and addresses are parsed
// here, once, never per request. It imports nothing else of Baton.
package config

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
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

	Listen Listen          `yaml:"listen"`
	Store  Store           `yaml:"store"`
	Peers  map[string]Peer `yaml:"peers"`
	// Groups are broadcast groups (groups.go).
	Groups   map[string]Group `yaml:"groups"`
	External External         `yaml:"external"`
	Edges    []Edge           `yaml:"edges"`
	Dedupe   Dedupe           `yaml:"dedupe"`
	Retry    Retry            `yaml:"retry"`
	Breaker  Breaker          `yaml:"breaker"`
	Records  Records          `yaml:"records"`
	Contract Contract         `yaml:"contract"`
	Identity Identity         `yaml:"identity"`
	Trust    Trust            `yaml:"trust"`
	Taint    Taint            `yaml:"taint"`
	Journal  Journal          `yaml:"journal"`
	// Models is what Baton makes of the agent's model calls (models.go).
	Models Models `yaml:"models"`
	// Approvals configures confirmation gates (confirm.go).
	Approvals Approvals `yaml:"approvals"`
	// TLS is mutual TLS between Batons (docs/tls.md).
	TLS *TLS `yaml:"tls"`
	// Compensation abandons traces on its own (docs/compensation.md).
	Compensation Compensation `yaml:"compensation"`
	// AdminToken is the bearer token the admin API requires when the admin
	// listener binds beyond loopback. Env: BATON_ADMIN_TOKEN.
	AdminToken string `yaml:"admin_token"`
	// Profiling serves the Go runtime's profiles (CPU, heap, allocations,
	// goroutines, blocking, mutexes, execution trace) on the admin listener
	// under /debug/pprof/, behind AdminToken when it is set. Off by
	// default. Env: BATON_PROFILING.
	Profiling bool     `yaml:"profiling"`
	Limits    Limits   `yaml:"limits"`
	Timeouts  Timeouts `yaml:"timeouts"`
	// Intercept says how the agent's traffic reaches Baton (see
	// intercept.go).
	Intercept Intercept `yaml:"intercept"`

	// UpstreamURL is Upstream parsed by Validate.
	UpstreamURL *url.URL `yaml:"-"`

	// fromEnv maps a field's path to the variable that set it, so that a
	// problem names where the bad value came from.
	fromEnv map[string]string
	// envErrs holds overrides that could not be applied (a malformed
	// BATON_SHUTDOWN_GRACE); Validate reports them.
	envErrs []error
}

// Listen holds the three listener addresses.
type Listen struct {
	Egress  string `yaml:"egress"`
	Ingress string `yaml:"ingress"`
	Admin   string `yaml:"admin"`
	// H2C lets the egress and ingress listeners also accept HTTP/2 without
	// TLS, with prior knowledge: many concurrent requests on one connection.
	H2C bool `yaml:"h2c"`
}

// Store selects the state store. With Redis unset the in-memory store is used.
type Store struct {
	Redis  *Redis `yaml:"redis"`
	Memory Memory `yaml:"memory"`
	// HolderTimeout is how long a Baton's liveness mark in the store
	// outlives its last renewal (renewed every third of it). The dedupe
	// window's in-flight claims name the Baton holding them: a Baton that
	// starts again frees its previous process's claims at once, and one
	// that dies for good frees them after HolderTimeout, instead of the
	// lease. Default 3s.
	HolderTimeout Duration `yaml:"holder_timeout"`
}

// DefaultHolderTimeout is store.holder_timeout's default.
const DefaultHolderTimeout = 3 * time.Second

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
	// Ports are the peer agent's own ports: with transparent interception,
	// a call to the host of the peer's URL on one of them (or on the URL's
	// port) is a handoff to the peer; on any other port it is not.
	Ports []int `yaml:"ports"`

	// ParsedURL is URL parsed by Validate.
	ParsedURL *url.URL `yaml:"-"`
}

// External lists the non-agent hosts the agent may reach through egress.
type External struct {
	// Allow holds host:port entries; a leading "*." matches any subdomain.
	Allow []string `yaml:"allow"`
	// Routes are base-URL routes (routes.go): an upstream API served on
	// the egress under /<name>/. Their upstreams are allowed too.
	Routes []Route `yaml:"routes"`
	// CAFile is a PEM file of CA certificates trusted, besides the system
	// roots, for the external hosts Baton reaches over TLS.
	CAFile string `yaml:"ca_file"`
}

// Edge is a handoff edge: To names an outbound edge from this agent, From
// an inbound edge to it. Exactly one of them is set.
type Edge struct {
	To   string `yaml:"to"`
	From string `yaml:"from"`
	// MaxHops is the deepest handoff the receiver accepts on this edge. When
	// the key is absent from the file, decoding sets DefaultMaxHops; an
	// explicit 0 stays 0 and Validate rejects it.
	MaxHops int `yaml:"max_hops"`
	// Dedupe overrides the top-level dedupe block for an inbound edge.
	Dedupe *Dedupe `yaml:"dedupe"`
	// Retry and Breaker override the top-level blocks for an outbound edge.
	Retry   *Retry   `yaml:"retry"`
	Breaker *Breaker `yaml:"breaker"`
	// AutoReplay replays the edge's dead letters when its breaker closes
	// again.
	AutoReplay bool `yaml:"auto_replay"`
	// Contract overrides the top-level contract block for this edge.
	Contract *Contract `yaml:"contract"`
	// RequireSignature requires a valid signature on handoffs from this
	// peer (inbound), or signs every handoff to it (outbound); default true
	// once trust.peers is configured.
	RequireSignature *bool `yaml:"require_signature"`
	// Posture is how the peer's content is taken: trusted, evaluate (the
	// default) or untrusted.
	Posture string `yaml:"posture"`
	// Grant bounds what the receiver of this outbound edge may do.
	Grant *Grant `yaml:"grant"`
	// Untrusted is how untrusted content arriving on this inbound edge is
	// delivered: tag (the default), spotlight, quarantine or reject;
	// OnInjection what an injection signal on it does: flag (the default),
	// quarantine or reject.
	Untrusted   string `yaml:"untrusted"`
	OnInjection string `yaml:"on_injection"`
	// Journal journals the agent's calls on this outbound edge
	// (docs/journal.md): for a peer that runs no Baton, whose calls no
	// dedupe window answers again when a chain resumes.
	Journal bool `yaml:"journal"`
	// MCP marks the edge as Model Context Protocol and bounds the tools it
	// may call (docs/mcp.md).
	MCP *MCP `yaml:"mcp"`
	// Confirm holds the edge's handoffs for a person's approval
	// (docs/gates.md). Outbound edges only.
	Confirm *Confirm `yaml:"confirm"`
	// Context passes large artifacts by reference, bounds a handoff's
	// tokens and keeps or drops its fields (docs/context.md).
	Context *Context `yaml:"context"`
	// SideEffects declares what the receiver may do and how to undo it
	// (docs/compensation.md). Outbound edges only.
	SideEffects []SideEffect `yaml:"side_effects"`
	// Callers makes an inbound edge the edge of callers that run no Baton
	// (callers.go); From is the name they get.
	Callers *Callers `yaml:"callers"`
	// ChainBudget bounds the model spend of the chains that enter on this
	// inbound edge (models.go).
	ChainBudget *ChainBudget `yaml:"chain_budget"`
}

// UnmarshalYAML decodes an edge with max_hops defaulted only when the key is
// absent. ApplyDefaults cannot do this: it would read "max_hops: 0" as unset
// and silently allow DefaultMaxHops hops where the author meant none.
func (e *Edge) UnmarshalYAML(n *yaml.Node) error {
	type plain Edge // no methods, so Decode does not come back here
	p := plain{MaxHops: DefaultMaxHops}
	if err := n.Decode(&p); err != nil {
		return err
	}
	*e = Edge(p)
	return nil
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

// UnmarshalYAML parses a duration string. Its error is a *yaml.TypeError so
// that the decoder goes on and reports the file's other problems too; Decode
// reports it with the field's path before the decoder ever sees it.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, expectDuration)}}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s, got %q", n.Line, expectDuration, s)}}
	}
	*d = Duration(v)
	return nil
}

const expectDuration = "must be a duration like 15s or 1m30s"

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
	DefaultMemoryBytes    = 64 << 20
	DefaultShutdownGrace  = 15 * time.Second
	DefaultReadHeader     = 10 * time.Second
	DefaultIdle           = 120 * time.Second
	DefaultDial           = 5 * time.Second
	DefaultUpstreamHeader = 60 * time.Second
	DefaultRedisDial      = 2 * time.Second
	DefaultRedisOp        = time.Second
	DefaultLogLevel       = "info"
)

// maxFileBytes bounds what Decode reads, so that pointing --config at
// /dev/zero fails rather than filling memory.
const maxFileBytes = 1 << 20

// Load reads the file at path, decodes it strictly, applies environment
// overrides and then defaults, and validates the result.
func Load(path string, env func(string) string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	return Parse(f, env)
}

// Parse decodes strictly, applies environment overrides and then defaults,
// and validates. env looks up environment variables (os.Getenv in
// production; nil applies none). Problems come back as errors.Join of
// *FieldError, except for a file that cannot be read or is not YAML.
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

// Decode decodes YAML strictly: unknown keys, duplicate keys, values of the
// wrong type, a document that is not a mapping and a second document are all
// errors. Those problems come back together, as errors.Join of *FieldError
// naming each field's path and line; a file that is not YAML at all gives the
// parser's error. An empty document (or one of only comments) yields the zero
// Config, so that the environment alone can configure a Baton.
func Decode(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: reading: %w", err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("config: file is larger than %d bytes", maxFileBytes)
	}
	root, err := document(data)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	if root == nil {
		return c, nil
	}
	if err := check(root, reflect.TypeFor[Config]()); err != nil {
		return nil, err
	}
	// check mirrors the decoder and reports with paths; the strict decoder
	// stays as the backstop for anything it does not foresee.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// ApplyEnv overrides the top-level scalars from BATON_AGENT, BATON_UPSTREAM,
// BATON_LOG_LEVEL and BATON_SHUTDOWN_GRACE, and the Redis password from
// BATON_REDIS_PASSWORD (only when the file configures store.redis: a password
// alone does not switch the store), the admin token from BATON_ADMIN_TOKEN,
// profiling from BATON_PROFILING (true or false) and intercept.mode from
// BATON_INTERCEPT_MODE (set per pod by the injector). An empty variable
// counts as unset. A malformed duration or boolean is kept, with its text,
// for Validate to report.
func (c *Config) ApplyEnv(env func(string) string) {
	str := func(dst *string, name, path string) {
		if v := env(name); v != "" {
			*dst = v
			c.noteEnv(path, name)
		}
	}
	str(&c.Agent, "BATON_AGENT", "agent")
	str(&c.Upstream, "BATON_UPSTREAM", "upstream")
	str(&c.LogLevel, "BATON_LOG_LEVEL", "log_level")
	if v := env("BATON_SHUTDOWN_GRACE"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			c.ShutdownGrace = Duration(d)
			c.noteEnv("shutdown_grace", "BATON_SHUTDOWN_GRACE")
		} else {
			c.envErrs = append(c.envErrs, &FieldError{
				Path: "shutdown_grace", Value: v,
				Expect: expectDuration + " (from BATON_SHUTDOWN_GRACE)",
			})
		}
	}
	if r := c.Store.Redis; r != nil {
		str(&r.Password, "BATON_REDIS_PASSWORD", "store.redis.password")
	}
	str(&c.AdminToken, "BATON_ADMIN_TOKEN", "admin_token")
	if v := env("BATON_PROFILING"); v != "" {
		if v == "true" || v == "false" {
			c.Profiling = v == "true"
			c.noteEnv("profiling", "BATON_PROFILING")
		} else {
			c.envErrs = append(c.envErrs, &FieldError{
				Path: "profiling", Value: v, Expect: "must be true or false (from BATON_PROFILING)",
			})
		}
	}
	str(&c.Intercept.Mode, "BATON_INTERCEPT_MODE", "intercept.mode")
}

func (c *Config) noteEnv(path, name string) {
	if c.fromEnv == nil {
		c.fromEnv = map[string]string{}
	}
	c.fromEnv[path] = name
}

// ApplyDefaults fills in every field the file left out; a zero value counts as
// left out. Edges are the exception: Decode defaults their max_hops (see Edge).
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
	def(&c.LogLevel, DefaultLogLevel)
	defD(&c.ShutdownGrace, DefaultShutdownGrace)
	defD(&c.Trust.Skew, DefaultSkew)
	defD(&c.Timeouts.ReadHeader, DefaultReadHeader)
	defD(&c.Timeouts.Idle, DefaultIdle)
	defD(&c.Timeouts.Dial, DefaultDial)
	defD(&c.Timeouts.UpstreamHeader, DefaultUpstreamHeader)
	if c.Records.Retention == 0 {
		c.Records.Retention = Duration(DefaultRetention)
	}
	if c.Records.MaxBodyBytes == 0 {
		c.Records.MaxBodyBytes = DefaultRecordBodyBytes
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Store.Memory.MaxEntries == 0 {
		c.Store.Memory.MaxEntries = DefaultMemoryEntries
	}
	if c.Store.Memory.MaxBytes == 0 {
		c.Store.Memory.MaxBytes = DefaultMemoryBytes
	}
	defD(&c.Store.HolderTimeout, DefaultHolderTimeout)
	c.Taint.applyDefaults(c.Store)
	c.Journal.applyDefaults(c.Records)
	c.Approvals.applyDefaults()
	if r := c.Store.Redis; r != nil {
		defD(&r.DialTimeout, DefaultRedisDial)
		defD(&r.OpTimeout, DefaultRedisOp)
	}
	c.defaultGroups()
	c.defaultContext()
	c.defaultCompensation()
	c.defaultTLS()
	c.Intercept.TLS.applyDefaults()
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

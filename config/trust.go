package config

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"
)

// Identity is this Baton's signing key: an Ed25519 key written by `baton
// keygen`. KeyFile names the key file (its key id is inside); KeyEnv names an
// environment variable holding the key (PEM or base64), with KeyID.
type Identity struct {
	KeyFile string `yaml:"key_file"`
	KeyEnv  string `yaml:"key_env"`
	KeyID   string `yaml:"key_id"`
}

// Set reports whether an identity key is configured.
func (i Identity) Set() bool { return i.KeyFile != "" || i.KeyEnv != "" }

// Trust is the trust bundle and the settings that go with it.
type Trust struct {
	// Peers maps an agent to its Batons' public keys, each "KEYID
	// PUBLICKEY" as `baton keygen` prints it; several keys per agent let
	// keys rotate without downtime.
	Peers map[string][]string `yaml:"peers"`
	// Skew is how far a signature's created time may be from this Baton's
	// clock; nonces are remembered for as long.
	Skew Duration `yaml:"skew"`
	// Uncorrelated is what to do with an outbound handoff Baton cannot tie
	// to an inbound one (no traceparent it has seen): allow (the default:
	// recorded and counted as uncorrelated) or deny (403).
	Uncorrelated string `yaml:"uncorrelated"`
}

// Grant is the bounded grant an outbound edge gives its receiver.
type Grant struct {
	MayHandoffTo []string `yaml:"may_handoff_to"`
	SideEffects  []string `yaml:"side_effects"`
}

// DefaultSkew is the signature clock skew allowed when none is set.
const DefaultSkew = 30 * time.Second

// RequiresSignature tells whether the edge to or from peer requires a
// signature: as configured, else whenever a trust bundle is configured. An
// edge of callers that run no Baton never does: they sign nothing.
func (c *Config) RequiresSignature(e Edge) bool {
	if e.Callers != nil {
		return false
	}
	if e.RequireSignature != nil {
		return *e.RequireSignature
	}
	return len(c.Trust.Peers) > 0
}

// AdminLoopback reports whether the admin listener binds to loopback only.
func (c *Config) AdminLoopback() bool {
	host, _, err := net.SplitHostPort(c.Listen.Admin)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *Config) validateTrust(bad badFunc) {
	id := c.Identity
	switch {
	case id.KeyFile != "" && id.KeyEnv != "":
		bad("identity", nil, "must set key_file or key_env, not both")
	case id.KeyEnv != "" && id.KeyID == "":
		bad("identity.key_id", nil, "must be set with key_env (the key file of key_file carries its own id)")
	}
	names := make([]string, 0, len(c.Trust.Peers))
	for name := range c.Trust.Peers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !agentName.MatchString(name) {
			bad("trust.peers."+name, name, expectName)
		}
		keys := c.Trust.Peers[name]
		if len(keys) == 0 {
			bad("trust.peers."+name, nil, "must list at least one key")
		}
		for i, k := range keys {
			if len(strings.Fields(k)) != 2 {
				bad(fmt.Sprintf("trust.peers.%s[%d]", name, i), k, `must be "KEYID PUBLICKEY" as baton keygen prints it`)
			}
		}
	}
	if c.Trust.Skew < 0 {
		bad("trust.skew", c.Trust.Skew.D().String(), "must be a duration > 0")
	}
	switch c.Trust.Uncorrelated {
	case "", "allow", "deny":
	default:
		bad("trust.uncorrelated", c.Trust.Uncorrelated, "must be allow or deny")
	}
	if !c.AdminLoopback() && c.AdminToken == "" {
		bad("admin_token", nil, "must be set (here or by BATON_ADMIN_TOKEN) when listen.admin binds beyond loopback ("+c.Listen.Admin+")")
	}
	for i, e := range c.Edges {
		path := fmt.Sprintf("edges[%d]", i)
		switch e.Posture {
		case "", "trusted", "evaluate", "untrusted":
		default:
			bad(path+".posture", e.Posture, "must be trusted, evaluate or untrusted")
		}
		if e.Grant != nil {
			if e.To == "" {
				bad(path+".grant", nil, "applies to outbound edges (to) only: it is what the receiver may do")
			}
			for j, p := range e.Grant.MayHandoffTo {
				if !agentName.MatchString(p) {
					bad(fmt.Sprintf("%s.grant.may_handoff_to[%d]", path, j), p, expectName)
				}
			}
			for j, s := range e.Grant.SideEffects {
				if s == "" {
					bad(fmt.Sprintf("%s.grant.side_effects[%d]", path, j), s, "must be a side-effect name like read or write")
				}
			}
		}
	}
}

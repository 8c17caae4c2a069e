package config

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Group is a broadcast group: a handoff sent to the group's name (Host:
// <group>) goes to every member, each with its own key, record, retries,
// breaker and dead letter, and the agent gets one answer (docs/broadcast.md).
type Group struct {
	// Members are the peers the handoff goes to.
	Members []string `yaml:"members"`
	// Mode is when the broadcast has succeeded: all (every member answered
	// 2xx), any (one did), or quorum (Quorum did).
	Mode   string `yaml:"mode"`
	Quorum int    `yaml:"quorum"`
	// Concurrency bounds the members in flight at once; 0 sends to all at
	// once.
	Concurrency int `yaml:"concurrency"`
	// Deadline bounds the broadcast: a member still unanswered then is
	// dead-lettered and named as missed.
	Deadline Duration `yaml:"deadline"`
}

// The broadcast modes.
const (
	BroadcastAll    = "all"
	BroadcastAny    = "any"
	BroadcastQuorum = "quorum"
)

// DefaultBroadcastDeadline bounds a broadcast whose group sets no deadline,
// and every ad-hoc one (Baton-Broadcast).
const DefaultBroadcastDeadline = 30 * time.Second

// MaxGroupMembers bounds a group, and an ad-hoc Baton-Broadcast list.
const MaxGroupMembers = 64

func (c *Config) defaultGroups() {
	for name, g := range c.Groups {
		if g.Mode == "" {
			g.Mode = BroadcastAll
		}
		if g.Deadline == 0 {
			g.Deadline = Duration(DefaultBroadcastDeadline)
		}
		c.Groups[name] = g
	}
}

func (c *Config) validateGroups(bad badFunc) {
	for _, name := range slices.Sorted(maps.Keys(c.Groups)) {
		g, p := c.Groups[name], "groups."+name
		if !agentName.MatchString(name) {
			bad(p, name, "a group's name "+expectName)
		}
		if _, ok := c.Peers[name]; ok {
			bad(p, name, "must not be a peer's name too: a handoff to it would be ambiguous")
		}
		if name == c.Agent {
			bad(p, name, "must not be the agent's own name")
		}
		if len(g.Members) == 0 || len(g.Members) > MaxGroupMembers {
			bad(p+".members", len(g.Members), fmt.Sprintf("must list 1 to %d peers", MaxGroupMembers))
		}
		for i, m := range g.Members {
			if _, ok := c.Peers[m]; !ok {
				bad(fmt.Sprintf("%s.members[%d]", p, i), m, "must name a peer (peers.<name>)")
			}
			if slices.Index(g.Members, m) != i {
				bad(fmt.Sprintf("%s.members[%d]", p, i), m, "is listed twice")
			}
		}
		switch g.Mode {
		case BroadcastAll, BroadcastAny:
			if g.Quorum != 0 {
				bad(p+".quorum", g.Quorum, "is only for mode quorum")
			}
		case BroadcastQuorum:
			if g.Quorum < 1 || g.Quorum > len(g.Members) {
				bad(p+".quorum", g.Quorum, fmt.Sprintf("must be between 1 and the %d members", len(g.Members)))
			}
		default:
			bad(p+".mode", g.Mode, "must be one of all, any, quorum")
		}
		if g.Concurrency < 0 {
			bad(p+".concurrency", g.Concurrency, "must be >= 0 (0: every member at once)")
		}
		if g.Deadline < 0 {
			bad(p+".deadline", g.Deadline.D().String(), "must be a duration > 0")
		}
	}
}

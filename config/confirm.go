package config

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
)

// Confirm gates an outbound edge's handoffs on a person's approval
// (docs/gates.md): a handoff that a rule of When matches (or every handoff
// on the edge, when When is empty) is held as a checkpoint until an approver
// approves or denies it, or it expires.
type Confirm struct {
	// When lists the rules; a handoff is held when any one of them matches,
	// and a rule matches when every condition it sets holds.
	When []ConfirmRule `yaml:"when"`
	// Wait is how long the agent's call waits for a decision before it is
	// answered 202 Accepted; 0 (the default) answers at once.
	Wait Duration `yaml:"wait"`
	// Expires overrides approvals.expires for this edge.
	Expires Duration `yaml:"expires"`
}

// ConfirmRule is one condition set of a gate. Globs are path.Match
// patterns.
type ConfirmRule struct {
	// Name names the rule in the approval, the notification and the
	// console; default "rule N" (from 1), or "always" for an empty When.
	Name string `yaml:"name"`
	// Methods are HTTP methods (any of them).
	Methods []string `yaml:"methods"`
	// Target is a glob on the request path ("/refunds/*").
	Target string `yaml:"target"`
	// Call is a glob on the JSON-RPC method of an A2A or MCP request
	// ("SendMessage", "message/send", "tools/call").
	Call string `yaml:"call"`
	// Tool is a glob on an MCP tools/call's tool name.
	Tool string `yaml:"tool"`
	// Skill is a glob on the A2A skill the message asks for: its metadata's
	// "skill" (or "skillId") member.
	Skill string `yaml:"skill"`
	// SideEffect is a glob on "system.action" of the envelope's declared
	// side_effects (any of them).
	SideEffect string `yaml:"side_effect"`
	// Untrusted holds when the handoff carries untrusted content.
	Untrusted bool `yaml:"untrusted"`
	// Injection holds when an untrusted span of the handoff scores at or
	// above taint.injection_score on the injection scan.
	Injection bool `yaml:"injection"`
	// MinHop holds when the handoff's hop is at least MinHop.
	MinHop int `yaml:"min_hop"`
	// Field is a JSON pointer (RFC 6901) into the handoff envelope, or
	// into the JSON body when the handoff carries no envelope. Alone it
	// holds when the value is present; with Over when it is a number
	// greater than Over; with Equals when its value, as text, equals it.
	Field  string   `yaml:"field"`
	Over   *float64 `yaml:"over"`
	Equals *string  `yaml:"equals"`
}

// Approvals configures confirmation gates for the whole Baton.
type Approvals struct {
	// Expires is how long a held handoff waits for a decision (default
	// 24h); then it expires, and the agent is answered so.
	Expires Duration `yaml:"expires"`
	// Notify is a URL POSTed a JSON notice for each approval that starts
	// pending (docs/gates.md).
	Notify string `yaml:"notify"`
	// Approvers are the people (or systems acting for them) who may decide,
	// beside the holder of admin_token: each by a bearer token read from
	// an environment variable, or by requests signed with a key.
	Approvers []Approver `yaml:"approvers"`
}

// Approver is an identity that may approve or deny held handoffs.
type Approver struct {
	Name string `yaml:"name"`
	// TokenEnv names the environment variable holding the approver's bearer
	// token (at least 16 characters).
	TokenEnv string `yaml:"token_env"`
	// Keys are public keys ("KEYID PUBLICKEY" as `baton keygen` prints
	// them) whose RFC 9421 signed requests act as this approver.
	Keys []string `yaml:"keys"`
}

// DefaultApprovalExpiry is how long an approval stays pending by default.
const DefaultApprovalExpiry = 24 * time.Hour

// MinApproverToken is the shortest approver token accepted.
const MinApproverToken = 16

func (a *Approvals) applyDefaults() {
	if a.Expires == 0 {
		a.Expires = Duration(DefaultApprovalExpiry)
	}
}

// ConfirmFor returns the gate of the outbound edge to peer, or nil.
func (c *Config) ConfirmFor(peer string) *Confirm {
	if e, ok := c.OutEdge(peer); ok {
		return e.Confirm
	}
	return nil
}

// ApprovalExpiry is how long a handoff held on the edge to peer waits.
func (c *Config) ApprovalExpiry(peer string) time.Duration {
	if g := c.ConfirmFor(peer); g != nil && g.Expires > 0 {
		return g.Expires.D()
	}
	return c.Approvals.Expires.D()
}

// GatesOn reports whether any edge is gated.
func (c *Config) GatesOn() bool {
	for _, e := range c.Edges {
		if e.Confirm != nil {
			return true
		}
	}
	return false
}

func (c *Config) validateConfirm(bad badFunc) {
	a := &c.Approvals
	if a.Expires < 0 || (a.Expires > 0 && a.Expires.D() < time.Second) {
		bad("approvals.expires", a.Expires.D().String(), "must be a duration of at least 1s")
	}
	if a.Expires > 0 && c.Records.Retention > 0 && a.Expires > c.Records.Retention {
		bad("approvals.expires", a.Expires.D().String(), "must not be longer than records.retention ("+c.Records.Retention.D().String()+"): a held handoff is a record")
	}
	if a.Notify != "" {
		if u, err := url.Parse(a.Notify); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("approvals.notify", a.Notify, "must be an http:// or https:// URL")
		}
	}
	seen := map[string]bool{}
	for i, ap := range a.Approvers {
		p := fmt.Sprintf("approvals.approvers[%d]", i)
		switch {
		case !agentName.MatchString(ap.Name):
			bad(p+".name", ap.Name, "must be a name like alice or ops-oncall")
		case ap.Name == c.Agent || ap.Name == "admin":
			bad(p+".name", ap.Name, "must not be the agent's own name nor admin: an approver is a person, never the agent")
		case seen[ap.Name]:
			bad(p+".name", ap.Name, "names another approver too")
		}
		seen[ap.Name] = true
		if ap.TokenEnv == "" && len(ap.Keys) == 0 {
			bad(p, nil, "must set token_env or keys")
		}
		for k, line := range ap.Keys {
			if strings.Count(strings.TrimSpace(line), " ") != 1 {
				bad(fmt.Sprintf("%s.keys[%d]", p, k), line, "must be \"KEYID PUBLICKEY\" as baton keygen prints it")
			}
		}
		if _, ok := c.Trust.Peers[ap.Name]; ok {
			bad(p+".name", ap.Name, "names an agent in trust.peers: an approver is a person, never an agent")
		}
	}
	if c.GatesOn() && c.AdminToken == "" && len(a.Approvers) == 0 {
		bad("approvals.approvers", nil, "must name an approver, or admin_token be set: a confirmation gate needs someone to decide")
	}
	for i, e := range c.Edges {
		g := e.Confirm
		if g == nil {
			continue
		}
		p := fmt.Sprintf("edges[%d].confirm", i)
		if e.From != "" {
			bad(p, nil, "applies to outbound edges (to) only: the sending agent's Baton holds the handoff")
			continue
		}
		if !c.RecordsOn() {
			bad(p, nil, "needs records: a held handoff is kept as a checkpoint (records.enabled)")
		}
		if g.Wait < 0 || g.Wait.D() > 10*time.Minute {
			bad(p+".wait", g.Wait.D().String(), "must be between 0 and 10m")
		}
		if g.Expires < 0 || (g.Expires > 0 && g.Expires.D() < time.Second) {
			bad(p+".expires", g.Expires.D().String(), "must be a duration of at least 1s")
		} else if g.Expires > 0 && c.Records.Retention > 0 && g.Expires > c.Records.Retention {
			bad(p+".expires", g.Expires.D().String(), "must not be longer than records.retention ("+c.Records.Retention.D().String()+"): a held handoff is a record")
		}
		for k, r := range g.When {
			validateRule(bad, fmt.Sprintf("%s.when[%d]", p, k), r)
		}
	}
}

func validateRule(bad badFunc, p string, r ConfirmRule) {
	for _, g := range []struct{ field, glob string }{{"target", r.Target}, {"call", r.Call}, {"tool", r.Tool},
		{"skill", r.Skill}, {"side_effect", r.SideEffect}} {
		if _, err := path.Match(g.glob, ""); err != nil {
			bad(p+"."+g.field, g.glob, "must be a name or a glob")
		}
	}
	for k, m := range r.Methods {
		if m == "" || strings.ToUpper(m) != m {
			bad(fmt.Sprintf("%s.methods[%d]", p, k), m, "must be an HTTP method in capitals")
		}
	}
	if r.Field != "" && !strings.HasPrefix(r.Field, "/") {
		bad(p+".field", r.Field, "must be a JSON pointer like /side_effects/0/amount")
	}
	if (r.Over != nil || r.Equals != nil) && r.Field == "" {
		bad(p, nil, "over and equals need field")
	}
	if r.Over != nil && r.Equals != nil {
		bad(p, nil, "set over or equals, not both")
	}
	if r.MinHop < 0 {
		bad(p+".min_hop", r.MinHop, "must be >= 0")
	}
	if len(r.Methods) == 0 && r.Target == "" && r.Call == "" && r.Tool == "" && r.Skill == "" && r.SideEffect == "" &&
		!r.Untrusted && !r.Injection && r.MinHop == 0 && r.Field == "" {
		bad(p, nil, "sets no condition: leave when empty to hold every handoff")
	}
}

package approval

import (
	"encoding/json"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/trust/taint"
)

// gate is an outbound edge's confirmation gate (docs/gates.md): which
// handoffs it holds for a person's decision, and how.
type gate struct {
	rules   []config.ConfirmRule // empty: every handoff
	names   []string             // each rule's name
	wait    time.Duration        // how long the agent's call waits for a decision
	expires time.Duration        // how long a held handoff waits
	score   float64              // the injection score an injection rule holds at
}

// newGate returns the gate of the edge to peer, or nil when it has none.
func newGate(c *config.Config, peer string) *gate {
	cf := c.ConfirmFor(peer)
	if cf == nil {
		return nil
	}
	g := &gate{rules: cf.When, wait: cf.Wait.D(), expires: c.ApprovalExpiry(peer), score: taint.DefaultInjectionScore}
	if c.Taint.InjectionScore > 0 {
		g.score = c.Taint.InjectionScore
	}
	for i, r := range cf.When {
		name := r.Name
		if name == "" {
			name = "rule " + strconv.Itoa(i+1)
		}
		g.names = append(g.names, name)
	}
	return g
}

// match returns the name of the first rule that holds req, or false.
func (g *gate) match(req *http.Request, in *middleware.Info) (string, bool) {
	if g == nil {
		return "", false
	}
	if len(g.rules) == 0 {
		return "always", true
	}
	doc := &gateDoc{in: in, score: g.score}
	for i := range g.rules {
		if ruleHolds(&g.rules[i], req, in, doc) {
			return g.names[i], true
		}
	}
	return "", false
}

// ruleHolds reports whether every condition r sets holds for req.
func ruleHolds(r *config.ConfirmRule, req *http.Request, in *middleware.Info, doc *gateDoc) bool {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, req.Method) {
		return false
	}
	if r.Target != "" && !globMatch(r.Target, req.URL.Path) {
		return false
	}
	if r.MinHop > 0 && in.Hop < r.MinHop {
		return false
	}
	if r.Untrusted && (in.Labels == nil || in.Labels.Empty()) {
		return false
	}
	if r.Injection && !doc.injected() {
		return false
	}
	if r.Call != "" && !slices.ContainsFunc(rpcMethods(in), func(m string) bool { return globMatch(r.Call, m) }) {
		return false
	}
	if r.Tool != "" && !slices.ContainsFunc(rpcTools(in), func(t string) bool { return globMatch(r.Tool, t) }) {
		return false
	}
	if r.Skill != "" && !globMatch(r.Skill, doc.skill()) {
		return false
	}
	if r.SideEffect != "" && !slices.ContainsFunc(doc.sideEffects(), func(s string) bool { return globMatch(r.SideEffect, s) }) {
		return false
	}
	if r.Field != "" {
		if v, found := doc.at(r.Field); !fieldHolds(r, v, found) {
			return false
		}
	}
	return true
}

func globMatch(glob, s string) bool {
	ok, _ := path.Match(glob, s)
	return ok
}

// rpcMethods are the JSON-RPC methods of an A2A or MCP request.
func rpcMethods(in *middleware.Info) []string {
	switch {
	case in.RPC == nil:
		return nil
	case in.RPC.MCP != nil:
		out := make([]string, 0, len(in.RPC.MCP.Calls))
		for _, c := range in.RPC.MCP.Calls {
			out = append(out, c.Method)
		}
		return out
	}
	return []string{in.RPC.Method}
}

// rpcTools are the tools an MCP request calls.
func rpcTools(in *middleware.Info) []string {
	if in.RPC == nil || in.RPC.MCP == nil {
		return nil
	}
	var out []string
	for _, c := range in.RPC.MCP.Calls {
		if c.Tool != "" {
			out = append(out, c.Tool)
		}
	}
	return out
}

// fieldHolds applies a rule's test to the value at its field (found
// reports whether the pointer names a value).
func fieldHolds(r *config.ConfirmRule, v any, found bool) bool {
	switch {
	case !found:
		return false
	case r.Over != nil:
		n, ok := v.(float64)
		if s, isText := v.(string); isText {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			n, ok = f, err == nil
		}
		return ok && n > *r.Over
	case r.Equals != nil:
		return valueText(v) == *r.Equals
	}
	return true
}

// valueText renders a JSON value as text: strings as they are, anything
// else as its JSON.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// gateDoc decodes what the rules read of a handoff, each at most once and
// only when a rule reads it: its envelope, and its JSON body (the envelope,
// when the body is one).
type gateDoc struct {
	in                *middleware.Info
	bodyRead, envRead bool
	body, env         any
	score             float64 // the injection threshold
	injRead, inj      bool
}

// jsonBody is the request body decoded, nil when it is not JSON.
func (d *gateDoc) jsonBody() any {
	if !d.bodyRead {
		d.bodyRead = true
		if d.in.Buffered && len(d.in.Body) > 0 {
			_ = json.Unmarshal(d.in.Body, &d.body)
		}
	}
	return d.body
}

// envelope is the handoff envelope decoded, or the JSON body without one.
func (d *gateDoc) envelope() any {
	if !d.envRead {
		d.envRead = true
		c := d.in.Contract
		switch {
		case c == nil || len(c.Envelope) == 0:
			d.env = d.jsonBody()
		case len(c.Envelope) == len(d.in.Body):
			d.env = d.jsonBody() // the envelope is the whole body
		default:
			_ = json.Unmarshal(c.Envelope, &d.env)
		}
	}
	return d.env
}

// at returns the value at an RFC 6901 pointer into the envelope.
func (d *gateDoc) at(ptr string) (any, bool) {
	return lookupPointer(d.envelope(), ptr)
}

// sideEffects are "system.action" of each side effect the envelope
// declares.
func (d *gateDoc) sideEffects() []string {
	list, _ := d.at("/side_effects")
	items, _ := list.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		m, _ := it.(map[string]any)
		sys, _ := m["system"].(string)
		act, _ := m["action"].(string)
		out = append(out, sys+"."+act)
	}
	return out
}

// skill is the A2A skill the message asks for: "skill" or "skillId" in the
// message's metadata, or in the request's.
func (d *gateDoc) skill() string {
	body := d.jsonBody()
	for _, p := range []string{"/params/message/metadata/skill", "/params/message/metadata/skillId",
		"/params/metadata/skill", "/params/metadata/skillId"} {
		if v, ok := lookupPointer(body, p); ok {
			if s, ok := v.(string); ok {
				return s
			}
		}
	}
	return ""
}

// lookupPointer resolves an RFC 6901 pointer in a decoded JSON document.
func lookupPointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, doc != nil
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

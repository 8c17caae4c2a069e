package config

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/template"
	"time"
)

// SideEffect declares a side effect the receiver of an outbound edge's
// handoffs may perform, and the handoff that undoes it
// (docs/compensation.md). The receiver says which ones it performed in its
// answer; when the trace is abandoned, Baton sends the compensations of
// those, in reverse order of completion.
type SideEffect struct {
	// Name is how the receiver reports the effect (Baton-Side-Effects: name).
	Name       string     `yaml:"name"`
	Compensate Compensate `yaml:"compensate"`
}

// Compensate is the handoff that undoes a side effect: to the same peer
// (or To), with Method and Path, and Body made from a Go template over the
// original handoff (.Request: its JSON body, .Response: the answer's JSON
// body, .Key, .TraceID, .Effect); json renders a value as JSON.
type Compensate struct {
	To          string `yaml:"to"`
	Method      string `yaml:"method"`
	Path        string `yaml:"path"`
	Body        string `yaml:"body"`
	ContentType string `yaml:"content_type"`
}

// Compensation configures abandoning traces.
type Compensation struct {
	// AbandonAfter abandons the trace of a dead letter of this agent left
	// unreplayed this long; 0 never does.
	AbandonAfter Duration `yaml:"abandon_after"`
	// AbandonDropped abandons the trace of a dead letter dropped here.
	AbandonDropped bool `yaml:"abandon_dropped"`
}

// TemplateFuncs are the functions a compensation's body template may call.
var TemplateFuncs = template.FuncMap{"json": func(v any) (string, error) { return jsonText(v) }}

// SideEffectsTo returns the side effects declared on the outbound edge to
// peer.
func (c *Config) SideEffectsTo(peer string) []SideEffect {
	if e, ok := c.OutEdge(peer); ok {
		return e.SideEffects
	}
	return nil
}

// Default fills what a compensation leaves out: the edge's peer, POST,
// and a JSON body.
func (cp *Compensate) Default(peer string) {
	if cp.Method == "" {
		cp.Method = http.MethodPost
	}
	if cp.To == "" {
		cp.To = peer
	}
	if cp.ContentType == "" && cp.Body != "" {
		cp.ContentType = "application/json"
	}
}

func (c *Config) defaultCompensation() {
	for _, e := range c.Edges {
		for i := range e.SideEffects {
			e.SideEffects[i].Compensate.Default(e.To)
		}
	}
}

func (c *Config) validateCompensation(bad badFunc) {
	if c.Compensation.AbandonAfter < 0 || (c.Compensation.AbandonAfter > 0 && c.Compensation.AbandonAfter.D() < time.Second) {
		bad("compensation.abandon_after", c.Compensation.AbandonAfter.D().String(), "must be 0 (never) or a duration of at least 1s")
	}
	if (c.Compensation.AbandonAfter > 0 || c.Compensation.AbandonDropped) && !c.RecordsOn() {
		bad("compensation", nil, "needs records: an abandoned trace is compensated from its records (records.enabled)")
	}
	for i, e := range c.Edges {
		for j, se := range e.SideEffects {
			p := fmt.Sprintf("edges[%d].side_effects[%d]", i, j)
			if e.From != "" {
				bad(p, se.Name, "applies to outbound edges (to) only: the sending Baton compensates")
				continue
			}
			if !agentName.MatchString(se.Name) {
				bad(p+".name", se.Name, "a side effect's name "+expectName)
			}
			for k := range j {
				if e.SideEffects[k].Name == se.Name {
					bad(p+".name", se.Name, "is declared twice on this edge")
				}
			}
			cp := se.Compensate
			if _, ok := c.Peers[cp.To]; !ok {
				bad(p+".compensate.to", cp.To, "must name a peer (peers.<name>)")
			}
			if !strings.HasPrefix(cp.Path, "/") {
				bad(p+".compensate.path", cp.Path, "must be a path starting with /")
			}
			if !validMethod(cp.Method) {
				bad(p+".compensate.method", cp.Method, "must be an HTTP method such as POST or DELETE")
			}
			if _, err := template.New("body").Funcs(TemplateFuncs).Option("missingkey=error").Parse(cp.Body); err != nil {
				bad(p+".compensate.body", cp.Body, "must be a Go template: "+err.Error())
			}
		}
		if len(e.SideEffects) > 0 && !c.RecordsOn() {
			bad(fmt.Sprintf("edges[%d].side_effects", i), nil, "needs records: completed side effects are kept in the records (records.enabled)")
		}
	}
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

package middleware

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// Side effects and their compensation (docs/compensation.md). An agent
// says which declared side effects it performed in its answer's
// Baton-Side-Effects header (names, comma separated); both Batons record
// them. A compensating handoff carries Baton-Compensates, naming the record
// and the effect it undoes.
const (
	HeaderSideEffects = "Baton-Side-Effects"
	HeaderCompensates = "Baton-Compensates"
)

// MaxSideEffects bounds the effects one answer may report.
const MaxSideEffects = 16

var effectName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// SideEffectsOf returns the side effects an answer's headers report: valid
// names, each once, at most MaxSideEffects; the rest is ignored.
func SideEffectsOf(h http.Header) []string {
	var out []string
	for _, line := range h.Values(HeaderSideEffects) {
		for _, name := range strings.Split(line, ",") {
			name = strings.Trim(strings.TrimSpace(name), `"`)
			if len(out) < MaxSideEffects && effectName.MatchString(name) && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// Compensation marks a handoff Baton makes itself to undo a side effect
// (docs/compensation.md): Of names the record and effect it undoes, and the
// sending edge fills RecordID with the handoff's own record.
type Compensation struct {
	Of       string
	RecordID string
}

type compensationKey struct{}

// WithCompensation marks the handoffs made with ctx as the compensation c.
// Only Baton's own code holds such a context: an agent's request cannot.
func WithCompensation(ctx context.Context, c *Compensation) context.Context {
	return context.WithValue(ctx, compensationKey{}, c)
}

func compensationOf(ctx context.Context) *Compensation {
	c, _ := ctx.Value(compensationKey{}).(*Compensation)
	return c
}

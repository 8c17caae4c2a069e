package middleware

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/handoff/tokens"
	"github.com/batonproxy/baton/problem"
)

// A token budget and a field policy on an outbound edge
// (docs/context.md). The field policy drops members of the envelope and of
// an A2A message first. Then the handoff's text (its A2A message, its
// envelope, or the whole body) is counted with the receiving model's
// tokenizer; over the edge's max_tokens it is refused (over: enforce), or
// trimmed (over: trim) by the envelope's priorities: rejected paths'
// reasons, completed items' evidence, then inline artifacts by reference,
// largest first; what is still over is refused. Whatever was left out is
// named to the receiving agent in the envelope's omitted member and the
// Baton-Omitted header, and in the record.
//
// It sits after ContextRefs.Egress (artifacts already passed by reference
// are not counted) and before Contract, which checks and stamps the handoff
// as it leaves. Baton's provenance stamp, and the omitted note, are not
// counted.

// HeaderOmitted names, to the receiving agent, the body pointers the
// sending Baton dropped or trimmed (an RFC 8941 list of strings).
const HeaderOmitted = "Baton-Omitted"

// BudgetPolicy is an outbound edge's token budget and field policy.
type BudgetPolicy struct {
	MaxTokens int // 0: no budget, only the field policy
	Trim      bool
	Counter   *tokens.Counter
	Envelope  handoff.FieldPolicy
	Message   handoff.FieldPolicy
}

// BudgetOptions configure Budget.
type BudgetOptions struct {
	// Policy returns the edge's policy, or nil.
	Policy func(in *Info) *BudgetPolicy
	// Refs passes artifacts by reference when trimming.
	Refs *ContextRefs
	// Observe counts handoffs by outcome: within, trimmed, refused.
	Observe func(ctx context.Context, in *Info, outcome string)
}

// Budget returns the token budget middleware.
func Budget(o BudgetOptions) func(http.Handler) http.Handler {
	if o.Observe == nil {
		o.Observe = func(context.Context, *Info, string) {}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			r.Header.Del(HeaderOmitted) // only this Baton says what it left out
			if !in.Handoff() {
				next.ServeHTTP(w, r)
				return
			}
			pol := o.Policy(in)
			if pol == nil {
				next.ServeHTTP(w, r)
				return
			}
			if !Buffer(w, r, in) {
				return
			}
			if s, ok := shape(w, r, in, pol, o); ok {
				in.Shaping = s
				next.ServeHTTP(w, r)
			}
		})
	}
}

// shape applies pol to the request, answering it (and returning false)
// when it cannot be brought within the budget.
func shape(w http.ResponseWriter, r *http.Request, in *Info, pol *BudgetPolicy, o BudgetOptions) (*record.Shaping, bool) {
	ct, count := r.Header.Get("Content-Type"), pol.Counter.Count
	body, dropped := handoff.ApplyFields(ct, in.Body, pol.Envelope, pol.Message)
	before := handoff.CountText(ct, in.Body, count)
	n := before
	if len(dropped) > 0 {
		n = handoff.CountText(ct, body, count)
	}
	s := &record.Shaping{Tokens: n, Before: before, MaxTokens: pol.MaxTokens, Tokenizer: pol.Counter.Name, Dropped: dropped}
	if pol.MaxTokens > 0 && n > pol.MaxTokens {
		if !pol.Trim {
			o.Observe(r.Context(), in, "refused")
			overBudget(w, r, in, pol, ct, body, n, nil)
			return nil, false
		}
		tr := handoff.TrimDetail(ct, body, pol.MaxTokens, n, count)
		body, n, s.Trimmed = tr.Body, tr.Tokens, tr.Pointers
		if n > pol.MaxTokens {
			var ok bool
			if body, n, ok = byReference(w, r, in, o.Refs, ct, body, pol.MaxTokens, n, count, s); !ok {
				return nil, false
			}
		}
		if n > pol.MaxTokens {
			o.Observe(r.Context(), in, "refused")
			overBudget(w, r, in, pol, ct, body, n, s.Trimmed)
			return nil, false
		}
		o.Observe(r.Context(), in, "trimmed")
	} else if pol.MaxTokens > 0 {
		o.Observe(r.Context(), in, "within")
	}
	s.Tokens = n
	if omitted := append(slices.Clip(dropped), s.Trimmed...); len(omitted) > 0 {
		body = handoff.Note(ct, body, omitted)
		r.Header.Set(HeaderOmitted, sfStrings(omitted))
	}
	if len(body) != len(in.Body) || s.Trimmed != nil || dropped != nil {
		replaceBody(r, in, body)
	}
	return s, true
}

// byReference passes the envelope's inline artifacts by reference, largest
// first, until the text is within max.
func byReference(w http.ResponseWriter, r *http.Request, in *Info, refs *ContextRefs, ct string, body []byte, max, n int, count handoff.Count, s *record.Shaping) ([]byte, int, bool) {
	for n > max {
		arts, err := handoff.ReadArtifacts(ct, body)
		if err != nil || refs == nil {
			return body, n, true
		}
		var big *handoff.ArtifactAt
		for i := range arts.Items {
			it := &arts.Items[i]
			if it.Content != nil && it.Ref == "" && (big == nil || len(it.Content) > len(big.Content)) {
				big = it
			}
		}
		if big == nil {
			return body, n, true
		}
		data, text, err := big.Data()
		if err != nil {
			return body, n, true
		}
		d := handoff.Digest(data)
		if !refs.put(w, r, in, d, metaOf(in, arts, big, text), data) {
			return nil, 0, false
		}
		arts.ByReference(big, d, int64(len(data)), in.TraceID)
		body = arts.Bytes()
		n = handoff.CountText(ct, body, count)
		prefix := ""
		if arts.Where == handoff.A2A {
			prefix = handoff.A2APointer
		}
		s.Trimmed = append(s.Trimmed, prefix+"/artifacts/"+strconv.Itoa(big.Index)+"/content")
	}
	return body, n, true
}

func overBudget(w http.ResponseWriter, r *http.Request, in *Info, pol *BudgetPolicy, ct string, body []byte, n int, trimmed []string) {
	fields := handoff.FieldSizes(ct, body, pol.Counter.Count, 5)
	slices.SortStableFunc(fields, func(a, b handoff.FieldSize) int { return cmp.Compare(b.Tokens, a.Tokens) })
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = fmt.Sprintf("%s (%d)", f.Pointer, f.Tokens)
	}
	detail := fmt.Sprintf("the handoff's text is %d tokens (%s), over this edge's budget of %d", n, pol.Counter.Name, pol.MaxTokens)
	if pol.Trim {
		detail += " after trimming what the envelope allows (the task and constraints are never trimmed)"
	}
	if len(names) > 0 {
		detail += "; largest: " + strings.Join(names, ", ")
	}
	p := problem.New(r, problem.OverBudget, detail).
		With("tokens", n).With("max_tokens", pol.MaxTokens).With("tokenizer", pol.Counter.Name).
		With("estimate", pol.Counter.Estimated())
	if len(fields) > 0 {
		p = p.With("fields", fields)
	}
	if trimmed != nil {
		p = p.With("trimmed", trimmed)
	}
	sniffRPC(in, r, in.Body)
	refuse(w, r, p)
}

// sfStrings renders an RFC 8941 list of strings; a byte a structured
// string cannot hold (outside printable ASCII) is written %XX, as in a
// pointer's URI fragment form (RFC 6901 §6).
func sfStrings(ss []string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('"')
		for j := 0; j < len(s); j++ {
			switch c := s[j]; {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c < 0x20 || c > 0x7e || c == '%':
				b.WriteByte('%')
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	}
	return b.String()
}

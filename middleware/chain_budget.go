package middleware

// Chain budgets (docs/model-calls.md#chain-budgets): what one request may
// spend on model calls across its chain of agents, in tokens and in money.
// A budget is set where the chain enters, by the inbound edge's
// chain_budget (for callers that run no Baton, also by their
// Baton-Chain-Budget header when the edge takes it), and travels with the
// chain: the ingress gives each handling the budget it arrived under, and
// the egress (Identity) sends it on every handoff the agent makes for that
// handling, signed with the rest of the Baton-* headers. The spending is
// counted and checked against it elsewhere (package modelcall); here it is
// only carried.
//
// ChainBudgets sits at ingress after HopGuard (it needs the sender) and
// before Handle (which hands the budget to the handling). A malformed
// header from a Baton, or from a caller whose edge takes it, is 400
// bad-request; one from a caller whose edge does not take it is ignored
// and the receipt says so. It cannot fail open or closed: it needs no
// store.

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/problem"
)

// HeaderChainBudget carries a chain's budget from Baton to Baton:
// "tokens=200000, cost_usd=2.5" (an RFC 8941 dictionary; either member may
// be absent).
const HeaderChainBudget = "Baton-Chain-Budget"

// ChainBudget bounds a chain's model spend: its tokens (input and output)
// and its cost in nano-dollars. A zero member bounds nothing. Chain names
// the chain the budget is counted for: the scoped key of the handling where
// it entered (hex), the same when the chain is re-sent to resume it, in
// whatever trace; every Baton of the chain counts against it.
type ChainBudget struct {
	Tokens   int64
	CostNano int64
	Chain    string
}

// Bounds of what a budget header may say.
const (
	maxBudgetTokens   = 1_000_000_000_000
	maxBudgetCostNano = 1_000_000 * 1_000_000_000 // a million dollars
)

// Set reports whether b bounds anything.
func (b ChainBudget) Set() bool { return b.Tokens > 0 || b.CostNano > 0 }

// Min returns the tighter of b and o in each member, where zero is no
// bound.
func (b ChainBudget) Min(o ChainBudget) ChainBudget {
	tighter := func(x, y int64) int64 {
		switch {
		case x == 0:
			return y
		case y == 0:
			return x
		}
		return min(x, y)
	}
	chain := b.Chain
	if chain == "" {
		chain = o.Chain
	}
	return ChainBudget{Tokens: tighter(b.Tokens, o.Tokens), CostNano: tighter(b.CostNano, o.CostNano), Chain: chain}
}

// CostUSD returns the cost bound in dollars.
func (b ChainBudget) CostUSD() float64 { return float64(b.CostNano) / 1e9 }

// String renders b as Baton-Chain-Budget's value.
func (b ChainBudget) String() string {
	var s []byte
	if b.Tokens > 0 {
		s = append(s, "tokens="...)
		s = strconv.AppendInt(s, b.Tokens, 10)
	}
	if b.CostNano > 0 {
		if len(s) > 0 {
			s = append(s, ", "...)
		}
		s = append(s, "cost_usd="...)
		// An RFC 8941 decimal has at most three fractional digits: a
		// fraction of a tenth of a cent is rounded up, never lost.
		milli := (b.CostNano + 999_999) / 1_000_000
		s = strconv.AppendInt(s, milli/1000, 10)
		if f := milli % 1000; f != 0 {
			s = append(s, '.')
			frac := strconv.AppendInt(nil, 1000+f, 10)[1:]
			s = append(s, strings.TrimRight(string(frac), "0")...)
		}
	}
	if b.Chain != "" {
		s = append(s, `, chain="`...)
		s = append(s, b.Chain...)
		s = append(s, '"')
	}
	return string(s)
}

// ParseChainBudget reads a Baton-Chain-Budget value: members tokens (an
// integer) and cost_usd (an integer or decimal), each positive, and chain
// (a string of 32 hex digits); other members are ignored, as RFC 8941 lets
// a dictionary grow.
func ParseChainBudget(v string) (ChainBudget, error) {
	var b ChainBudget
	if strings.TrimSpace(v) == "" {
		return b, errors.New("empty: write tokens=N and/or cost_usd=X")
	}
	for m := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(m), "=")
		if !ok || k == "" {
			return ChainBudget{}, errors.New("a member is not name=value: write tokens=N and/or cost_usd=X")
		}
		switch k {
		case "tokens":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 1 || n > maxBudgetTokens {
				return ChainBudget{}, errors.New("tokens must be an integer between 1 and 10^12")
			}
			b.Tokens = n
		case "cost_usd":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || math.IsNaN(f) || f <= 0 || f*1e9 > maxBudgetCostNano || strings.ContainsAny(val, "eE+") {
				return ChainBudget{}, errors.New("cost_usd must be a decimal number of dollars above 0 and at most 1000000")
			}
			b.CostNano = int64(math.Round(f * 1e9))
		case "chain":
			c, ok := strings.CutPrefix(val, `"`)
			if c, ok2 := strings.CutSuffix(c, `"`); ok && ok2 && chainID(c) {
				b.Chain = c
				continue
			}
			return ChainBudget{}, errors.New(`chain must be a string of 32 hex digits: chain="..."`)
		}
	}
	if !b.Set() {
		return ChainBudget{}, errors.New("names neither tokens nor cost_usd")
	}
	return b, nil
}

// chainID reports whether s is a chain's id: 32 lowercase hex digits.
func chainID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ChainBudgetOptions configure ChainBudgets.
type ChainBudgetOptions struct {
	// Edge returns the budget of the inbound edge from a sender, and
	// whether that edge takes a budget from its callers' header.
	Edge func(from string) (b ChainBudget, fromHeader bool)
}

// ChainBudgets returns the ingress middleware that gives each inbound
// request the budget of its chain (Info.ChainBudget).
func ChainBudgets(o ChainBudgetOptions) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			edge, fromHeader := o.Edge(in.From)
			hdr, sent := in.budgetHeader, in.budgetHeader != ""
			if in.Caller == nil {
				vs := r.Header[HeaderChainBudget]
				hdr, sent = strings.Join(vs, ","), len(vs) > 0
			}
			var carried ChainBudget
			switch {
			case !sent:
			case in.SenderRunsNoBaton() && (!fromHeader || in.Caller.Anonymous() || in.Caller == nil):
				// A caller may not set its own budget unless its edge
				// lets the callers it authenticates do so.
				in.BudgetNote = "Baton-Chain-Budget ignored: the edge from " + in.From + " takes no budget from its callers"
				if in.From == "" || in.Caller.Anonymous() {
					in.BudgetNote = "Baton-Chain-Budget ignored: a caller with no credential sets no budget"
				}
			default:
				b, err := ParseChainBudget(hdr)
				if err != nil {
					problem.Write(w, r, problem.BadRequest, "Baton-Chain-Budget: "+err.Error())
					return
				}
				carried = b
			}
			in.ChainBudget = carried.Min(edge)
			next.ServeHTTP(w, r)
		})
	}
}

package modelcall

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// A chain's counters in the store, members of the index at
// genai/chain/{chain}: what its model calls that went out spent, across
// every Baton of the chain and every trace it ran in (a re-send to resume
// it is the same chain), and what approvers raised its budget by.
const (
	memberTokens      = "tokens"
	memberCost        = "cost_nusd"
	memberCalls       = "calls"
	memberRaiseTokens = "raised_tokens"
	memberRaiseCost   = "raised_cost_nusd"
)

// Spend is what a chain's model calls spent, and what its budget was
// raised by.
type Spend struct {
	Tokens, CostNano, Calls      int64
	RaisedTokens, RaisedCostNano int64
}

// over reports whether spend has reached b, as raised, and says how.
func (s Spend) over(b middleware.ChainBudget) (bool, string) {
	if b.Tokens > 0 {
		if limit := b.Tokens + s.RaisedTokens; s.Tokens >= limit {
			return true, fmt.Sprintf("its chain has used %d of its %d model tokens", s.Tokens, limit)
		}
	}
	if b.CostNano > 0 {
		if limit := b.CostNano + s.RaisedCostNano; s.CostNano >= limit {
			return true, fmt.Sprintf("its chain has spent $%s of its $%s budget", dollars(s.CostNano), dollars(limit))
		}
	}
	return false, ""
}

// dollars renders nano-dollars to the tenth of a cent.
func dollars(nano int64) string {
	return strconv.FormatFloat(float64(nano)/1e9, 'f', 3, 64)
}

func chainKey(chain string) string { return "genai/chain/" + chain }

// chainSpend reads a chain's counters: one round trip.
func (mc *Calls) chainSpend(ctx context.Context, chain string) (Spend, error) {
	ms, err := mc.store.IndexRange(ctx, chainKey(chain), math.Inf(-1), math.Inf(1), 0, 0)
	if err != nil {
		return Spend{}, err
	}
	var s Spend
	for _, m := range ms {
		n := int64(m.Score)
		switch m.Member {
		case memberTokens:
			s.Tokens = n
		case memberCost:
			s.CostNano = n
		case memberCalls:
			s.Calls = n
		case memberRaiseTokens:
			s.RaisedTokens = n
		case memberRaiseCost:
			s.RaisedCostNano = n
		}
	}
	return s, nil
}

// spendCounts are the adds of a call's spend to its chain's counters.
func (mc *Calls) spendCounts(chain string, tokens, costNano int64) state.Counts {
	return state.Counts{Key: chainKey(chain), TTL: mc.retention, Deltas: []state.Scored{{Member: memberCalls, Score: 1},
		{Member: memberTokens, Score: float64(tokens)}, {Member: memberCost, Score: float64(costNano)}}}
}

// addSpend adds a call's spend to its chain's counters, before the
// answer's end reaches the agent: written with the journal's append of
// the answer when the journal took it from the call's ride, otherwise
// alone (one round trip).
func (mc *Calls) addSpend(c *call, tokens, costNano int64) {
	chain := c.h.Budget.Chain
	if c.ride != nil {
		if taken, err := c.ride.Close(); taken {
			if err != nil {
				mc.log.Warn("model calls: the call's spend may not have been added to its chain's count", "chain", chain, "error", err.Error())
			}
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWrite)
	defer cancel()
	counts := mc.spendCounts(chain, tokens, costNano)
	if _, err := mc.store.IndexIncr(ctx, counts.Key, counts.Deltas, counts.TTL); err != nil {
		mc.log.Warn("model calls: the call's spend was not added to its chain's count", "chain", chain, "error", err.Error())
	}
}

// Raise raises a chain's budget by tokens and nano-dollars, as an
// approver decided, and returns its counters after.
func (mc *Calls) Raise(ctx context.Context, chain string, tokens, costNano int64) (Spend, error) {
	deltas := []state.Scored{{Member: memberRaiseTokens, Score: float64(tokens)}, {Member: memberRaiseCost, Score: float64(costNano)}}
	if _, err := mc.store.IndexIncr(ctx, chainKey(chain), deltas, mc.retention); err != nil {
		return Spend{}, fmt.Errorf("raising the budget: %w", err)
	}
	return mc.chainSpend(ctx, chain)
}

// The chains that spent most, by hour: in genai/costly/{hour}, member
// {trace} scores a trace by the nano-dollars its priced model calls cost
// and member t:{trace} by their tokens.
func costlyKey(at time.Time) string { return "genai/costly/" + strconv.FormatInt(at.Unix()/3600, 10) }

// costlyTTL keeps an hour's index for the hour after it.
const costlyTTL = 2*time.Hour + 5*time.Minute

// tokensMember is a trace's tokens member in the hour's index.
const tokensMember = "t:"

// noteCostly adds a handling's spend to its trace's in the hour's index:
// one store round trip.
func (mc *Calls) noteCostly(ctx context.Context, trace string, at time.Time, costUSD float64, tokens int64) error {
	d := []state.Scored{{Member: trace, Score: math.Round(costUSD * 1e9)}, {Member: tokensMember + trace, Score: float64(tokens)}}
	_, err := mc.store.IndexIncr(ctx, costlyKey(at), d, costlyTTL)
	return err
}

// ChainSpend is one chain's spend in the last hour.
type ChainSpend struct {
	TraceID string  `json:"trace_id"`
	CostUSD float64 `json:"cost_usd"`
	Tokens  int64   `json:"tokens"`
	Priced  bool    `json:"priced"`
}

// Costly returns the n chains that spent most in the hour before now (this
// hour's and the last one's indexes), by cost then tokens.
func (mc *Calls) Costly(ctx context.Context, n int) ([]ChainSpend, error) {
	now := mc.now()
	byTrace := map[string]*ChainSpend{}
	for _, at := range []time.Time{now.Add(-time.Hour), now} {
		ms, err := mc.store.IndexRange(ctx, costlyKey(at), math.Inf(-1), math.Inf(1), 0, 0)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			trace, isTokens := strings.CutPrefix(m.Member, tokensMember)
			c := byTrace[trace]
			if c == nil {
				c = &ChainSpend{TraceID: trace}
				byTrace[trace] = c
			}
			if isTokens {
				c.Tokens += int64(m.Score)
			} else if m.Score > 0 {
				c.CostUSD += m.Score / 1e9
				c.Priced = true
			}
		}
	}
	out := make([]ChainSpend, 0, len(byTrace))
	for _, c := range byTrace {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ChainSpend) int {
		if c := cmp.Compare(b.CostUSD, a.CostUSD); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Tokens, a.Tokens); c != 0 {
			return c
		}
		return strings.Compare(a.TraceID, b.TraceID)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

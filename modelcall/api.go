package modelcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
)

// ApproverOf names who sent an admin request: the admin, or an approver
// (package approval), by its bearer token or signature; an error when it is
// no one who may decide.
type ApproverOf func(r *http.Request, body []byte) (string, error)

// SpendView is a chain's spend as the admin API shows it: its counts in
// the store (kept for chains with a budget) and what approvers raised its
// budget by.
type SpendView struct {
	Chain   string  `json:"chain"`
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
	Calls   int64   `json:"calls"`
	Raised  Raise   `json:"raised"`
}

// Raise is how much a budget is raised by.
type Raise struct {
	Tokens  int64   `json:"tokens,omitempty"`
	CostUSD float64 `json:"cost_usd,omitempty"`
}

func spendView(chain string, s Spend) SpendView {
	return SpendView{Chain: chain, Tokens: s.Tokens, CostUSD: float64(s.CostNano) / 1e9, Calls: s.Calls,
		Raised: Raise{Tokens: s.RaisedTokens, CostUSD: float64(s.RaisedCostNano) / 1e9}}
}

// GetSpend serves GET /v1/chains/{chain}/spend.
func (mc *Calls) GetSpend(w http.ResponseWriter, r *http.Request) {
	chain, ok := chainParam(w, r)
	if !ok {
		return
	}
	s, err := mc.chainSpend(r.Context(), chain)
	if err != nil {
		records.StoreProblem(w, r, mc.log, err)
		return
	}
	records.WriteJSON(w, http.StatusOK, spendView(chain, s))
}

// chainParam reads the {chain} of a path: 32 hex digits, as records name a
// chain's budget.
func chainParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	c := chi.URLParam(r, "chain")
	if len(c) != 32 || strings.Trim(c, "0123456789abcdef") != "" {
		problem.Write(w, r, problem.BadRequest, "a chain is named by 32 hex digits, as its records' budget says (budget.chain)")
		return "", false
	}
	return c, true
}

// RaiseBudget serves POST /v1/chains/{chain}/budget: an approver raises
// the chain's budget by {"tokens": N, "cost_usd": X}, so that a chain
// stopped by it can be resumed. The agent's own identity may not.
func (mc *Calls) RaiseBudget(approverOf ApproverOf, agent string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		chain, ok := chainParam(w, r)
		if !ok {
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<10+1))
		if err != nil || len(body) > 4<<10 {
			problem.Write(w, r, problem.BadRequest, "the body must be JSON of at most 4 KiB: {\"tokens\": N, \"cost_usd\": X}")
			return
		}
		who, err := approverOf(r, body)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton-approvals"`)
			problem.Write(w, r, problem.ApproverRequired, "raising a chain's budget takes an approver: "+err.Error())
			return
		}
		if who == agent {
			problem.Write(w, r, problem.SelfApproval, "an agent may not raise the budget of a chain it runs in")
			return
		}
		var in Raise
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			problem.Write(w, r, problem.BadRequest, "the body must be {\"tokens\": N, \"cost_usd\": X}: "+err.Error())
			return
		}
		if err := checkRaise(in); err != nil {
			problem.Write(w, r, problem.BadRequest, err.Error())
			return
		}
		s, err := mc.Raise(r.Context(), chain, in.Tokens, int64(math.Round(in.CostUSD*1e9)))
		if err != nil {
			records.StoreProblem(w, r, mc.log, err)
			return
		}
		mc.log.LogAttrs(r.Context(), slog.LevelInfo, "chain budget raised", slog.String("chain", chain),
			slog.String("by", who), slog.Int64("tokens", in.Tokens), slog.Float64("cost_usd", in.CostUSD))
		records.WriteJSON(w, http.StatusOK, spendView(chain, s))
	}
}

// checkRaise refuses a raise that lowers, raises nothing, or is absurd.
func checkRaise(in Raise) error {
	switch {
	case in.Tokens < 0 || in.CostUSD < 0 || math.IsNaN(in.CostUSD):
		return errors.New("a budget is only raised: tokens and cost_usd must be >= 0")
	case in.Tokens == 0 && in.CostUSD == 0:
		return errors.New("raise tokens, cost_usd or both: {\"tokens\": N, \"cost_usd\": X}")
	case in.Tokens > 1e12 || in.CostUSD > 1e6:
		return errors.New("tokens must be at most 10^12 and cost_usd at most 1000000")
	}
	return nil
}

// GetCostly serves GET /v1/spend/costly?limit=N: the chains whose model
// calls cost most in the last hour (limit 10 by default, at most 100).
func (mc *Calls) GetCostly(w http.ResponseWriter, r *http.Request) {
	n := 10
	if v := r.URL.Query().Get("limit"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 100 {
			problem.Write(w, r, problem.BadRequest, "limit must be an integer from 1 to 100")
			return
		}
	}
	cs, err := mc.Costly(r.Context(), n)
	if err != nil {
		records.StoreProblem(w, r, mc.log, err)
		return
	}
	records.WriteJSON(w, http.StatusOK, map[string]any{"chains": cs})
}

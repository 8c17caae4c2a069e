package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/batonproxy/baton/modelcall"
)

const budgetUsage = `  baton budget show CHAIN_ID [--admin HOST:PORT]
  baton budget raise CHAIN_ID [--tokens N] [--cost-usd X] [--admin HOST:PORT]
                                 a chain's model spend against its budget, counted by
                                 every Baton of the chain in the shared store; raise
                                 the budget (an approver: BATON_APPROVER_TOKEN, else
                                 BATON_ADMIN_TOKEN), then re-send the chain's first
                                 request to resume it where it stopped
                                 (docs/model-calls.md#chain-budgets)
  baton budget costly [--limit N] [--admin HOST:PORT]
                                 the chains whose model calls cost most in the last hour
`

// budgetCmd shows and raises chains' budgets.
func budgetCmd(args []string, stdout io.Writer, env func(string) string) error {
	if len(args) == 0 {
		return usageError{msg: "budget: want show, raise or costly"}
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("budget "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	admin := fs.String("admin", defaultAdmin, "the Baton's admin address host:port")
	tokens := fs.Int64("tokens", 0, "raise: by this many tokens")
	cost := fs.Float64("cost-usd", 0, "raise: by this many dollars")
	limit := fs.Int("limit", 10, "costly: at most this many chains")
	id, rest := splitFirstArg(args)
	if err := fs.Parse(rest); err != nil {
		return usageError{msg: "budget " + sub + ": " + err.Error()}
	}
	switch sub {
	case "show", "raise":
		if id == "" {
			return usageError{msg: "budget " + sub + ": want a CHAIN_ID (a record's budget.chain, as baton trace prints it)"}
		}
	case "costly":
		if id != "" {
			return usageError{msg: fmt.Sprintf("budget costly: unexpected argument %q", id)}
		}
	default:
		return usageError{msg: fmt.Sprintf("budget: unknown subcommand %q: want show, raise or costly", sub)}
	}
	var v modelcall.SpendView
	switch sub {
	case "show":
		if err := newAdminClient(*admin, env).do("GET", "/v1/chains/"+pathEscape(id)+"/spend", &v); err != nil {
			return err
		}
	case "raise":
		if *tokens <= 0 && *cost <= 0 {
			return usageError{msg: "budget raise: give --tokens N, --cost-usd X or both (by how much to raise it)"}
		}
		body, _ := json.Marshal(modelcall.Raise{Tokens: *tokens, CostUSD: *cost})
		if err := approverClient(*admin, env).send("POST", "/v1/chains/"+pathEscape(id)+"/budget", body, nil, &v); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "raised the budget of chain %s\n", id)
	case "costly":
		var page struct{ Chains []modelcall.ChainSpend }
		if err := newAdminClient(*admin, env).do("GET", "/v1/spend/costly?limit="+strconv.Itoa(*limit), &page); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "TRACE                             COST (USD)  TOKENS")
		for _, c := range page.Chains {
			cost := "unpriced"
			if c.Priced {
				cost = strconv.FormatFloat(c.CostUSD, 'f', 4, 64)
			}
			fmt.Fprintf(stdout, "%-32s  %10s  %d\n", c.TraceID, cost, c.Tokens)
		}
		return nil
	}
	fmt.Fprintf(stdout, "chain %s: %d tokens, $%.4f in %d model calls that went out", v.Chain, v.Tokens, v.CostUSD, v.Calls)
	if v.Raised.Tokens > 0 || v.Raised.CostUSD > 0 {
		fmt.Fprintf(stdout, "; budget raised by %d tokens and $%.4f", v.Raised.Tokens, v.Raised.CostUSD)
	}
	fmt.Fprintln(stdout)
	return nil
}

package console

import (
	"strconv"
	"strings"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// Model calls on the console's pages (docs/model-calls.md): each call is a
// bar of its own in a trace's waterfall, under the receipt of the handling
// it served; a trace's page sums what its agents' calls spent, per agent
// and for the chain; the overview lists the chains that cost most in the
// last hour.

// The classes of a model call's bar.
const (
	callLive    = "call live"    // went out and was answered
	callJournal = "call journal" // answered from the journal: nothing spent
	callRefused = "call refused" // answered by Baton: the chain's budget, the calls per handling
	callError   = "call error"   // went out and failed, or got an error answer
)

// callRow draws the model call c, the nth of the receipt r's: labelled with
// its operation and model, marked with its tokens and cost, or as a journal
// hit or a refusal; its title says where it went and how it ended.
func callRow(r *record.Record, c *record.ModelCall, n int) waterfallRow {
	row := waterfallRow{ID: r.ID, Call: n, Label: strings.TrimSpace(c.Operation + " " + c.Model), BarH: callHeight}
	switch {
	case c.Refused != "":
		row.Class, row.Marks = callRefused, []string{"refused by Baton: " + c.Refused}
	case c.Journal:
		row.Class, row.Marks = callJournal, []string{"journal hit, no spend"}
	default:
		row.Class = callLive
		if c.Error != "" || c.Status >= 400 {
			row.Class = callError
			row.Marks = append(row.Marks, "error "+firstOf(c.Error, strconv.Itoa(c.Status)))
		}
		switch {
		case c.UsageKnown:
			row.Marks = append(row.Marks, strconv.FormatInt(c.InputTokens, 10)+" in / "+strconv.FormatInt(c.OutputTokens, 10)+" out tokens")
		case c.Error == "" && c.Status < 400:
			row.Marks = append(row.Marks, "usage unknown")
		}
		switch {
		case c.Priced:
			row.Marks = append(row.Marks, usd(c.CostUSD))
		case c.UsageKnown:
			row.Marks = append(row.Marks, "unpriced")
		}
	}
	t := []string{"model call " + row.Label + " to " + c.API}
	if c.Provider != "" {
		t[0] += " (" + c.Provider + ")"
	}
	t = append(t, strconv.FormatFloat(c.Ms, 'f', 1, 64)+" ms")
	if c.TTFTMs > 0 {
		t = append(t, "first token at "+strconv.FormatFloat(c.TTFTMs, 'f', 1, 64)+" ms")
	}
	if c.Finish != "" {
		t = append(t, "finish "+c.Finish)
	}
	if c.Status != 0 {
		t = append(t, "status "+strconv.Itoa(c.Status))
	}
	if c.CachedTokens > 0 || c.ReasoningTokens > 0 {
		t = append(t, strconv.FormatInt(c.CachedTokens, 10)+" cached, "+strconv.FormatInt(c.ReasoningTokens, 10)+" reasoning tokens")
	}
	row.Title = t[0] + ": " + strings.Join(t[1:], ", ") + "; " + strings.Join(row.Marks, ", ")
	return row
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// usd renders dollars to about three significant digits of a cent's
// fractions: $1.25, $0.0125, $0.000180.
func usd(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v >= 1:
		return "$" + strconv.FormatFloat(v, 'f', 2, 64)
	case v >= 0.01:
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 6, 64)
}

// spendTable is what a trace's model calls spent, per agent (in the order
// of their first receipt) and for the chain (records.Spend), with the
// chain's budget.
type spendTable struct {
	Rows   []spendRow
	Budget string // "" when the chain has none
}

type spendRow struct {
	Name  string
	Chain bool // the chain's total
	record.ModelSummary
}

// newSpendTable sums the trace's receipts' model summaries; nil when no
// receipt has one.
func newSpendTable(recs []record.Record) *spendTable {
	agents, chain := records.Spend(recs)
	if chain == nil {
		return nil
	}
	t := &spendTable{Rows: make([]spendRow, 0, len(agents)+1)}
	for _, a := range agents {
		t.Rows = append(t.Rows, spendRow{Name: a.Agent, ModelSummary: a.ModelSummary})
	}
	t.Rows = append(t.Rows, spendRow{Name: "chain", Chain: true, ModelSummary: *chain})
	if b := chain.Budget; b != nil {
		var parts []string
		if b.Tokens > 0 {
			parts = append(parts, strconv.FormatInt(b.Tokens, 10)+" tokens")
		}
		if b.CostUSD > 0 {
			parts = append(parts, usd(b.CostUSD))
		}
		t.Budget = strings.Join(parts, ", ")
	}
	return t
}

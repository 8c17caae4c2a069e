package records

import (
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
)

// TestSpend: receipts' model summaries add up per agent and for the chain;
// delegation records and receipts without calls count nothing.
func TestSpend(t *testing.T) {
	t0 := time.Now()
	recs := []record.Record{
		{ID: "t.3", Side: record.Ingress, To: "b", Created: t0.Add(3 * time.Second),
			Models: &record.ModelSummary{Calls: 2, JournalHits: 1, InputTokens: 100, OutputTokens: 10, CostUSD: 0.25}},
		{ID: "t.1", Side: record.Ingress, To: "a", Created: t0.Add(time.Second),
			Models: &record.ModelSummary{Calls: 1, InputTokens: 50, OutputTokens: 5, CostUSD: 0.5, Budget: &record.BudgetView{Tokens: 1000}}},
		{ID: "t.2", Side: record.Egress, From: "a", To: "b", Created: t0.Add(2 * time.Second),
			Models: &record.ModelSummary{Calls: 99}},
		{ID: "t.4", Side: record.Ingress, To: "b", Created: t0.Add(4 * time.Second),
			Models: &record.ModelSummary{Calls: 1, Refused: 1, Unpriced: 1, InputTokens: 7}},
		{ID: "t.5", Side: record.Ingress, To: "c", Created: t0.Add(5 * time.Second)},
	}
	agents, chain := Spend(recs)
	if len(agents) != 2 || agents[0].Agent != "a" || agents[1].Agent != "b" {
		t.Fatalf("agents %+v", agents)
	}
	if b := agents[1]; b.Calls != 3 || b.JournalHits != 1 || b.Refused != 1 || b.InputTokens != 107 || b.CostUSD != 0.25 {
		t.Errorf("b %+v", b)
	}
	if chain.Calls != 4 || chain.InputTokens != 157 || chain.OutputTokens != 15 || chain.CostUSD != 0.75 ||
		chain.Budget == nil || chain.Budget.Tokens != 1000 {
		t.Errorf("chain %+v", chain)
	}
	if a, c := Spend(recs[2:3]); a != nil || c != nil {
		t.Errorf("no receipt with calls: %v %v", a, c)
	}
}

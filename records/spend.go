package records

import (
	"sort"

	"github.com/batonproxy/baton/handoff/record"
)

// AgentSpend is what one agent's model calls did and cost in a trace: the
// sum of the model summaries of its receipts (docs/model-calls.md).
type AgentSpend struct {
	Agent string `json:"agent"`
	record.ModelSummary
}

// Spend sums a trace's receipts' model summaries per agent (by the receipt's
// To), in order of the agents' first receipt, and for the whole chain. The
// per-call lists are not kept; nil when no receipt has a summary.
func Spend(recs []record.Record) (agents []AgentSpend, chain *record.ModelSummary) {
	sorted := append([]record.Record(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Created.Before(sorted[j].Created) })
	at := map[string]int{}
	for _, r := range sorted {
		m := r.Models
		if r.Side != record.Ingress || m == nil {
			continue
		}
		i, ok := at[r.To]
		if !ok {
			i = len(agents)
			at[r.To] = i
			agents = append(agents, AgentSpend{Agent: r.To})
		}
		addSummary(&agents[i].ModelSummary, m)
		if m.Budget != nil && agents[i].Budget == nil {
			b := *m.Budget
			agents[i].Budget = &b
		}
	}
	if len(agents) == 0 {
		return nil, nil
	}
	chain = &record.ModelSummary{}
	for i := range agents {
		addSummary(chain, &agents[i].ModelSummary)
		if chain.Budget == nil && agents[i].Budget != nil {
			b := *agents[i].Budget
			chain.Budget = &b
		}
	}
	return agents, chain
}

func addSummary(to, s *record.ModelSummary) {
	to.Calls += s.Calls
	to.JournalHits += s.JournalHits
	to.Refused += s.Refused
	to.UnknownUsage += s.UnknownUsage
	to.Unpriced += s.Unpriced
	to.InputTokens += s.InputTokens
	to.OutputTokens += s.OutputTokens
	to.CachedTokens += s.CachedTokens
	to.ReasoningTokens += s.ReasoningTokens
	to.CostUSD += s.CostUSD
}

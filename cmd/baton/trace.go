package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// traceCmd prints a trace's handoff records as a tree, from one or more
// Batons' admin listeners, and with --verify checks each hash chain.
func traceCmd(args []string, stdout io.Writer, env func(string) string) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var admins multiFlag
	fs.Var(&admins, "admin", "a Baton's admin address host:port (repeatable; default "+defaultAdmin+")")
	verify := fs.Bool("verify", false, "check each Baton's hash chain for the trace")
	asJSON := fs.Bool("json", false, "print the records as JSON")
	id, rest := splitFirstArg(args)
	if err := fs.Parse(rest); err != nil {
		return usageError{msg: "trace: " + err.Error()}
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 || id == "" {
		return usageError{msg: "trace: want exactly one TRACE_ID"}
	}
	if len(admins) == 0 {
		admins = multiFlag{defaultAdmin}
	}
	byID := map[string]record.Record{}
	broken := 0
	found := 0
	for _, a := range admins {
		var v records.TraceView
		err := newAdminClient(a, env).do("GET", "/v1/traces/"+pathEscape(id), &v)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		found++
		for _, r := range v.Records {
			if prev, ok := byID[r.ID]; !ok || r.Updated.After(prev.Updated) {
				byID[r.ID] = r
			}
		}
		if *verify {
			entries := make([][]byte, len(v.Entries))
			for i, e := range v.Entries {
				entries[i] = []byte(e)
			}
			if err := record.Verify(entries, v.Tail); err != nil {
				broken++
				fmt.Fprintf(stdout, "chain at %s: BROKEN\n", a)
				if ce, ok := err.(*record.ChainError); ok {
					for _, p := range ce.Problems {
						fmt.Fprintf(stdout, "  - %s\n", p)
					}
				} else {
					fmt.Fprintf(stdout, "  - %v\n", err)
				}
			} else {
				fmt.Fprintf(stdout, "chain at %s: intact (%d entries)\n", a, len(v.Entries))
			}
		}
	}
	if found == 0 {
		return fmt.Errorf("trace %s: no records at %s", id, strings.Join(admins, ", "))
	}
	recs := make([]record.Record, 0, len(byID))
	for _, r := range byID {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Created.Before(recs[j].Created) })
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(recs); err != nil {
			return err
		}
	} else {
		printTree(stdout, id, recs)
	}
	if broken > 0 {
		return fmt.Errorf("trace %s: %d hash chain(s) broken", id, broken)
	}
	return nil
}

// splitFirstArg lets the positional argument come before the flags.
func splitFirstArg(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

// printTree renders records as a tree by parent record (records.TraceTree).
func printTree(w io.Writer, traceID string, recs []record.Record) {
	fmt.Fprintf(w, "trace %s\n", traceID)
	var walk func(n *records.TraceNode, prefix string, last bool)
	walk = func(n *records.TraceNode, prefix string, last bool) {
		branch, next := "├─ ", "│  "
		if last {
			branch, next = "└─ ", "   "
		}
		fmt.Fprintf(w, "%s%s%s\n", prefix, branch, describeRecord(n.Record))
		for i, k := range n.Children {
			walk(k, prefix+next, i == len(n.Children)-1)
		}
	}
	roots := records.TraceTree(recs)
	for i, r := range roots {
		walk(r, "", i == len(roots)-1)
	}
	if agents, chain := records.Spend(recs); chain != nil {
		fmt.Fprintf(w, "\nmodel calls\n")
		for _, a := range agents {
			fmt.Fprintf(w, "  %-16s %s\n", a.Agent, describeSpend(&a.ModelSummary))
		}
		fmt.Fprintf(w, "  %-16s %s\n", "chain", describeSpend(chain))
		if b := chain.Budget; b != nil {
			fmt.Fprintf(w, "  budget           %s\n", describeBudget(b))
		}
	}
	for _, warning := range untiedWarnings(recs) {
		fmt.Fprintf(w, "\nwarning: %s\n", warning)
	}
}

// untiedWarnings names, per agent, the handoffs it made in this trace that
// Baton could tie to no inbound handoff (a receipt's uncorrelated_calls,
// or handoffs whose trace had several handlings), with the fix.
func untiedWarnings(recs []record.Record) []string {
	untied := map[string]int{}
	var agents []string
	for _, r := range recs {
		n := 0
		switch {
		case r.Side == record.Ingress:
			n = r.UncorrelatedCalls
		case r.Correlation == record.CorrelationAmbiguous:
			n = 1
		}
		if n == 0 {
			continue
		}
		agent := r.From
		if r.Side == record.Ingress {
			agent = r.To
		}
		if _, seen := untied[agent]; !seen {
			agents = append(agents, agent)
		}
		untied[agent] += n
	}
	out := make([]string, 0, len(agents))
	for _, a := range agents {
		out = append(out, fmt.Sprintf("agent %s made %d handoff(s) while handling this trace that Baton could tie to no "+
			"inbound handoff: their keys came from their content, so a re-run with other bodies runs them again. Fix: "+
			"propagate W3C trace context (annotate its pod baton.dev/instrument, or run it with baton exec --instrument), "+
			"serve one request at a time, or send Idempotency-Key (docs/resume.md)", a, untied[a]))
	}
	return out
}

func describeRecord(r record.Record) string {
	var b strings.Builder
	if r.Side == record.Ingress {
		fmt.Fprintf(&b, "%s received from %s", r.To, r.From)
	} else {
		fmt.Fprintf(&b, "%s → %s", r.From, r.To)
	}
	fmt.Fprintf(&b, "  %s %s  %s", r.Method, r.Target, r.State)
	if r.Status != 0 {
		fmt.Fprintf(&b, " %d", r.Status)
	}
	fmt.Fprintf(&b, "  hop %d  %d attempt(s)  %.1fms", r.Hop, r.Attempts, r.Latency)
	if r.Side == record.Egress && r.KeySource == record.KeyFromPosition {
		fmt.Fprintf(&b, "  key: position %d", r.Position)
	}
	switch {
	case r.Side != record.Egress || r.Correlation == "":
	case r.Correlation == record.CorrelationAmbiguous:
		b.WriteString("  tied to no handling (its trace had several)")
	default:
		fmt.Fprintf(&b, "  tied by %s", r.Correlation)
	}
	if r.UncorrelatedCalls > 0 {
		fmt.Fprintf(&b, "  ⚠ %d call(s) made meanwhile tied to no handling", r.UncorrelatedCalls)
	}
	if r.Outcome != "" {
		fmt.Fprintf(&b, "  (%s)", r.Outcome)
	}
	fmt.Fprintf(&b, "  [%s]", shortID(r.ID))
	if r.State == record.Dead && r.ResolvedBy == "" {
		b.WriteString("  ✗ the chain stopped here")
	}
	if r.StoppedAt != "" {
		fmt.Fprintf(&b, "  ↳ stopped at [%s]", shortID(r.StoppedAt))
	}
	if r.ResolvedBy != "" {
		fmt.Fprintf(&b, "  ↳ resumed: [%s]", shortID(r.ResolvedBy))
	}
	if a := r.Approval; a != nil {
		fmt.Fprintf(&b, "  gate: %s", a.Gate)
		switch {
		case a.Decision == "":
			fmt.Fprintf(&b, ", waiting until %s", a.Expires.UTC().Format(time.RFC3339))
		case a.Reason != "":
			fmt.Fprintf(&b, ", %s by %s (%s)", a.Decision, a.By, a.Reason)
		default:
			fmt.Fprintf(&b, ", %s by %s", a.Decision, a.By)
		}
	}
	if j := r.Journal; j != nil {
		b.WriteString("  " + describeJournal(j))
	}
	if m := r.Models; m != nil && m.Calls > 0 {
		b.WriteString("  models: " + describeSpend(m))
	}
	return b.String()
}

// describeSpend renders what model calls did and cost: "3 call(s), 360 in
// + 90 out tokens, $0.000288 (1 from the journal, 1 refused)". The tokens
// and cost are those the answers reported; the cost is unknown, not $0,
// when no call that went out had both a usage and a price.
func describeSpend(m *record.ModelSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d call(s), %d in + %d out tokens", m.Calls, m.InputTokens, m.OutputTokens)
	unknownCost := m.CostUSD == 0 && m.Unpriced+m.UnknownUsage > 0
	if unknownCost {
		b.WriteString(", cost unknown")
	} else {
		fmt.Fprintf(&b, ", $%.6f", m.CostUSD)
		if m.Unpriced > 0 {
			fmt.Fprintf(&b, " + %d unpriced call(s)", m.Unpriced)
		}
	}
	var notes []string
	if m.JournalHits > 0 {
		notes = append(notes, fmt.Sprintf("%d from the journal, not paid", m.JournalHits))
	}
	if m.Refused > 0 {
		notes = append(notes, fmt.Sprintf("%d refused by Baton", m.Refused))
	}
	if m.UnknownUsage > 0 {
		notes = append(notes, fmt.Sprintf("%d with usage unknown", m.UnknownUsage))
	}
	if unknownCost && m.Unpriced > 0 {
		notes = append(notes, fmt.Sprintf("%d with no price", m.Unpriced))
	}
	if len(notes) > 0 {
		b.WriteString(" (" + strings.Join(notes, ", ") + ")")
	}
	return b.String()
}

// describeBudget renders a chain budget.
func describeBudget(bv *record.BudgetView) string {
	var parts []string
	if bv.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", bv.Tokens))
	}
	if bv.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.3f", bv.CostUSD))
	}
	s := strings.Join(parts, ", ") + " (as set where the chain entered)"
	if bv.Chain != "" {
		s += "; its count and raises: baton budget show " + bv.Chain
	}
	return s
}

// describeJournal renders what the call journal did while the agent
// handled a handoff: "journal: 2 hit(s) (saved 1234 bytes, 74 tokens), 1
// miss(es) (1 journaled); not journaled: …".
func describeJournal(j *record.JournalSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "journal: %d hit(s)", j.Hits)
	if j.Hits > 0 {
		fmt.Fprintf(&b, " (saved %d bytes", j.SavedBytes)
		if j.SavedTokens > 0 {
			fmt.Fprintf(&b, ", %d tokens", j.SavedTokens)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ", %d miss(es) (%d journaled)", j.Misses, j.Journaled)
	if len(j.Skipped) > 0 {
		b.WriteString("; not journaled: " + strings.Join(j.Skipped, "; "))
	}
	return b.String()
}

// shortID is a record id without its trace id, as a tree of one trace
// shows it.
func shortID(id string) string { return id[strings.IndexByte(id, '.')+1:] }

package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
)

// TestWaterfallModelCalls: each model call of a receipt is a bar of its
// own under it, among the receipt's handoffs by when it began, placed by
// its start and length; labelled with its operation and model, marked
// with its tokens and cost, or as a journal hit (nothing spent) or a
// refusal by Baton, or an error; its title names the API, provider, finish
// reason and time to first token. The trace's span reaches the last
// call's end.
func TestWaterfallModelCalls(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	call := func(ms int, took float64) record.ModelCall {
		return record.ModelCall{At: at(ms), Ms: took, API: "llm", Provider: "openai", Operation: "chat", Model: "gpt-4.1-mini-2025-04-14", Status: 200}
	}
	live := call(10, 40)
	live.InputTokens, live.OutputTokens, live.UsageKnown, live.CostUSD, live.Priced = 250, 50, true, 0.00018, true
	live.Finish, live.TTFTMs = "tool_calls", 12.5
	hit := call(60, 1)
	hit.Journal = true
	refused := call(200, 0.2)
	refused.Refused, refused.Status = "calls per handling", 429
	failed := call(210, 30)
	failed.Error, failed.Status = "rate_limit_exceeded", 429
	unknown := call(250, 40)
	unknown.Finish = "stop"
	unpriced := call(300, 20)
	unpriced.Model, unpriced.InputTokens, unpriced.OutputTokens, unpriced.UsageKnown = "my-finetune", 7, 3, true
	summary := &record.ModelSummary{}
	for _, c := range []record.ModelCall{live, hit, refused, failed, unknown, unpriced} {
		summary.Add(c)
	}
	recs := []record.Record{
		{ID: "t.1", Side: record.Ingress, From: "web", To: "planner", State: record.Delivered, Created: at(0), Latency: 400, Models: summary},
		{ID: "t.2", ParentID: "t.1", Side: record.Egress, From: "planner", To: "writer", State: record.Delivered, Created: at(100), Latency: 50},
		{ID: "t.3", ParentID: "t.2", Side: record.Ingress, From: "planner", To: "writer", State: record.Delivered, Created: at(110), Latency: 30},
		// A delegation record's summary is no receipt's: not drawn.
		{ID: "t.4", ParentID: "t.1", Side: record.Egress, From: "planner", To: "critic", State: record.Delivered, Created: at(350), Latency: 600,
			Models: &record.ModelSummary{Calls: 1, List: []record.ModelCall{call(360, 5)}}},
	}
	w := newWaterfall(records.TraceTree(recs))
	var got []string
	for _, r := range w.Rows {
		id := r.ID
		if r.Call > 0 {
			id += "#" + string(rune('0'+r.Call))
		}
		got = append(got, id+" "+strings.Repeat(">", r.Depth)+" "+r.Class+": "+r.Label+" / "+strings.Join(r.Marks, " · "))
	}
	want := []string{
		"t.1  delivered: ingress web→planner   / ",
		"t.1#1 > call live: chat gpt-4.1-mini-2025-04-14 / 250 in / 50 out tokens · $0.000180",
		"t.1#2 > call journal: chat gpt-4.1-mini-2025-04-14 / journal hit, no spend",
		"t.2 > delivered: egress planner→writer   / ",
		"t.3 >> delivered: ingress planner→writer   / ",
		"t.1#3 > call refused: chat gpt-4.1-mini-2025-04-14 / refused by Baton: calls per handling",
		"t.1#4 > call error: chat gpt-4.1-mini-2025-04-14 / error rate_limit_exceeded",
		"t.1#5 > call live: chat gpt-4.1-mini-2025-04-14 / usage unknown",
		"t.1#6 > call live: chat my-finetune / 7 in / 3 out tokens · unpriced",
		"t.4 > delivered: egress planner→critic   / ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w.Calls != 6 || w.Span != "950ms" {
		t.Errorf("%d calls drawn over %s, want 6 over 950ms", w.Calls, w.Span)
	}
	byCall := map[int]waterfallRow{}
	for _, r := range w.Rows {
		if r.Call > 0 {
			byCall[r.Call] = r
			if r.BarH != callHeight || r.BarY <= r.Y || r.BarY+r.BarH >= r.Y+barHeight {
				t.Errorf("call %d: bar %d+%d on a row at %d", r.Call, r.BarY, r.BarH, r.Y)
			}
		}
	}
	// Placed by its own start and length: 10 ms to 50 ms of 950.
	if r := byCall[1]; r.X != barsLeft+barsWidth*10/950 || r.W != barsWidth*40/950 {
		t.Errorf("the first call's bar at %d width %d", r.X, r.W)
	}
	if r := byCall[2]; r.W != 2 {
		t.Errorf("a 1 ms journal hit is %d wide, want the least width", r.W)
	}
	title := byCall[1].Title
	for _, s := range []string{"chat gpt-4.1-mini-2025-04-14 to llm (openai)", "40.0 ms", "first token at 12.5 ms", "finish tool_calls", "status 200"} {
		if !strings.Contains(title, s) {
			t.Errorf("the call's title %q does not say %q", title, s)
		}
	}
}

// TestWaterfallCapWithCalls: model calls count towards maxBars; those past
// it are counted apart from the records left out.
func TestWaterfallCapWithCalls(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	var recs []record.Record
	for i := range 10 {
		s := &record.ModelSummary{}
		for j := range record.MaxModelCalls {
			s.Add(record.ModelCall{At: t0.Add(time.Duration(i*100+j) * time.Millisecond), Ms: 1, Model: "m"})
		}
		recs = append(recs, record.Record{ID: "t." + string(rune('a'+i)), Side: record.Ingress, State: record.Delivered,
			Created: t0.Add(time.Duration(i*100) * time.Millisecond), Latency: 90, Models: s})
	}
	w := newWaterfall(records.TraceTree(recs))
	// 10 × 65 bars: the first 7 receipts and their calls (455), then the
	// 8th receipt and 44 of its calls.
	if len(w.Rows) != maxBars || w.Dropped != 2 || w.DroppedCalls != 10*record.MaxModelCalls-(7*record.MaxModelCalls+44) ||
		w.Calls != 7*record.MaxModelCalls+44 {
		t.Errorf("%d bars (%d calls); %d records and %d calls left out", len(w.Rows), w.Calls, w.Dropped, w.DroppedCalls)
	}
}

// TestSpendTable: a trace's receipts' model summaries add up per agent, in
// the order of their first receipt, and for the chain, whose budget is
// shown; a trace without model calls has no table.
func TestSpendTable(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	recs := []record.Record{
		{ID: "t.1", Side: record.Ingress, To: "planner", Created: t0,
			Models: &record.ModelSummary{Calls: 4, JournalHits: 1, Refused: 1, InputTokens: 500, OutputTokens: 100, CostUSD: 0.00036,
				Budget: &record.BudgetView{Tokens: 200000, CostUSD: 2}}},
		{ID: "t.2", Side: record.Ingress, To: "writer", Created: t0.Add(time.Second),
			Models: &record.ModelSummary{Calls: 2, UnknownUsage: 1, Unpriced: 1, InputTokens: 10, OutputTokens: 5}},
		{ID: "t.3", Side: record.Ingress, To: "planner", Created: t0.Add(2 * time.Second),
			Models: &record.ModelSummary{Calls: 1, InputTokens: 250, OutputTokens: 50, CostUSD: 0.00018}},
	}
	st := newSpendTable(recs)
	if st == nil || len(st.Rows) != 3 {
		t.Fatalf("spend table %+v", st)
	}
	p, w, c := st.Rows[0], st.Rows[1], st.Rows[2]
	if p.Name != "planner" || p.Chain || p.Calls != 5 || p.JournalHits != 1 || p.Refused != 1 || p.InputTokens != 750 || p.OutputTokens != 150 ||
		usd(p.CostUSD) != "$0.000540" {
		t.Errorf("planner %+v", p)
	}
	if w.Name != "writer" || w.UnknownUsage != 1 || w.Unpriced != 1 || usd(w.CostUSD) != "$0" {
		t.Errorf("writer %+v", w)
	}
	if !c.Chain || c.Calls != 7 || c.InputTokens != 760 || c.OutputTokens != 155 || c.JournalHits != 1 || c.Refused != 1 ||
		c.UnknownUsage != 1 || c.Unpriced != 1 {
		t.Errorf("chain %+v", c)
	}
	if st.Budget != "200000 tokens, $2.00" {
		t.Errorf("budget %q", st.Budget)
	}
	if newSpendTable(recs[:0]) != nil || newSpendTable([]record.Record{{ID: "t.9", Side: record.Ingress, To: "x"}}) != nil {
		t.Error("a trace without model calls has a spend table")
	}
}

// spendingStub is a Spending that answers cs, or err.
type spendingStub struct {
	cs  []ChainCost
	err error
}

func (s spendingStub) CostlyChains(_ context.Context, n int) ([]ChainCost, error) {
	return s.cs[:min(n, len(s.cs))], s.err
}

// TestOverviewCostly: the overview lists the chains that cost most, as its
// Spending gives them, each linked to its trace's page, a chain of no priced
// call as unpriced; it says so when there are none, when the store does not
// answer, and when nothing counts model calls.
func TestOverviewCostly(t *testing.T) {
	t.Parallel()
	const a, b = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
	tests := []struct {
		name     string
		spending Spending
		want     []string
	}{
		{name: "listed", spending: spendingStub{cs: []ChainCost{{TraceID: a, CostUSD: 0.0125, Tokens: 30000, Priced: true}, {TraceID: b, Tokens: 900}}},
			want: []string{`<tr class="costly" data-trace="` + a + `"><td><a href="/console/traces/` + a + `"><code>` + a +
				`</code></a></td><td class="num">$0.0125</td><td class="num">30000</td></tr>`,
				`<td class="num">unpriced</td><td class="num">900</td>`}},
		{name: "none", spending: spendingStub{}, want: []string{"No model calls in the last hour."}},
		{name: "store down", spending: spendingStub{err: errors.New("redis: connection refused")},
			want: []string{"the chains' spend cannot be listed"}},
		{name: "off", want: []string{"Model calls are not counted here."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			con := New(Options{Config: &config.Config{Agent: "planner"}, Log: slog.New(slog.DiscardHandler),
				Book: record.NewBook(state.NewMemory(config.Memory{}), time.Hour, slog.New(slog.DiscardHandler)), Spending: tc.spending})
			rec := httptest.NewRecorder()
			con.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			page := rec.Body.String()
			if rec.Code != http.StatusOK {
				t.Fatalf("%d:\n%s", rec.Code, page)
			}
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("the overview does not show %s:\n%s", w, page)
				}
			}
			if i, j := strings.Index(page, a), strings.Index(page, b); tc.name == "listed" && !(i >= 0 && i < j) {
				t.Errorf("the costliest chain is not listed first")
			}
		})
	}
}

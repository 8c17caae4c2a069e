package middleware

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batonproxy/baton/trust"
)

func TestParseChainBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want ChainBudget
		err  string
	}{
		{in: "tokens=200000, cost_usd=2.5", want: ChainBudget{Tokens: 200000, CostNano: 2_500_000_000}},
		{in: "cost_usd=0.001", want: ChainBudget{CostNano: 1_000_000}},
		{in: "tokens=7,future=1", want: ChainBudget{Tokens: 7}},
		{in: "tokens=1, tokens=9", want: ChainBudget{Tokens: 9}},
		{in: "", err: "empty"},
		{in: "tokens", err: "not name=value"},
		{in: "tokens=-1", err: "tokens must be"},
		{in: "tokens=2.5", err: "tokens must be"},
		{in: "tokens=1000000000001", err: "tokens must be"},
		{in: "cost_usd=0", err: "cost_usd must be"},
		{in: "cost_usd=1e3", err: "cost_usd must be"},
		{in: "cost_usd=NaN", err: "cost_usd must be"},
		{in: "cost_usd=1000001", err: "cost_usd must be"},
		{in: "other=1", err: "names neither"},
		{in: `tokens=5, chain="0123456789abcdef0123456789abcdef"`, want: ChainBudget{Tokens: 5, Chain: "0123456789abcdef0123456789abcdef"}},
		{in: `tokens=5, chain=0123456789abcdef0123456789abcdef`, err: "chain must be"},
		{in: `tokens=5, chain="0123"`, err: "chain must be"},
	} {
		got, err := ParseChainBudget(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want an error with %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, b := range []ChainBudget{{Tokens: 5}, {CostNano: 2_500_000_000}, {Tokens: 10, CostNano: 1_234_000_000},
		{Tokens: 7, Chain: "ffffffffffffffffffffffffffffffff"}} {
		if got, err := ParseChainBudget(b.String()); err != nil || got != b {
			t.Errorf("%+v renders %q, which reads back as %+v, %v", b, b.String(), got, err)
		}
	}
	// A fraction of a tenth of a cent is rounded up, never dropped.
	if s := (ChainBudget{CostNano: 1}).String(); s != "cost_usd=0.001" {
		t.Errorf("1 nano-dollar renders %q", s)
	}
	if m := (ChainBudget{Tokens: 10}).Min(ChainBudget{Tokens: 5, CostNano: 9}); m != (ChainBudget{Tokens: 5, CostNano: 9}) {
		t.Errorf("Min = %+v", m)
	}
}

func FuzzParseChainBudget(f *testing.F) {
	for _, s := range []string{"tokens=200000, cost_usd=2.5", "cost_usd=0.001", "tokens=1,x=y", "", "=", "cost_usd=1e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseChainBudget(s)
		if err != nil {
			return
		}
		if !b.Set() || b.Tokens < 0 || b.CostNano < 0 || b.Tokens > maxBudgetTokens || b.CostNano > maxBudgetCostNano {
			t.Fatalf("%q read as %+v", s, b)
		}
		again, err := ParseChainBudget(b.String())
		if err != nil || again.Tokens != b.Tokens || again.Chain != b.Chain || again.CostNano < b.CostNano || again.CostNano-b.CostNano >= 1_000_000 {
			t.Fatalf("%q read as %+v renders %q, read back as %+v, %v", s, b, b.String(), again, err)
		}
	})
}

// TestChainBudgets: the budget a request's chain runs under, from the
// edge, a Baton's header, or a caller's header where its edge takes it.
func TestChainBudgets(t *testing.T) {
	t.Parallel()
	edges := map[string]struct {
		b          ChainBudget
		fromHeader bool
	}{
		"web":     {ChainBudget{Tokens: 1000}, true},
		"kiosk":   {ChainBudget{Tokens: 1000}, false},
		"planner": {},
	}
	mw := ChainBudgets(ChainBudgetOptions{Edge: func(from string) (ChainBudget, bool) {
		e := edges[from]
		return e.b, e.fromHeader
	}})
	bearer := &trust.Caller{Edge: "web", Via: trust.CallerBearer}
	for _, tc := range []struct {
		name   string
		from   string
		caller *trust.Caller
		header string // a Baton's header, or the caller's as Callers kept it
		want   ChainBudget
		note   string
		status int
	}{
		{name: "a Baton's budget carried on", from: "planner", header: "tokens=500", want: ChainBudget{Tokens: 500}},
		{name: "no budget anywhere", from: "planner"},
		{name: "the edge's budget for a caller", from: "kiosk", caller: &trust.Caller{Edge: "kiosk", Via: trust.CallerBearer},
			want: ChainBudget{Tokens: 1000}},
		{name: "a caller's header its edge takes: the tighter wins", from: "web", caller: bearer, header: "tokens=5000, cost_usd=1",
			want: ChainBudget{Tokens: 1000, CostNano: 1e9}},
		{name: "a caller's header its edge does not take", from: "kiosk", caller: &trust.Caller{Edge: "kiosk", Via: trust.CallerBearer},
			header: "tokens=5", want: ChainBudget{Tokens: 1000}, note: "takes no budget from its callers"},
		{name: "an anonymous caller's header", from: "web", caller: &trust.Caller{Edge: "web", Via: trust.CallerAnonymous},
			header: "tokens=5", want: ChainBudget{Tokens: 1000}, note: "no credential"},
		{name: "a malformed header from a Baton", from: "planner", header: "tokens=lots", status: http.StatusBadRequest},
		{name: "a malformed header a caller's edge takes", from: "web", caller: bearer, header: "cost_usd=-1", status: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got *Info
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = info(r) }))
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			in := &Info{Side: Ingress, Agent: "analyst", From: tc.from, Caller: tc.caller}
			if tc.caller != nil {
				in.budgetHeader = tc.header
			} else if tc.header != "" {
				r.Header.Set(HeaderChainBudget, tc.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r.WithContext(WithInfo(r.Context(), in)))
			if tc.status != 0 {
				if w.Code != tc.status || got != nil {
					t.Fatalf("status %d, want %d", w.Code, tc.status)
				}
				return
			}
			if got == nil || got.ChainBudget != tc.want || !strings.Contains(got.BudgetNote, tc.note) || (tc.note == "") != (got.BudgetNote == "") {
				t.Fatalf("budget %+v, note %q; want %+v, a note with %q", got.ChainBudget, got.BudgetNote, tc.want, tc.note)
			}
		})
	}
}

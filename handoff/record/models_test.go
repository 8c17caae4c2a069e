package record

import (
	"reflect"
	"testing"
)

// TestModelSummaryAdd: each call counts once, in what it was: a journal
// hit, a refusal, a call whose usage went unreported (its tokens and cost
// unknown, whatever its model's price), or a call to a model without a
// price (its tokens counted, its cost unknown).
func TestModelSummaryAdd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		calls []ModelCall
		want  ModelSummary
	}{
		{
			name:  "reported and priced",
			calls: []ModelCall{{InputTokens: 120, OutputTokens: 30, UsageKnown: true, Priced: true, CostUSD: 0.5}},
			want:  ModelSummary{Calls: 1, InputTokens: 120, OutputTokens: 30, CostUSD: 0.5},
		},
		{
			name:  "usage unreported, to a model with a price",
			calls: []ModelCall{{Model: "gpt-4.1-mini-2025-04-14"}},
			want:  ModelSummary{Calls: 1, UnknownUsage: 1},
		},
		{
			name:  "reported, to a model without a price",
			calls: []ModelCall{{Model: "my-finetune", InputTokens: 10, OutputTokens: 5, UsageKnown: true}},
			want:  ModelSummary{Calls: 1, Unpriced: 1, InputTokens: 10, OutputTokens: 5},
		},
		{
			name:  "a journal hit and a refusal spend nothing",
			calls: []ModelCall{{Journal: true, InputTokens: 10, UsageKnown: true}, {Refused: "chain budget"}},
			want:  ModelSummary{Calls: 2, JournalHits: 1, Refused: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s ModelSummary
			for _, c := range tc.calls {
				s.Add(c)
			}
			if n := len(s.List); n != len(tc.calls) {
				t.Errorf("the list holds %d calls, want %d", n, len(tc.calls))
			}
			s.List = nil
			if !reflect.DeepEqual(s, tc.want) {
				t.Errorf("got %+v, want %+v", s, tc.want)
			}
		})
	}
}

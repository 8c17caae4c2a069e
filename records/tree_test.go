package records_test

import (
	"strings"
	"testing"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// shape renders a tree as "id(child child)".
func shape(nodes []*records.TraceNode) string {
	var parts []string
	for _, n := range nodes {
		s := n.Record.ID
		if len(n.Children) > 0 {
			s += "(" + shape(n.Children) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestTraceTree(t *testing.T) {
	t.Parallel()
	recs := func(pairs ...string) []record.Record {
		var out []record.Record
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, record.Record{ID: pairs[i], ParentID: pairs[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		recs []record.Record
		want string
	}{
		// a's delegation record, b's receipt under it, b's two handoffs
		// under the receipt, c's receipt under the first.
		{"chain", recs("a>b", "", "b<a", "a>b", "b>c", "b<a", "b>d", "b<a", "c<b", "b>c"), "a>b(b<a(b>c(c<b) b>d))"},
		{"parent elsewhere", recs("x", "unknown", "y", "x"), "x(y)"},
		{"two roots", recs("x", "", "y", ""), "x y"},
		{"self parent", recs("x", "x"), "x"},
		{"loop", recs("x", "y", "y", "x", "z", "y"), "x(y(z))"},
	} {
		if got := shape(records.TraceTree(tc.recs)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

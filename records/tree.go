package records

import "github.com/batonproxy/baton/handoff/record"

// TraceNode is a record in its trace's tree, with the records it caused.
type TraceNode struct {
	Record   record.Record
	Children []*TraceNode
}

// TraceTree arranges a trace's records as a tree by ParentID: a receipt
// under the delegation record of its handoff, a handoff under the receipt
// of the inbound handoff its agent was handling. A record whose parent is
// not among recs is a root. Siblings keep recs' order (by creation, as
// Book.Trace gives them). Every record appears once, even when parent links
// form a loop (a tampered store): the first record of a loop becomes a
// root.
func TraceTree(recs []record.Record) []*TraceNode {
	index := make(map[string]int, len(recs))
	for i, r := range recs {
		if _, dup := index[r.ID]; !dup {
			index[r.ID] = i
		}
	}
	children := map[string][]int{}
	var roots []int
	for i, r := range recs {
		if p, ok := index[r.ParentID]; ok && r.ParentID != r.ID && p != i {
			children[r.ParentID] = append(children[r.ParentID], i)
		} else {
			roots = append(roots, i)
		}
	}
	seen := make([]bool, len(recs))
	var build func(i int) *TraceNode
	build = func(i int) *TraceNode {
		seen[i] = true
		n := &TraceNode{Record: recs[i]}
		for _, c := range children[recs[i].ID] {
			if !seen[c] {
				n.Children = append(n.Children, build(c))
			}
		}
		return n
	}
	var out []*TraceNode
	for _, i := range roots {
		if !seen[i] {
			out = append(out, build(i))
		}
	}
	for i := range recs {
		if !seen[i] {
			out = append(out, build(i))
		}
	}
	return out
}

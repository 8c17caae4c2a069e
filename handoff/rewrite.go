package handoff

import "slices"

// rewrite writes a parsed document again with some members or elements
// dropped or replaced and some members added. A container with nothing
// changed inside it is copied byte for byte; one with a change is written
// compactly (its members separated by a bare comma), its untouched children
// still copied as they were.
type rewrite struct {
	t *tape
	// ops is by node: the name node of an object member or an array
	// element's node. A nil text drops it; otherwise the text replaces it
	// whole (for a member, name and value: one or more `"name":value`).
	ops map[int][]byte
	// adds is by object node: members written after its last one.
	adds map[int][]byte
	at   []int // the nodes of ops and adds, sorted
}

func newRewrite(t *tape) *rewrite {
	return &rewrite{t: t, ops: map[int][]byte{}, adds: map[int][]byte{}}
}

func (w *rewrite) drop(node int)              { w.set(node, nil) }
func (w *rewrite) replace(node int, b []byte) { w.set(node, b) }

func (w *rewrite) set(node int, b []byte) {
	if _, ok := w.ops[node]; !ok {
		w.at = append(w.at, node)
	}
	w.ops[node] = b
}

// add appends members (`"name":value`, comma separated) to object obj.
func (w *rewrite) add(obj int, members []byte) {
	if _, ok := w.adds[obj]; !ok {
		w.at = append(w.at, obj)
	}
	if prev := w.adds[obj]; len(prev) > 0 {
		members = append(append(prev, ','), members...)
	}
	w.adds[obj] = members
}

// empty reports whether nothing is to change.
func (w *rewrite) empty() bool { return len(w.at) == 0 }

// bytes writes the whole document.
func (w *rewrite) bytes() []byte {
	slices.Sort(w.at)
	return w.write(make([]byte, 0, len(w.t.b)), 0)
}

// touched reports whether anything changes in value i or below it.
func (w *rewrite) touched(i int) bool {
	k, _ := slices.BinarySearch(w.at, i)
	return k < len(w.at) && w.at[k] < w.t.after(i)
}

func (w *rewrite) write(dst []byte, i int) []byte {
	t := w.t
	s := t.span(i)
	if !w.touched(i) {
		return append(dst, t.b[s.s:s.e]...)
	}
	n := 0
	// put writes child k: dropped, replaced, or as it was (asIs).
	put := func(k int, asIs func()) {
		text, op := w.ops[k]
		if op && text == nil {
			return
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		if op {
			dst = append(dst, text...)
			return
		}
		asIs()
	}
	if t.isObject(i) {
		dst = append(dst, '{')
		for k, end := t.first(i); k < end; k = t.after(k + 1) {
			put(k, func() {
				ks := t.span(k)
				dst = append(append(dst, t.b[ks.s:ks.e]...), ':')
				dst = w.write(dst, k+1)
			})
		}
		if add := w.adds[i]; len(add) > 0 {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, add...)
		}
		return append(dst, '}')
	}
	dst = append(dst, '[')
	for k, end := t.first(i); k < end; k = t.after(k) {
		put(k, func() { dst = w.write(dst, k) })
	}
	return append(dst, ']')
}

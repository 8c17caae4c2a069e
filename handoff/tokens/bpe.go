package tokens

// Byte-pair merging as tiktoken does it: a piece starts as its bytes, and
// the adjacent pair whose joined bytes are the token of lowest rank merges
// first (the leftmost, among equal ranks), until no pair is a token. Only
// the number of parts left matters to a count.

// heapFrom is the piece length from which merge keeps its candidate pairs
// in a heap: below it a scan of every pair per merge (O(n²)) is faster,
// and needs no allocation; above it a long piece (a run of spaces, a
// base64 blob) would take quadratic time.
const heapFrom = 128

// merge returns the number of tokens byte-pair merging makes of piece.
func (v *vocabulary) merge(piece string) int {
	if _, ok := v.rank(piece); ok || len(piece) <= 1 {
		return min(len(piece), 1)
	}
	if len(piece) >= heapFrom {
		return v.mergeHeap(piece)
	}
	return v.mergeScan(piece)
}

// pairRank is the rank of a[i:k] as a token, or noRank.
func (v *vocabulary) pairRank(piece string, i, k int) uint32 {
	if r, ok := v.rank(piece[i:k]); ok {
		return r
	}
	return noRank
}

// mergeScan merges a piece shorter than heapFrom. start[i] is where part
// i begins; rank[i] is the rank of part i joined with part i+1.
func (v *vocabulary) mergeScan(piece string) int {
	var startBuf [heapFrom + 1]int32
	var rankBuf [heapFrom]uint32
	n := len(piece) // parts
	start, rank := startBuf[:n+1], rankBuf[:n]
	for i := range start {
		start[i] = int32(i)
	}
	for i := range rank {
		rank[i] = noRank
		if i+2 <= n {
			rank[i] = v.pairRank(piece, i, i+2)
		}
	}
	for n > 1 {
		best := 0
		for i := 1; i < n-1; i++ {
			if rank[i] < rank[best] {
				best = i
			}
		}
		if rank[best] == noRank {
			break
		}
		// Part best+1 joins part best.
		copy(start[best+1:], start[best+2:n+1])
		copy(rank[best+1:], rank[best+2:n])
		n--
		start, rank = start[:n+1], rank[:n]
		rank[best] = noRank
		if best+1 < n {
			rank[best] = v.pairRank(piece, int(start[best]), int(start[best+2]))
		}
		if best > 0 {
			rank[best-1] = v.pairRank(piece, int(start[best-1]), int(start[best+1]))
		}
	}
	return n
}

// mergeHeap merges a long piece in O(n log n): the parts are a linked
// list, and the candidate pairs a min-heap by rank, then offset; a
// candidate whose part has changed since it was pushed is skipped.
func (v *vocabulary) mergeHeap(piece string) int {
	n := len(piece)
	next := make([]int32, n+1) // the offset of the next part; n ends the list
	prev := make([]int32, n+1)
	rank := make([]uint32, n+1) // the rank of the part at i joined with its next; noRank if merged away
	for i := range next {
		next[i], prev[i], rank[i] = int32(i+1), int32(i-1), noRank
	}
	pairAt := func(i int32) uint32 {
		j := next[i]
		if int(j) >= n {
			return noRank
		}
		return v.pairRank(piece, int(i), int(next[j]))
	}
	h := make(pairHeap, 0, n)
	for i := range int32(n - 1) {
		if rank[i] = pairAt(i); rank[i] != noRank {
			h = append(h, pair{rank[i], i})
		}
	}
	h.init()
	parts := n
	for len(h) > 0 {
		p := h.pop()
		if rank[p.at] != p.rank {
			continue // stale
		}
		j := next[p.at] // joins p.at
		next[p.at] = next[j]
		if int(next[j]) < n {
			prev[next[j]] = p.at
		}
		rank[j] = noRank
		parts--
		for _, i := range [2]int32{p.at, prev[p.at]} {
			if i < 0 {
				continue
			}
			if rank[i] = pairAt(i); rank[i] != noRank {
				h.push(pair{rank[i], i})
			}
		}
	}
	return parts
}

// pair is a candidate merge: the part at offset at with its next.
type pair struct {
	rank uint32
	at   int32
}

// pairHeap is a binary min-heap of pairs by rank, then offset, so that
// the leftmost of equal ranks merges first.
type pairHeap []pair

func (h pairHeap) less(a, b int) bool {
	return h[a].rank < h[b].rank || h[a].rank == h[b].rank && h[a].at < h[b].at
}

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	for i := len(*h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h.less(i, up) {
			break
		}
		(*h)[i], (*h)[up] = (*h)[up], (*h)[i]
		i = up
	}
}

func (h *pairHeap) pop() pair {
	old := *h
	top, last := old[0], len(old)-1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

func (h pairHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

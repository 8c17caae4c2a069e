package tokens

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/bits"
	"strings"
	"sync"
)

// The vocabularies, written by internal/gen.
//
//go:embed vocab/*.bpe.gz
var vocabFiles embed.FS

// noRank is the rank of bytes that are no token.
const noRank = ^uint32(0)

// vocabulary is a byte-pair encoding's tokens by rank, read from its
// embedded file on first use. Encodings that share one (p50k_base and
// p50k_edit) share its memory.
type vocabulary struct {
	file  string
	ranks int         // ranks, some with no token
	base  *vocabulary // the vocabulary this one extends; its file holds the ranks past base's

	once sync.Once
	*table
	err error
}

// load reads the vocabulary once; a broken file (a bad build) is an error
// each count reports.
func (v *vocabulary) load() error {
	v.once.Do(func() {
		var base *table
		if v.base != nil {
			if v.err = v.base.load(); v.err != nil {
				return
			}
			base = v.base.table
		}
		v.table, v.err = readVocabulary(v.file, v.ranks, base)
		if v.err != nil {
			v.err = fmt.Errorf("tokens: %s: %w", v.file, v.err)
		}
	})
	return v.err
}

// table finds the rank of a token: the tokens' bytes in rank order in one
// string, and an open-addressing hash table of their ranks. It holds a
// vocabulary in half the memory a map[string]uint32 takes, and is built
// in half the time.
type table struct {
	data   string
	end    []uint32 // where each rank's token ends in data; it starts where the rank before ends
	slots  []uint32 // rank+1 of a token whose hash leads here or to a full slot before; 0 is empty
	seed   maphash.Seed
	tokens int
}

// token returns the token of rank r, "" if r has none.
func (t *table) token(r uint32) string {
	start := uint32(0)
	if r > 0 {
		start = t.end[r-1]
	}
	return t.data[start:t.end[r]]
}

// rank returns the rank of token s.
func (t *table) rank(s string) (uint32, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(t.seed, s) & mask; ; i = (i + 1) & mask {
		r := t.slots[i]
		if r == 0 {
			return 0, false
		}
		if t.token(r-1) == s {
			return r - 1, true
		}
	}
}

// readVocabulary reads the format internal/gen writes: gzip of the count
// of ranks and the first rank the file holds (uvarints; the ranks before
// are base's), then each rank's token as its length (uvarint) and bytes,
// length 0 where a rank has no token.
func readVocabulary(file string, ranks int, base *table) (*table, error) {
	f, err := vocabFiles.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(bufio.NewReader(zr)); err != nil {
		return nil, err
	}
	data := raw.Bytes()
	from := 0
	if base != nil {
		from = len(base.end)
	}
	n, w := binary.Uvarint(data)
	first, w2 := binary.Uvarint(data[max(w, 0):])
	if w <= 0 || w2 <= 0 || n != uint64(ranks) || first != uint64(from) {
		return nil, fmt.Errorf("holds ranks %d to %d, want %d to %d", first, int64(n)-1, from, ranks-1)
	}
	data = data[w+w2:]
	t := &table{end: make([]uint32, ranks), seed: maphash.MakeSeed()}
	var all strings.Builder
	all.Grow(len(data))
	if base != nil {
		all.WriteString(base.data)
		copy(t.end, base.end)
		t.tokens = base.tokens
	}
	for r := from; r < ranks; r++ {
		l, w := binary.Uvarint(data)
		if w <= 0 || l > uint64(len(data)-w) {
			return nil, fmt.Errorf("rank %d: %w", r, io.ErrUnexpectedEOF)
		}
		all.Write(data[w : w+int(l)])
		t.end[r] = uint32(all.Len())
		if l > 0 {
			t.tokens++
		}
		data = data[w+int(l):]
	}
	if len(data) != 0 {
		return nil, errors.New("trailing bytes")
	}
	t.data = all.String()
	// Fewer than half the slots full keeps probes short.
	t.slots = make([]uint32, 1<<bits.Len(uint(2*t.tokens)))
	mask := uint64(len(t.slots) - 1)
	for r := range uint32(ranks) {
		tok := t.token(r)
		if tok == "" {
			continue
		}
		i := maphash.String(t.seed, tok) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = r + 1
	}
	return t, nil
}

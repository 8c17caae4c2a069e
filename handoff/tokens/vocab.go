package tokens

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
	ranks int // the file's ranks, some with no token

	once sync.Once
	rank map[string]uint32 // a token's rank; its keys share one string
	err  error
}

// load reads the vocabulary once; a broken file (a bad build) is an error
// each count reports.
func (v *vocabulary) load() error {
	v.once.Do(func() {
		v.rank, v.err = readVocabulary(v.file, v.ranks)
		if v.err != nil {
			v.err = fmt.Errorf("tokens: %s: %w", v.file, v.err)
		}
	})
	return v.err
}

// readVocabulary reads the format internal/gen writes: gzip of the count
// of ranks (uvarint), then each rank's token as its length (uvarint) and
// bytes, length 0 where a rank has no token.
func readVocabulary(file string, ranks int) (map[string]uint32, error) {
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
	// The map's keys are slices of one string, the file's bytes.
	data := raw.String()
	n, w := uvarint(data)
	if w <= 0 || n != uint64(ranks) {
		return nil, fmt.Errorf("holds %d ranks, want %d", n, ranks)
	}
	data = data[w:]
	rank := make(map[string]uint32, ranks)
	for r := range ranks {
		l, w := uvarint(data)
		if w <= 0 || l > uint64(len(data)-w) {
			return nil, fmt.Errorf("rank %d: %w", r, io.ErrUnexpectedEOF)
		}
		if l > 0 {
			rank[data[w:w+int(l)]] = uint32(r)
		}
		data = data[w+int(l):]
	}
	if len(data) != 0 {
		return nil, errors.New("trailing bytes")
	}
	return rank, nil
}

// uvarint is binary.Uvarint of a string.
func uvarint(s string) (uint64, int) {
	var x uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		b := s[i]
		if b < 0x80 {
			return x | uint64(b)<<(7*i), i + 1
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
	return 0, 0
}

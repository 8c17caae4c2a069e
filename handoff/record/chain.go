package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batonproxy/baton/state"
)

// Entry is one link of a trace's hash chain: a snapshot of a record (without
// its checkpoint body) and the digest of the link before it. The digest of an
// entry is the sha-256 of its stored bytes, and the chain's tail names the
// last entry as "seq:digest" (state.ChainTail), so an edited entry breaks the
// link after it, and a deleted last entry leaves a tail that names it.
type Entry struct {
	Seq    int       `json:"seq"`
	Prev   string    `json:"prev"`
	At     time.Time `json:"at"`
	Record Record    `json:"record"`
}

// encodeEntry returns the stored bytes of the entry after tail for r
// (encoded without its checkpoint), its number, and the new tail. The bytes
// are those json.Marshal(Entry{...}) gives.
func encodeEntry(tail string, r *Record, now time.Time) (entry []byte, seqNo int, next string) {
	seq, prev := parseTail(tail)
	b := make([]byte, 0, 1024)
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, int64(seq+1), 10)
	b = append(b, `,"prev":"`...)
	b = append(b, prev...)
	b = append(b, `","at":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","record":`...)
	snap := *r
	snap.Request = nil
	b = snap.AppendJSON(b)
	b = append(b, '}')
	var tailBuf [20 + 1 + 2*sha256.Size]byte
	return b, seq + 1, string(state.AppendChainTail(tailBuf[:0], int64(seq+1), b))
}

// parseTail splits "seq:digest"; an empty tail is seq 0 with no digest.
func parseTail(tail string) (int, string) {
	s, d, ok := strings.Cut(tail, ":")
	if !ok {
		return 0, ""
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, ""
	}
	return n, d
}

// ChainError lists what Verify found wrong with a chain.
type ChainError struct {
	Problems []string
}

func (e *ChainError) Error() string {
	return "record: hash chain broken: " + strings.Join(e.Problems, "; ")
}

// ErrEmptyChain reports a trace with no entries.
var ErrEmptyChain = errors.New("record: no records for this trace")

// Verify checks a trace's stored entries against each other and against the
// chain's tail. It returns nil for an intact chain and a *ChainError naming
// every break otherwise.
func Verify(entries [][]byte, tail string) error {
	if len(entries) == 0 {
		if tail != "" {
			return &ChainError{Problems: []string{"the tail names entry " + tail + " but the chain is empty: entries were deleted"}}
		}
		return ErrEmptyChain
	}
	var problems []string
	prev, prevSeq := "", 0
	for i, b := range entries {
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil {
			problems = append(problems, fmt.Sprintf("entry %d is not a record entry: %v", i+1, err))
			prev, prevSeq = digest(b), prevSeq+1
			continue
		}
		if e.Prev != prev {
			problems = append(problems, fmt.Sprintf("entry %d (record %s) does not follow entry %d: an entry was edited or deleted",
				e.Seq, e.Record.ID, prevSeq))
		}
		if e.Seq != prevSeq+1 {
			problems = append(problems, fmt.Sprintf("entry %d follows entry %d: entries are missing", e.Seq, prevSeq))
		}
		prev, prevSeq = digest(b), e.Seq
	}
	if want := strconv.Itoa(prevSeq) + ":" + prev; tail != want {
		if n, d := parseTail(tail); d == "" && n > prevSeq {
			problems = append(problems, fmt.Sprintf("the chain ends at entry %d but entry %d was written: the last entries were deleted", prevSeq, n))
		} else {
			problems = append(problems, fmt.Sprintf("the chain ends at %s but its tail is %s: the last entries were edited or deleted", want, tail))
		}
	}
	if problems != nil {
		return &ChainError{Problems: problems}
	}
	return nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Decode parses stored entries, skipping what does not parse.
func Decode(entries [][]byte) []Entry {
	out := make([]Entry, 0, len(entries))
	for _, b := range entries {
		var e Entry
		if json.Unmarshal(b, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

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
)

// Entry is one link of a trace's hash chain: the digest of the link before
// it, and either a snapshot of a record (its first entry, without its
// checkpoint body) or an Update of one (every later entry). The digest of an
// entry is the sha-256 of its stored bytes, and the chain's tail names the
// last entry as "seq:digest" (state.ChainTail), so an edited entry breaks the
// link after it, and a deleted last entry leaves a tail that names it.
type Entry struct {
	Seq    int       `json:"seq"`
	Prev   string    `json:"prev"`
	At     time.Time `json:"at"`
	Record *Record   `json:"record,omitempty"`
	Update *Update   `json:"update,omitempty"`
}

// RecordID is the id of the record the entry is about.
func (e *Entry) RecordID() string {
	switch {
	case e.Record != nil:
		return e.Record.ID
	case e.Update != nil:
		return e.Update.ID
	}
	return ""
}

// State is the state the entry puts its record in.
func (e *Entry) State() State {
	switch {
	case e.Record != nil:
		return e.Record.State
	case e.Update != nil:
		return e.Update.State
	}
	return ""
}

// encodeEntry returns the stored bytes of the entry after tail for r
// (encoded without its checkpoint, and as an Update once a snapshot of it is
// stored) and its number. The bytes are those json.Marshal(Entry{...})
// gives.
func encodeEntry(tail string, r *Record, now time.Time) (entry []byte, seqNo int) {
	seq, prev := parseTail(tail)
	b := make([]byte, 0, r.entrySize())
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, int64(seq+1), 10)
	b = append(b, `,"prev":"`...)
	b = append(b, prev...)
	b = append(b, `","at":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	if r.stored {
		b = append(b, `","update":`...)
		b = r.appendUpdateJSON(b)
	} else {
		b = append(b, `","record":`...)
		snap := *r
		snap.Request = nil
		b = snap.AppendJSON(b)
	}
	return append(b, '}'), seq + 1
}

// entrySize is about the size of r's next entry, exact but for escapes and
// the widths of numbers and times, so that a stored entry's buffer neither
// grows nor holds much unused: the memory store keeps it as it is.
func (r *Record) entrySize() int {
	// The members always there, with the usual widest numbers, times and
	// prev digest; then the strings, and the optional members when present.
	const snapshot, update, envelope = 407, 237, 156
	n := len(r.ID) + len(r.State) + opt(r.Status != 0, `,"status":200`) + opt(r.Outcome != "", `,"outcome":""`) +
		len(r.Outcome) + opt(r.Error != "", `,"error":""`) + len(r.Error) +
		opt(r.StoppedAt != "", `,"stopped_at":""`) + len(r.StoppedAt) + opt(r.ResolvedBy != "", `,"resolved_by":""`) + len(r.ResolvedBy)
	if a := r.Approval; a != nil {
		n += len(`,"approval":{"gate":"","expires":"2006-01-02T15:04:05.999999999Z07:00","decision":"","by":"","at":"2006-01-02T15:04:05.999999999Z07:00","reason":""}`) +
			len(a.Gate) + len(a.Decision) + len(a.By) + len(a.Reason)
	}
	if r.stored {
		return update + n
	}
	n += snapshot + len(r.TraceID) + len(r.SpanID) + len(r.Side) + len(r.From) + len(r.To) + len(r.Method) +
		len(r.Target) + len(r.RequestDigest) +
		opt(r.ParentID != "", `,"parent_id":""`) + len(r.ParentID) + opt(r.Key != "", `,"idempotency_key":""`) + len(r.Key) +
		opt(r.Grant != "", `,"grant":""`) + len(r.Grant) + opt(r.SenderKeyID != "", `,"sender_key_id":""`) + len(r.SenderKeyID) +
		opt(r.Caller != "", `,"caller":""`) + len(r.Caller) +
		opt(len(r.Trust) != 0, `,"trust":[]`) + opt(r.KeySource != "", `,"key_source":""`) + len(r.KeySource) +
		opt(r.Position != 0, `,"position":10`) + opt(r.Correlation != "", `,"correlation":""`) + len(r.Correlation) +
		opt(r.CorrelationEvidence != "", `,"correlation_evidence":""`) + len(r.CorrelationEvidence) +
		opt(r.Call != "", `,"call":""`) + len(r.Call) + opt(r.Compensates != "", `,"compensates":""`) + len(r.Compensates) +
		opt(len(r.Effects) != 0, `,"side_effects":[]`)
	for _, e := range r.Effects {
		n += len(e) + 3
	}
	for _, t := range r.Trust {
		n += len(t) + len(`"\u003c",`) // an untrusted label's "<-" is escaped
	}
	if e := r.Envelope; e != nil {
		n += envelope + len(e.Digest) + len(e.Version) + len(e.TaskID) + len(e.Intent)
	}
	if s := r.Shaping; s != nil {
		n += len(`,"shaping":{"tokens":,"tokens_before":,"max_tokens":,"tokenizer":"","dropped":[],"trimmed":[]}`) + 30 + len(s.Tokenizer)
		for _, p := range append(s.Dropped, s.Trimmed...) {
			n += len(p) + 3
		}
	}
	if m := r.Models; m != nil {
		n += len(`,"models":`) + m.encodedSize()
	}
	if j := r.Journal; j != nil {
		n += len(`,"journal":{"hits":,"misses":,"journaled":,"saved_bytes":,"saved_tokens":,"skipped":[]}`) + 40
		for _, s := range j.Skipped {
			n += len(s) + 3
		}
	}
	return n
}

// opt is the length of member when present.
func opt(present bool, member string) int {
	if present {
		return len(member)
	}
	return 0
}

// Merge returns the records of a chain's entries, each in its latest state
// (its snapshot with the updates after it applied), in order of their first
// entry. An update whose snapshot is gone (the chain was edited, or expired
// and began again) yields a record holding the update's fields only.
func Merge(entries []Entry) []Record {
	var out []Record
	at := map[string]int{}
	for i := range entries {
		e := &entries[i]
		id := e.RecordID()
		if id == "" {
			continue
		}
		j, seen := at[id]
		if !seen {
			j = len(out)
			at[id] = j
			out = append(out, Record{ID: id, TraceID: TraceOf(id)})
		}
		if e.Record != nil {
			out[j] = *e.Record
			continue
		}
		e.Update.apply(&out[j])
	}
	return out
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
				e.Seq, e.RecordID(), prevSeq))
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

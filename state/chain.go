package state

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// Link is one chained append: Entry becomes entry number Seq of the chain
// at Log, only if the chain has no entry Seq yet. Entries are never
// replaced, so a caller that numbers its entries from the tail it last
// learned (as record.Book does) extends the chain only if nobody extended it
// since; otherwise the link is refused and the result names the tail to
// build on. A chain lives under one key, so it needs one Redis Cluster hash
// slot however long it grows.
//
// Attach are values kept with the chain under their names, for the chain's
// lifetime (a record's checkpoint). They are written whether or not the link
// lands, so they must be right either way: values that belong to one record,
// named after it. TTL applies to the whole chain and is refreshed by every
// batch of links (0: the chain keeps the TTL it had). The store may keep
// Entry's and the attached bytes as they are (the memory store does, to
// spare a copy of every record): the caller must not change them afterwards.
type Link struct {
	Log    string
	Seq    int64
	Entry  []byte
	Attach []KV
	TTL    time.Duration
}

// KV is a key (or an attached value's name) and its value.
type KV struct {
	Key string
	Val []byte
}

// LinkResult is the outcome of one Link: OK, or, when entry Seq was taken,
// the chain's current tail (the caller rebuilds its entry on that tail and
// tries again). A link that follows a refused link of the same chain in one
// batch is refused too.
type LinkResult struct {
	OK   bool
	Tail string
	Err  error
}

// Chain is a chain as stored: its entries in order and its tail, the
// ChainTail of the last entry. A chain that does not exist is empty with no
// tail. When an entry was deleted behind the store's back, Entries leaves it
// out; when it was the last one, Tail still names its number (with no
// digest), so that the deletion shows.
type Chain struct {
	Entries [][]byte
	Tail    string
}

// ChainTail names entry seq of a chain, whose bytes are entry, as
// "seq:digest" with the entry's sha-256 in hex. A chain's tail is the
// ChainTail of its last entry; the store derives it from the entry, so a
// tail can never disagree with what is stored.
func ChainTail(seq int64, entry []byte) string {
	var buf [20 + 1 + 2*sha256.Size]byte
	return string(AppendChainTail(buf[:0], seq, entry))
}

// AppendChainTail appends ChainTail(seq, entry) to dst.
func AppendChainTail(dst []byte, seq int64, entry []byte) []byte {
	sum := sha256.Sum256(entry)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, ':')
	return hex.AppendEncode(dst, sum[:])
}

// batchTTLs is the TTL each chain of a batch is given: the longest its links
// ask for. When every link asks for the same (a Book's all do), no map is
// built.
type batchTTLs struct {
	same  time.Duration            // every link's TTL, when byLog is nil
	byLog map[string]time.Duration // chains whose links all ask for none are left out
}

func chainTTLs(links []Link) batchTTLs {
	if len(links) == 0 {
		return batchTTLs{}
	}
	same := links[0].TTL
	for _, l := range links[1:] {
		if l.TTL != same {
			same = -1
			break
		}
	}
	if same >= 0 {
		return batchTTLs{same: same}
	}
	t := batchTTLs{byLog: make(map[string]time.Duration, 1)}
	for _, l := range links {
		if l.TTL > 0 {
			t.byLog[l.Log] = max(t.byLog[l.Log], l.TTL)
		}
	}
	return t
}

// of returns the TTL of the chain at log, false when it is given none.
func (t batchTTLs) of(log string) (time.Duration, bool) {
	if t.byLog == nil {
		return t.same, t.same > 0
	}
	ttl, ok := t.byLog[log]
	return ttl, ok
}

// entryField names entry seq in a Redis chain's hash, writtenField the marker
// written with it (so that a deleted last entry leaves a trace), and
// attachedField an attached value.
func entryField(seq int64) string { return "e:" + strconv.FormatInt(seq, 10) }

func writtenField(seq int64) string { return "m:" + strconv.FormatInt(seq, 10) }

func attachedField(name string) string { return "a:" + name }

// ClaimOp is one claim of ClaimMany.
type ClaimOp struct {
	Key string
	Val []byte
	TTL time.Duration
}

// ClaimResult is the outcome of one ClaimOp: OK, or the current value.
type ClaimResult struct {
	OK  bool
	Cur []byte
}

package state

import (
	"strconv"
	"time"
)

// Link is one chained append: Entry becomes entry number Seq of the chain
// at Log, and Tail (the caller's name for that entry) the chain's tail, only
// if Seq follows the chain's last entry. A store checks that in the way it
// can do atomically and cheaply: the memory store compares Prev with the
// chain's tail, Redis claims entry Seq (it lands only if no entry Seq is
// there yet, and entries are never replaced). For a caller that numbers its
// entries from the tail it last learned (as record.Book does) the two are
// the same check. A chain lives under one key, so it needs one Redis Cluster
// hash slot however long it grows.
//
// Attach are values kept with the chain under their names, for the chain's
// lifetime (a record's checkpoint). They are written whether or not the link
// lands, so they must be right either way: values that belong to one record,
// named after it. TTL applies to the whole chain and is refreshed by every
// link (0: the chain keeps the TTL it had). The store may keep Entry's and
// the attached bytes as they are (the memory store does, to spare a copy of
// every record): the caller must not change them afterwards.
type Link struct {
	Log    string
	Seq    int64
	Prev   string
	Tail   string
	Entry  []byte
	Attach []KV
	TTL    time.Duration
}

// KV is a key (or an attached value's name) and its value.
type KV struct {
	Key string
	Val []byte
}

// LinkResult is the outcome of one Link: OK, or the chain's current tail
// when the link did not follow it (the caller rebuilds its entry on that
// tail and tries again). A link that follows a refused link of the same
// chain in one batch is refused too.
type LinkResult struct {
	OK   bool
	Tail string
	Err  error
}

// Chain is a chain as stored: its entries in order and its tail (the Tail
// of the last link that landed). A chain that does not exist is empty with
// no tail.
type Chain struct {
	Entries [][]byte
	Tail    string
}

// entryField and tailField name entry seq and the tail after it in a Redis
// chain's hash; attachedField names an attached value.
func entryField(seq int64) string { return "e:" + strconv.FormatInt(seq, 10) }

func tailField(seq int64) string { return "t:" + strconv.FormatInt(seq, 10) }

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

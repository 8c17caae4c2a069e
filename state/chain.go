package state

import "time"

// Link is one chained append: Entry goes at the end of the log at Log only
// if the log's tail (kept at Log+":tail") still equals Prev ("" for a log
// that does not exist yet); Tail becomes the new tail; and every Set is
// written in the same atomic step. Keys of one Link must share one Redis
// Cluster hash tag. TTL applies to the log, its tail and the Sets. The store
// may keep Entry's and the Sets' bytes as they are (the memory store does, to
// spare a copy of every record): the caller must not change them afterwards.
type Link struct {
	Log   string
	Prev  string
	Tail  string
	Entry []byte
	Sets  []KV
	TTL   time.Duration
}

// KV is a key and its value.
type KV struct {
	Key string
	Val []byte
}

// LinkResult is the outcome of one Link: OK, or the log's current tail when
// Prev did not match (the caller rebuilds its entry on that tail and tries
// again).
type LinkResult struct {
	OK   bool
	Tail string
	Err  error
}

func tailKey(log string) string { return log + ":tail" }

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

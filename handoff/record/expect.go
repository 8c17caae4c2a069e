package record

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Baton that receives a handoff from a peer Baton writes its records to a
// trace whose chain the peer has written to already, in the store they
// share. A Book that has not linked to the trace yet would number its first
// entry 1, find the number taken, read the chain to learn its tail and link
// again. It reads the tail first instead, in the flusher, for all the
// batch's records that follow a peer in one round trip: one command fewer
// for a receipt, and for the record of a handoff the agent makes in turn,
// written before that handoff is sent, two round trips on the request path
// instead of three (the refused link carried the checkpoint). The read is
// made when the record is about to be linked, not when the peer's handoff
// arrives: by then the sender's outcome has mostly landed, which a tail
// read earlier would race.
//
// The tail is only ever read from the store, never taken from what a peer
// says: an entry's number and the tail it follows are the store's to tell.
// A peer whose traces are not in this Book's store (its own Redis, its own
// prefix) is read for once in reprobeEvery records after a read found
// nothing, so that such a deployment pays the read on one record in that
// many.

// reprobeEvery is how many records of a peer's traces are written without
// reading the tail first after a read found none of the trace's entries.
const reprobeEvery = 32

// maxProbePeers bounds the peers whose reads are counted: beyond it the
// counts start over (a miss costs a round trip, never correctness).
const maxProbePeers = 1024

// FollowsPeer marks rec as a record of a trace that came from peer, whose
// Baton recorded the handoff first (a receipt, or the record of a handoff
// made while handling one): a write of it reads the trace's tail before
// linking when the Book has not linked to the trace.
func (rec *Record) FollowsPeer(peer string) { rec.peer = peer }

// probes counts, per peer, how the last reads of its traces' tails went.
type probes struct {
	mu    sync.Mutex
	peers map[string]peerProbes
}

type peerProbes struct {
	misses  uint32 // reads in a row that found nothing
	skipped uint32 // writes not read for since the last miss
}

// due reports whether a write of one of peer's traces should read the tail
// first.
func (p *probes) due(peer string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.peers[peer]
	if !ok || s.misses == 0 {
		return true
	}
	if s.skipped++; s.skipped >= reprobeEvery {
		s.skipped = 0
	}
	p.peers[peer] = s
	return s.skipped == 0
}

// found notes whether a read of one of peer's traces found its chain.
func (p *probes) found(peer string, found bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.peers == nil || len(p.peers) >= maxProbePeers {
		p.peers = map[string]peerProbes{}
	}
	s := p.peers[peer]
	if found {
		s.misses = 0
	} else {
		s.misses++
	}
	p.peers[peer] = s
}

// readTails reads, for the records of recs that follow a peer (FollowsPeer)
// in traces this Book has not linked to, the traces' tails from the store,
// all in one round trip. A failed read leaves the writes to link as they
// would have.
func (b *Book) readTails(ctx context.Context, recs []*Record) {
	now := time.Now()
	var logs []string
	var read []*Record // the record each log is read for
	for _, r := range recs {
		if r.peer == "" || r.stored || b.tails.get(r.TraceID, now) != "" || b.prefetchedTail(r, now) {
			continue
		}
		log := chainKey(r.TraceID)
		if slices.Contains(logs, log) || !b.probes.due(r.peer) {
			continue
		}
		logs, read = append(logs, log), append(read, r)
	}
	if len(logs) == 0 {
		return
	}
	tails, err := b.store.ChainTails(ctx, logs)
	if err != nil {
		return
	}
	for i, r := range read {
		b.probes.found(r.peer, tails[i] != "")
		if tails[i] != "" {
			b.tails.learn(r.TraceID, tails[i], now)
		}
	}
}

// learn sets trace's tail to one read from the store, unless the cache
// holds a later one (this Book's own writes since the read was sent).
func (c *tailCache) learn(trace, tail string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[trace]; ok && tailSeq(t.tail) >= tailSeq(tail) {
		return
	}
	if len(c.m) >= tailCacheSize {
		clear(c.m)
	}
	t := c.m[trace]
	t.tail, t.at = tail, now
	c.m[trace] = t
}

// tailSeq is the entry number a tail ("seq:digest") names, 0 for none.
func tailSeq(tail string) int64 {
	n, _, _ := strings.Cut(tail, ":")
	seq, _ := strconv.ParseInt(n, 10, 64)
	return seq
}

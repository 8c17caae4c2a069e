package middleware

import (
	"encoding/binary"
	"errors"
	"net/http"
	"sort"

	"github.com/batonproxy/baton/state"
)

// A dedupe entry in the store is a small binary record:
//
//	version(1) state(1) fingerprint(32) then
//	  pending:       owner(16) holder(16)
//	  complete:      status(uvarint) nheaders(uvarint) {klen k vlen v}… body…
//	  not retained:  status(uvarint)
//
// Binary keeps the hot path free of JSON encoding, and the owner bytes make
// a pending claim unique to the request holding it, so that only it can
// renew, complete or release it. The holder bytes name the process holding
// it (state.Holder, dedupe_claim.go); a pending entry without them (written
// before holders were named) is free only when its lease lapses.
const entryVersion = 1

type entryState byte

const (
	statePending     entryState = 'p'
	stateComplete    entryState = 'c'
	stateNotRetained entryState = 't'
)

type entry struct {
	state     entryState
	fp        [32]byte
	holder    state.HolderID // pending: the process holding the claim
	hasHolder bool
	status    int
	headers   [][2]string
	body      []byte
}

var errBadEntry = errors.New("dedupe: malformed window entry")

func encodePending(fp [32]byte, holder state.HolderID) []byte {
	b := make([]byte, 0, 2+32+16+16)
	b = append(b, entryVersion, byte(statePending))
	b = append(b, fp[:]...)
	owner := newOwner()
	b = append(b, owner[:]...)
	return append(b, holder[:]...)
}

// withHolder returns the pending entry p named for holder instead.
func withHolder(p []byte, holder state.HolderID) []byte {
	next := append(make([]byte, 0, 2+32+16+16), p[:2+32+16]...)
	return append(next, holder[:]...)
}

// skipHeaders are not replayed: hop-by-hop headers, and those that describe
// the original transmission rather than the response.
var skipHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Date": true, HeaderReplayed: true,
	// An MCP session id belongs to the session that got the answer first:
	// a replay into another session must not move its client there.
	HeaderMCPSession: true,
}

// encodeComplete builds the final entry from the pending one (for its
// fingerprint) and the captured response.
func encodeComplete(pending []byte, cw *captureWriter) []byte {
	if cw.over {
		b := make([]byte, 0, 2+32+binary.MaxVarintLen64)
		b = append(b, entryVersion, byte(stateNotRetained))
		b = append(b, pending[2:34]...)
		return binary.AppendUvarint(b, uint64(cw.status))
	}
	keys := make([]string, 0, len(cw.header))
	size := 0
	for k, vs := range cw.header {
		if skipHeaders[k] {
			continue
		}
		keys = append(keys, k)
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	sort.Strings(keys)
	b := make([]byte, 0, 2+32+16+size+cw.body.Len())
	b = append(b, entryVersion, byte(stateComplete))
	b = append(b, pending[2:34]...)
	b = binary.AppendUvarint(b, uint64(cw.status))
	n := 0
	for _, k := range keys {
		n += len(cw.header[k])
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, k := range keys {
		for _, v := range cw.header[k] {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, cw.body.Bytes()...)
}

func decodeEntry(b []byte) (entry, error) {
	var e entry
	if len(b) < 34 || b[0] != entryVersion {
		return e, errBadEntry
	}
	e.state = entryState(b[1])
	copy(e.fp[:], b[2:34])
	rest := b[34:]
	switch e.state {
	case statePending:
		if len(rest) >= 32 {
			copy(e.holder[:], rest[16:32])
			e.hasHolder = true
		}
		return e, nil
	case stateNotRetained, stateComplete:
	default:
		return e, errBadEntry
	}
	st, n := binary.Uvarint(rest)
	if n <= 0 || st < 100 || st > 999 {
		return e, errBadEntry
	}
	e.status, rest = int(st), rest[n:]
	if e.state == stateNotRetained {
		return e, nil
	}
	count, n := binary.Uvarint(rest)
	if n <= 0 || count > uint64(len(rest)) {
		return e, errBadEntry
	}
	rest = rest[n:]
	e.headers = make([][2]string, 0, count)
	for i := uint64(0); i < count; i++ {
		var k, v string
		var ok bool
		if k, rest, ok = field(rest); !ok {
			return e, errBadEntry
		}
		if v, rest, ok = field(rest); !ok {
			return e, errBadEntry
		}
		e.headers = append(e.headers, [2]string{http.CanonicalHeaderKey(k), v})
	}
	e.body = rest
	return e, nil
}

func field(b []byte) (string, []byte, bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return "", nil, false
	}
	b = b[n:]
	return string(b[:l]), b[l:], true
}

package journal

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A journal entry is one answer to one call, stored as
//
//	"bj1" uvarint(len(meta)) meta body
//
// where meta is the JSON of entryMeta and body the response body as it
// came, byte for byte. Entries are appended to their handling's log in the
// store; nothing in them is a secret of the request (digest.go below keeps
// credentials out), and the response's own cookies are not kept.

var entryMagic = []byte("bj1")

// maxEntryMeta bounds the meta a stored entry may claim to have.
const maxEntryMeta = 1 << 20

// entryMeta is what an entry says about its answer.
type entryMeta struct {
	// Digest and Occurrence say which call the answer is for: the call's
	// digest (hex), and how many calls of the handling had that digest
	// before it and took their own answers, plus one.
	Digest     string `json:"digest"`
	Occurrence int    `json:"occurrence"`
	// Destination and Method are for people reading the store (never the
	// path or query, which may carry a key).
	Destination string      `json:"destination"`
	Method      string      `json:"method"`
	Status      int         `json:"status"`
	Header      http.Header `json:"header"`
	// Length is the Content-Length of an answer to HEAD, which has no body.
	Length int64 `json:"length,omitempty"`
	// Tokens is the model usage the answer reports (modelUsage).
	Tokens int64     `json:"tokens,omitempty"`
	At     time.Time `json:"at"`
}

// entry is a decoded journal entry.
type entry struct {
	entryMeta
	body []byte
}

// callID is what an entry is found by: the call's digest and occurrence.
type callID struct {
	digest [sha256.Size]byte
	occ    int
}

// errBadEntry reports a stored entry that does not decode.
var errBadEntry = errors.New("journal: malformed entry")

func encodeEntry(m *entryMeta, body []byte) ([]byte, error) {
	meta, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(entryMagic)+binary.MaxVarintLen64+len(meta)+len(body))
	b = append(b, entryMagic...)
	b = binary.AppendUvarint(b, uint64(len(meta)))
	b = append(b, meta...)
	return append(b, body...), nil
}

// decodeEntry decodes what encodeEntry wrote; the body aliases b.
func decodeEntry(b []byte) (*entry, callID, error) {
	if !bytes.HasPrefix(b, entryMagic) {
		return nil, callID{}, errBadEntry
	}
	b = b[len(entryMagic):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxEntryMeta || n > uint64(len(b)-k) {
		return nil, callID{}, errBadEntry
	}
	e := &entry{body: b[k+int(n):]}
	if err := json.Unmarshal(b[k:k+int(n)], &e.entryMeta); err != nil {
		return nil, callID{}, errBadEntry
	}
	var id callID
	if hex.DecodedLen(len(e.Digest)) != len(id.digest) || e.Occurrence < 1 || e.Status < 100 || e.Status > 999 {
		return nil, callID{}, errBadEntry
	}
	if _, err := hex.Decode(id.digest[:], []byte(e.Digest)); err != nil {
		return nil, callID{}, errBadEntry
	}
	id.occ = e.Occurrence
	return e, id, nil
}

// response makes the agent's answer from e: its status, headers and body
// as journaled, marked replayed.
func (e *entry) response(r *http.Request) *http.Response {
	h := e.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(HeaderReplayed, "true")
	n := int64(len(e.body))
	if e.Method == http.MethodHead && e.Length > 0 {
		n = e.Length
		h.Set("Content-Length", strconv.FormatInt(n, 10))
	}
	return &http.Response{
		Status: strconv.Itoa(e.Status) + " " + http.StatusText(e.Status), StatusCode: e.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(e.body)), ContentLength: n, Request: r,
	}
}

// keptHeader reports whether a response header is journaled: every
// end-to-end header but cookies (a session the replay must not hand out
// again), the framing and the date, and Baton's own.
func keptHeader(name string) bool {
	switch name {
	case "Set-Cookie", "Set-Cookie2", "Date", "Content-Length", "Transfer-Encoding",
		"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade":
		return false
	}
	return !strings.HasPrefix(name, "Baton-")
}

func keptHeaders(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if keptHeader(k) {
			out[k] = v
		}
	}
	return out
}

// digester computes call digests: HMAC-SHA256, keyed by the journal key,
// of the agent, the call's destination (the external host:port, or the
// peer), method, path and query, the headers that say what is asked
// (meaningHeaders, and those listed in journal.vary), its credentials and
// its body. Being keyed, a digest in the store says nothing of the
// credentials (or of anything else) that went into it, and one agent's
// digests are not another's.
type digester struct {
	key  []byte
	vary []string
}

// credential reports whether a request header carries a secret: these take
// part in a digest (a call made with another key is another call) and are
// never stored.
func credential(name string) bool {
	switch name {
	case "Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Api-Key", "X-Goog-Api-Key":
		return true
	}
	l := strings.ToLower(name)
	return strings.Contains(l, "api-key") || strings.Contains(l, "apikey") ||
		strings.Contains(l, "token") || strings.Contains(l, "secret")
}

// meaningHeaders change what a request asks for: the representation and
// the part of it, and the conditions on it.
var meaningHeaders = [...]string{"Content-Type", "Content-Encoding", "Accept", "Range", "If-Range",
	"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"}

func (d *digester) digest(agent, dest string, r *http.Request, body []byte) [sha256.Size]byte {
	m := hmac.New(sha256.New, d.key)
	field := func(s string) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	field(agent)
	field(dest)
	field(r.Method)
	field(r.URL.RequestURI())
	for _, h := range meaningHeaders {
		headerField(field, r.Header, h)
	}
	for _, h := range d.vary {
		headerField(field, r.Header, h)
	}
	field("credentials")
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		if credential(k) {
			headerField(field, r.Header, k)
		}
	}
	writeBody(m, body)
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

func headerField(field func(string), h http.Header, name string) {
	vs := h[name]
	field(name)
	field(strconv.Itoa(len(vs)))
	for _, v := range vs {
		field(v)
	}
}

func writeBody(m hash.Hash, body []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(body)))
	m.Write(n[:])
	m.Write(body)
}

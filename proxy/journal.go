package proxy

// The call journal (docs/journal.md). While the agent handles an inbound
// handoff, the answers to its calls to journaled destinations (external
// hosts in journal.hosts, peers whose outbound edge says journal: true) are
// appended to that handling's journal in the store, under the handling's
// scoped key. When the agent handles the same handoff again (its chain
// resumed), the handling has the same scoped key, and each call whose
// digest and occurrence match a journaled one is answered from the journal,
// byte for byte, marked Baton-Journal-Replayed: true; a call that differs
// goes out and is journaled in turn.
//
// A handling's journal is one log in the store. Its first journaled call
// reads the whole log (one round trip for the handling, bounded by
// journal.max_handling_bytes); a hit then costs no store call, and a miss
// one append, made when the answer's last byte has been read and before the
// agent sees the end of it. The loaded entries are let go when the agent
// has answered and no call of the handling is in flight.
//
// The journal fails open: with the store down, or a call it cannot tie to
// a handling, the call goes out as if there were no journal, and says so
// (metrics, the receipt).

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// HeaderJournalReplayed marks an answer the call journal gave.
const HeaderJournalReplayed = "Baton-Journal-Replayed"

// journalRuns bounds the handlings whose journal state is kept.
const journalRuns = 1 << 16

// journalWrite bounds the store append of one entry.
const journalWrite = 2 * time.Second

var attrJournal = attribute.Key("baton.journal")

// journal is one Baton's call journal.
type journal struct {
	store       state.Store
	agent       string
	hs          middleware.Handlings
	dig         digester
	hosts       []string // journal.hosts, lowercased
	edges       map[string]bool
	retention   time.Duration
	maxEntry    int64
	maxHandling int64
	log         *slog.Logger
	m           *journalMetrics
	runs        *fifo[*run]
}

// journalKey returns the key digests are computed with: journal.key_env's
// value, else one derived from the identity key, else a random one (found
// only by this process: logged).
func journalKey(c *config.Config, env func(string) string, signer *trust.Signer, log *slog.Logger) ([]byte, error) {
	if name := c.Journal.KeyEnv; name != "" {
		v := env(name)
		if len(v) < config.MinJournalKeyBytes {
			return nil, fmt.Errorf("proxy: journal.key_env: %s must hold at least %d bytes", name, config.MinJournalKeyBytes)
		}
		return []byte(v), nil
	}
	if signer != nil {
		return signer.Key().Derive("baton journal digest v1"), nil
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	log.Info("journal: no journal.key_env and no identity key; journals are found only by this process (a restarted Baton starts them again)")
	return key, nil
}

func newJournal(c *config.Config, store state.Store, hs middleware.Handlings, key []byte, m *journalMetrics, log *slog.Logger) *journal {
	j := &journal{store: store, agent: c.Agent, hs: hs, dig: digester{key: key, vary: c.Journal.Vary},
		edges: map[string]bool{}, retention: c.Journal.Retention.D(), maxEntry: c.Journal.MaxEntryBytes,
		maxHandling: c.Journal.MaxHandlingBytes, log: log, m: m, runs: newFIFO[*run](journalRuns, hopTTL)}
	for _, h := range c.Journal.Hosts {
		j.hosts = append(j.hosts, strings.ToLower(h))
	}
	for _, e := range c.Edges {
		if e.Journal {
			j.edges[e.To] = true
		}
	}
	return j
}

// destination returns the metric label of the request's destination when
// it is journaled (the peer, or the journal.hosts entry it matches), else
// "".
func (j *journal) destination(in *middleware.Info) string {
	if in.Handoff() {
		if j.edges[in.To] {
			return in.To
		}
		return ""
	}
	for _, h := range j.hosts {
		if h == in.External || (strings.HasPrefix(h, "*.") && strings.HasSuffix(in.External, h[1:])) {
			return h
		}
	}
	return ""
}

// journalTransport answers journaled calls from the journal, and journals
// the others' answers, in front of the egress transport. An answer that did
// not come from the journal never carries its mark.
type journalTransport struct {
	j    *journal // nil: nothing is journaled
	next http.RoundTripper
}

func (t journalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	in := middleware.InfoFromContext(r.Context())
	// A protocol upgrade (a WebSocket) is a connection, not an answer:
	// never journaled.
	if t.j != nil && in != nil && r.Header.Get("Upgrade") == "" {
		if dest := t.j.destination(in); dest != "" {
			return t.j.call(r, in, dest, t.next)
		}
	}
	return live(t.next.RoundTrip(r))
}

func live(resp *http.Response, err error) (*http.Response, error) {
	if resp != nil {
		resp.Header.Del(HeaderJournalReplayed)
	}
	return resp, err
}

// call makes one journaled call.
func (j *journal) call(r *http.Request, in *middleware.Info, dest string, next http.RoundTripper) (*http.Response, error) {
	middleware.CorrelateFetch(j.hs, in)
	h := in.Handling
	if h == nil {
		j.m.call(dest, resultBypass)
		return live(next.RoundTrip(r))
	}
	body, err := requestBody(r, in)
	if err != nil {
		return nil, err
	}
	d := j.dig.digest(j.agent, dest, r, body)
	ru := j.run(h)
	occ, err := ru.take(r.Context(), d)
	if err != nil {
		j.m.call(dest, resultBypass)
		h.NoteJournalSkip(what(r, dest) + ": the journal could not be read (" + err.Error() + ")")
		j.log.Warn("journal: not read; the call goes out unjournaled", "destination", dest, "error", err.Error())
		return live(next.RoundTrip(r))
	}
	span := trace.SpanFromContext(r.Context())
	if e := ru.find(callID{d, occ}); e != nil {
		ru.settle(d, occ, true)
		tokens := modelUsage(e.Header.Get("Content-Type"), e.Header.Get("Content-Encoding"), e.body)
		h.NoteJournal(func(s *record.JournalSummary) {
			s.Hits++
			s.SavedBytes += int64(len(e.body))
			s.SavedTokens += tokens
		})
		j.m.hit(dest, int64(len(e.body)), tokens)
		span.SetAttributes(attrJournal.String("hit"))
		in.Call.Settle(middleware.CallAnswered)
		return e.response(r), nil
	}
	h.NoteJournal(func(s *record.JournalSummary) { s.Misses++ })
	j.m.call(dest, resultMiss)
	span.SetAttributes(attrJournal.String("miss"))
	resp, err := live(next.RoundTrip(r))
	if err != nil {
		ru.settle(d, occ, false)
		return nil, err
	}
	if !journaledStatus(resp.StatusCode) {
		// The agent may well try again: its next such call takes this
		// occurrence, and the answer it gets is the one to journal.
		ru.settle(d, occ, false)
		j.skip(h, dest, reasonStatus, what(r, dest)+": status "+strconv.Itoa(resp.StatusCode)+" is not journaled")
		return resp, nil
	}
	rec := &recorder{ReadCloser: resp.Body, j: j, ru: ru, h: h, id: callID{d, occ}, ctx: r.Context(),
		limit: min(j.maxEntry, ru.room()), what: what(r, dest),
		meta: entryMeta{Digest: hex.EncodeToString(d[:]), Occurrence: occ, Destination: dest, Method: r.Method,
			Path: r.URL.Path, Status: resp.StatusCode, Header: keptHeaders(resp.Header)}}
	if resp.ContentLength > rec.limit {
		rec.over = true
	}
	resp.Body = rec
	return resp, nil
}

// journaledStatus reports whether an answer with status is journaled: a
// final one (not 1xx), and not one that says "try again" (408, 425, 429,
// any 5xx), which a re-run must not be given again.
func journaledStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status < 500
}

// requestBody returns the call's whole body, buffering it (within the Limit
// cap) and leaving the request a replayable copy.
func requestBody(r *http.Request, in *middleware.Info) ([]byte, error) {
	if in.Buffered {
		return in.Body, nil
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
	}
	in.Body, in.Buffered = body, true
	r.ContentLength = int64(len(body))
	r.Body = http.NoBody
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return body, nil
}

// what names a call for a person reading a receipt: its method,
// destination and path (never its query).
func what(r *http.Request, dest string) string {
	return r.Method + " " + dest + r.URL.Path
}

func (j *journal) skip(h *middleware.Handling, dest, reason, why string) {
	j.m.skip(dest, reason)
	h.NoteJournalSkip(why)
}

// run returns the journal state of h's calls.
func (j *journal) run(h *middleware.Handling) *run {
	var ru *run
	j.runs.update(h.ID, func(old *run, ok bool) *run {
		if !ok {
			old = &run{j: j, h: h, key: "journal/" + j.agent + "/" + hex.EncodeToString(h.Key[:]), occ: map[[sha256.Size]byte][]bool{}}
		}
		ru = old
		return old
	})
	return ru
}

// ended lets go of the entries of h's journal once no call of it is in
// flight: the agent answered.
func (j *journal) ended(h *middleware.Handling) {
	if ru, ok := j.runs.get(h.ID); ok {
		ru.mu.Lock()
		ru.letGo()
		ru.mu.Unlock()
	}
}

// run is the journal of one handling: the entries loaded from the store,
// and the occurrences its calls took.
type run struct {
	j   *journal
	h   *middleware.Handling
	key string // the log in the store

	mu      sync.Mutex
	loading chan struct{}                // closed when a load in progress ends
	entries map[callID]*entry            // nil until loaded
	bytes   int64                        // of the log: loaded, and appended since
	occ     map[[sha256.Size]byte][]bool // per digest, by occurrence: taken for good
	calls   int                          // in flight
}

// take returns the occurrence of a call with digest d: the first one an
// earlier such call gave back, else the next. It loads the journal first.
func (ru *run) take(ctx context.Context, d [sha256.Size]byte) (int, error) {
	if err := ru.load(ctx); err != nil {
		return 0, err
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	ru.calls++
	taken := ru.occ[d]
	for i, t := range taken {
		if !t {
			taken[i] = true
			return i + 1, nil
		}
	}
	ru.occ[d] = append(taken, true)
	return len(taken) + 1, nil
}

// settle ends a call at occurrence occ: kept, or given back for the next
// such call (it got no answer the journal keeps).
func (ru *run) settle(d [sha256.Size]byte, occ int, kept bool) {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if !kept {
		ru.occ[d][occ-1] = false
	}
	ru.calls--
	if ru.h.Done() {
		ru.letGo()
	}
}

// letGo drops the loaded entries when no call is in flight; a later call
// loads them again. Called with mu held.
func (ru *run) letGo() {
	if ru.calls == 0 && ru.loading == nil {
		ru.entries, ru.bytes = nil, 0
	}
}

func (ru *run) find(id callID) *entry {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return ru.entries[id]
}

// room returns the bytes the handling's journal may still take.
func (ru *run) room() int64 {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return max(ru.j.maxHandling-ru.bytes, 0)
}

// reserve takes n bytes of the handling's room, if there are.
func (ru *run) reserve(n int64) bool {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if ru.bytes+n > ru.j.maxHandling {
		return false
	}
	ru.bytes += n
	return true
}

func (ru *run) unreserve(n int64) {
	ru.mu.Lock()
	ru.bytes -= n
	ru.mu.Unlock()
}

// load reads the handling's journal from the store, once while it is
// held; concurrent callers wait for the one load.
func (ru *run) load(ctx context.Context) error {
	ru.mu.Lock()
	for ru.loading != nil {
		ch := ru.loading
		ru.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		ru.mu.Lock()
	}
	if ru.entries != nil {
		ru.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	ru.loading = ch
	ru.mu.Unlock()

	items, err := ru.j.store.Range(ctx, ru.key, 0, -1)
	entries, size, bad := map[callID]*entry{}, int64(0), 0
	for _, b := range items {
		size += int64(len(b))
		e, id, derr := decodeEntry(b)
		if derr != nil {
			bad++
			continue
		}
		if _, dup := entries[id]; !dup { // two runs that raced: the first answer stands
			entries[id] = e
		}
	}
	if bad > 0 {
		ru.j.log.Warn("journal: entries that do not decode were skipped", "handling", ru.h.ID, "count", bad)
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	ru.loading = nil
	close(ch)
	if err != nil {
		return fmt.Errorf("reading the journal: %w", err)
	}
	ru.entries, ru.bytes = entries, size
	return nil
}

// recorder passes a journaled call's answer to the agent and keeps a copy;
// when the agent has read all of it, it is appended to the journal, before
// the end of the answer reaches the agent. An answer cut short is not.
type recorder struct {
	io.ReadCloser
	j     *journal
	ru    *run
	h     *middleware.Handling
	id    callID
	ctx   context.Context
	meta  entryMeta
	what  string
	limit int64
	buf   []byte
	over  bool // larger than limit: passed on, not kept
	done  bool
}

func (rc *recorder) Read(p []byte) (int, error) {
	n, err := rc.ReadCloser.Read(p)
	if n > 0 && !rc.over {
		if int64(len(rc.buf)+n) > rc.limit {
			rc.over, rc.buf = true, nil
		} else {
			rc.buf = append(rc.buf, p[:n]...)
		}
	}
	if err == io.EOF && !rc.done {
		rc.done = true
		rc.finish()
	}
	return n, err
}

func (rc *recorder) Close() error {
	if !rc.done {
		rc.done = true
		rc.ru.settle(rc.id.digest, rc.id.occ, false)
		rc.j.skip(rc.h, rc.meta.Destination, reasonIncomplete, rc.what+": the answer was not read to its end")
	}
	return rc.ReadCloser.Close()
}

// finish journals the whole answer.
func (rc *recorder) finish() {
	dest := rc.meta.Destination
	// The agent has its answer: the occurrence is taken whatever happens.
	defer rc.ru.settle(rc.id.digest, rc.id.occ, true)
	if rc.over {
		reason, why := reasonEntryCap, "the answer is over journal.max_entry_bytes ("+strconv.FormatInt(rc.j.maxEntry, 10)+")"
		if rc.limit < rc.j.maxEntry {
			reason, why = reasonHandlingCap, "the handling's journal would pass journal.max_handling_bytes ("+strconv.FormatInt(rc.j.maxHandling, 10)+")"
		}
		rc.j.skip(rc.h, dest, reason, rc.what+": not journaled: "+why)
		return
	}
	rc.meta.At = time.Now().UTC()
	b, err := encodeEntry(&rc.meta, rc.buf)
	if err != nil {
		rc.j.skip(rc.h, dest, reasonStoreError, rc.what+": not journaled: "+err.Error())
		return
	}
	size := int64(len(b))
	if !rc.ru.reserve(size) {
		rc.j.skip(rc.h, dest, reasonHandlingCap, rc.what+": not journaled: the handling's journal would pass journal.max_handling_bytes ("+
			strconv.FormatInt(rc.j.maxHandling, 10)+")")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rc.ctx), journalWrite)
	defer cancel()
	if _, err := rc.j.store.Append(ctx, rc.ru.key, b, rc.j.retention); err != nil {
		rc.ru.unreserve(size)
		rc.j.skip(rc.h, dest, reasonStoreError, rc.what+": not journaled: the store refused it ("+err.Error()+")")
		rc.j.log.Warn("journal: entry not stored", "destination", dest, "error", err.Error())
		return
	}
	rc.h.NoteJournal(func(s *record.JournalSummary) { s.Journaled++ })
	rc.j.m.written(dest, size)
}

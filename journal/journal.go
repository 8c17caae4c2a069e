// Package journal is the call journal (docs/journal.md). While the agent handles an inbound
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
// (metrics, the receipt). The loads and the per-handling state are in
// run.go, the copy of an answer on its way to the agent in
// recorder.go, the stored form and the digest in entry.go.
//
// It owns the store keys journal/{agent}/… and the baton.journal.* metrics.
// The request path runs every egress request through its Transport and
// tells it when the agent answered a handling (HandlingEnded). It uses
// middleware, handoff/record, state, trust and config.
package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// HeaderReplayed marks an answer the call journal gave.
const HeaderReplayed = middleware.HeaderJournalReplayed

// runsTTL is how long the journal state of a handling the agent answered
// is kept, as its handling is.
const runsTTL = 24 * time.Hour

// journalRuns bounds the handlings whose journal state is kept.
const journalRuns = 1 << 16

// journalWrite bounds the store append of one entry.
const journalWrite = 2 * time.Second

var attrJournal = attribute.Key("baton.journal")

// Options are what the journal is built from.
type Options struct {
	Config *config.Config
	Store  state.Store
	Log    *slog.Logger
	Meters metric.MeterProvider // nil: no metrics
	Env    func(string) string
	// Signer is this Baton's identity key, from which the digests' key is
	// derived when journal.key_env names none (nil: none).
	Signer *trust.Signer
}

// Journal is one Baton's call journal.
type Journal struct {
	j *journal // nil: nothing is journaled
}

// New returns the journal o.Config configures; with nothing journaled, its
// Transport only keeps an answer from claiming to come from a journal.
func New(o Options) (*Journal, error) {
	j, err := newJournal(o)
	if err != nil {
		return nil, err
	}
	return &Journal{j: j}, nil
}

// Transport answers journaled calls from the journal, and journals the
// others' answers, in front of next (the egress transport).
func (jr *Journal) Transport(next http.RoundTripper) http.RoundTripper {
	return journalTransport{j: jr.j, next: next}
}

// HandlingEnded lets go of the entries of h's journal once no call of it
// is in flight: the agent answered.
func (jr *Journal) HandlingEnded(h *middleware.Handling) {
	if jr.j != nil {
		jr.j.ended(h)
	}
}

// journal is the state of a Baton whose configuration journals calls.
type journal struct {
	store       state.Store
	agent       string
	dig         digester
	hosts       []string // journal.hosts, lowercased
	edges       map[string]bool
	retention   time.Duration
	maxEntry    int64
	maxHandling int64
	maxBody     int64 // the largest request body read for a digest
	log         *slog.Logger
	m           *journalMetrics
	runs        *state.FIFO[*run]
}

// newJournal builds the journal o.Config configures, or returns nil when
// nothing is journaled.
func newJournal(o Options) (*journal, error) {
	c := o.Config
	if !c.JournalOn() {
		return nil, nil
	}
	key, err := journalKey(c, o.Env, o.Signer, o.Log)
	if err != nil {
		return nil, err
	}
	m, err := newJournalMetrics(o.Meters)
	if err != nil {
		return nil, err
	}
	if c.Store.Redis == nil {
		o.Log.Warn("journal: on the memory store, journals share its bounds with dedupe windows and records and do not outlive the process; use Redis")
	}
	j := &journal{store: o.Store, agent: c.Agent, dig: digester{key: key, vary: c.Journal.Vary},
		edges: map[string]bool{}, retention: c.Journal.Retention.D(), maxEntry: c.Journal.MaxEntryBytes,
		maxHandling: c.Journal.MaxHandlingBytes, maxBody: max(c.Records.MaxBodyBytes, c.Journal.MaxEntryBytes),
		log: o.Log, m: m, runs: state.NewFIFO[*run](journalRuns, runsTTL)}
	for _, h := range c.Journal.Hosts {
		j.hosts = append(j.hosts, strings.ToLower(h))
	}
	for _, e := range c.Edges {
		if e.Journal {
			j.edges[e.To] = true
		}
	}
	return j, nil
}

// journalKey returns the key digests are computed with: journal.key_env's
// value, else one derived from the identity key, else a random one (found
// only by this process: logged).
func journalKey(c *config.Config, env func(string) string, signer *trust.Signer, log *slog.Logger) ([]byte, error) {
	if name := c.Journal.KeyEnv; name != "" {
		v := env(name)
		if len(v) < config.MinJournalKeyBytes {
			return nil, fmt.Errorf("journal: journal.key_env: %s must hold at least %d bytes", name, config.MinJournalKeyBytes)
		}
		return []byte(v), nil
	}
	if signer != nil {
		return signer.Key().Derive("baton journal digest v1"), nil
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	log.Warn("journal: no journal.key_env and no identity key; journals are found only by this process (a restarted Baton starts them again)")
	return key, nil
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
	// Nor is MCP: its answers carry the JSON-RPC id and session of the call
	// that got them, which a re-run's calls do not share.
	if t.j != nil && in != nil && r.Header.Get("Upgrade") == "" && (in.RPC == nil || in.RPC.MCP == nil) {
		if dest := t.j.destination(in); dest != "" {
			return t.j.call(r, in, dest, t.next)
		}
	}
	return live(t.next.RoundTrip(r))
}

func live(resp *http.Response, err error) (*http.Response, error) {
	if resp != nil {
		resp.Header.Del(HeaderReplayed)
	}
	return resp, err
}

// call makes one journaled call.
func (j *journal) call(r *http.Request, in *middleware.Info, dest string, next http.RoundTripper) (*http.Response, error) {
	h := in.Handling // tied by middleware.Correlate, as handoffs are
	if h == nil {
		j.m.call(dest, resultBypass)
		return live(next.RoundTrip(r))
	}
	what := r.Method + " " + dest
	body, whole, err := j.requestBody(r, in)
	if err != nil {
		return nil, err
	}
	if !whole {
		j.m.call(dest, resultBypass)
		h.NoteJournalSkip(what + ": the request body is over " + strconv.FormatInt(j.maxBody, 10) + " bytes or streams: not journaled")
		return live(next.RoundTrip(r))
	}
	target := in.External
	if in.Handoff() {
		target = in.To
	}
	d := j.dig.digest(j.agent, target, r, body)
	ru := j.run(h)
	occ, err := ru.take(r.Context(), d)
	if err != nil {
		j.m.call(dest, resultBypass)
		h.NoteJournalSkip(what + ": not journaled: " + err.Error())
		j.log.Warn("journal: the call goes out unjournaled", "destination", dest, "error", err.Error())
		return live(next.RoundTrip(r))
	}
	span := trace.SpanFromContext(r.Context())
	if e := ru.find(callID{d, occ}); e != nil {
		ru.settle(d, occ, true)
		if r.Body != nil {
			_ = r.Body.Close()
		}
		h.NoteJournal(func(s *record.JournalSummary) {
			s.Hits++
			s.SavedBytes += int64(len(e.body))
			s.SavedTokens += e.Tokens
		})
		j.m.hit(dest, int64(len(e.body)), e.Tokens)
		span.SetAttributes(attrJournal.String("hit"))
		in.Call.Settle(middleware.CallAnswered)
		return e.response(r), nil
	}
	h.NoteJournal(func(s *record.JournalSummary) { s.Misses++ })
	j.m.call(dest, resultMiss)
	span.SetAttributes(attrJournal.String("miss"))
	// Until its answer's headers the call ends with the agent's; after them
	// it outlives an agent that stops reading early (a client that stops at
	// a stream's last event closes it before its end), for the recorder to
	// read the rest for the journal.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(r.Context(), cancel)
	resp, err := live(next.RoundTrip(r.WithContext(ctx)))
	if stop() {
		// The agent is still there: once it goes, the call has drainFor
		// left, whether or not the answer is being read.
		context.AfterFunc(r.Context(), func() { time.AfterFunc(drainFor, cancel) })
	}
	if err != nil {
		cancel()
		ru.settle(d, occ, false)
		return nil, err
	}
	if why := notFinal(resp); why != "" {
		// The agent may well try again: its next such call takes this
		// occurrence, and the answer it gets is the one to journal.
		resp.Body = middleware.CancelOnClose(resp.Body, cancel)
		ru.settle(d, occ, false)
		j.skip(h, dest, reasonStatus, what+": not journaled: "+why)
		return resp, nil
	}
	rec := &recorder{ReadCloser: resp.Body, cancel: cancel, j: j, ru: ru, h: h, id: callID{d, occ}, ctx: r.Context(),
		limit: min(j.maxEntry, ru.room()), what: what,
		meta: entryMeta{Digest: hex.EncodeToString(d[:]), Occurrence: occ, Destination: dest, Method: r.Method,
			Status: resp.StatusCode, Header: keptHeaders(resp.Header)}}
	if r.Method == http.MethodHead {
		rec.meta.Length = resp.ContentLength // of the body a GET would get
	} else if resp.ContentLength > rec.limit {
		rec.over = true
	}
	resp.Body = rec
	return resp, nil
}

// notFinal says why an answer is not journaled, or "" when it is: it is
// interim (1xx), or it says "try again" (408, 425, 429, any 5xx, or any
// answer with Retry-After, such as a 409 for a request still in flight),
// which a re-run must be able to do.
func notFinal(resp *http.Response) string {
	switch s := resp.StatusCode; {
	case s < 200, s >= 500, s == http.StatusRequestTimeout, s == http.StatusTooEarly, s == http.StatusTooManyRequests:
		return "status " + strconv.Itoa(s) + " says to try again"
	case resp.Header.Get("Retry-After") != "":
		return "status " + strconv.Itoa(s) + " with Retry-After says to try again"
	}
	return ""
}

// requestBody returns the call's whole body, read for its digest, and
// leaves the request a replayable copy (middleware.BufferBody). A body that
// streams (no length) or is larger than maxBody is not read: whole is
// false, and the request keeps it as it is.
func (j *journal) requestBody(r *http.Request, in *middleware.Info) (body []byte, whole bool, err error) {
	if whole, err = middleware.BufferBody(r, in, j.maxBody); !whole || err != nil {
		return nil, false, err
	}
	return in.Body, true, nil
}

func (j *journal) skip(h *middleware.Handling, dest, reason, why string) {
	j.m.skip(dest, reason)
	h.NoteJournalSkip(why)
}

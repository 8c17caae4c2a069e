package middleware

// Dedupe is the ingress dedupe window: delivery to the local agent is at most
// once per (sender, edge, Idempotency-Key) for the length of the window.
// For a covered method carrying a key it claims the key in the store, as a
// lease renewed while the request runs, before the agent sees anything. The
// agent's final response (2xx–4xx; 5xx too with ReplayErrors) is stored for
// the window and replayed to duplicates with Idempotent-Replayed: true; a 5xx
// or no response releases the claim so that a retry can run again. A
// duplicate while the first is in flight gets 409 with Retry-After; the same
// key with a different fingerprint (method, target, body digest) gets 422;
// a missing key where RequireKey is set gets 400. A positional key (the
// sending Baton derived it from the call's place in its agent's work:
// Baton-Key-Source: position) with a different fingerprint is a re-run of
// the same step: it gets the stored answer, marked Baton-Key-Mismatch: body.
// On A2A JSON-RPC requests
// those answers are JSON-RPC error objects.
//
// Once a claim is held the agent's response is captured even if the client
// goes away: the upstream call is detached from the client's cancellation and
// the capture goes on, so the result is stored for the retry rather than
// lost (and re-executed). Responses are captured up to MaxResponseBytes; a
// longer one is stored without its body and a duplicate is told so.
//
// It sits after HopGuard (it needs the sender) and Limit (it buffers the
// capped body). When the store fails it fails closed (503, nothing
// delivered) unless the edge says FailOpen.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/state"
)

// HeaderReplayed marks a response replayed from the dedupe window, and
// HeaderKeyMismatch one replayed for a positional key whose first request
// had a different body ("body").
const (
	HeaderReplayed    = "Idempotent-Replayed"
	HeaderKeyMismatch = "Baton-Key-Mismatch"
)

// DedupePolicy is the dedupe configuration of one inbound edge.
type DedupePolicy struct {
	Methods          []string      // covered methods, upper case
	Window           time.Duration // how long a final response is kept
	Lease            time.Duration // in-flight claim TTL, renewed every Lease/3
	ReplayErrors     bool          // store 5xx responses too
	RequireKey       bool          // 400 for a covered request without a key
	FailOpen         bool          // deliver when the store is down
	MaxResponseBytes int64         // response body capture cap
}

func (p *DedupePolicy) covers(method string) bool {
	for _, m := range p.Methods {
		if m == method {
			return true
		}
	}
	return false
}

// DedupeStore is what the window needs of the state store.
type DedupeStore interface {
	ClaimMany(ctx context.Context, ops []state.ClaimOp) ([]state.ClaimResult, error)
	Renew(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error)
	Swap(ctx context.Context, key string, prev, next []byte, ttl time.Duration) (bool, error)
	Release(ctx context.Context, key string, val []byte) (bool, error)
}

// DedupeOutcome names what the window did with a request, for logs and
// metrics.
type DedupeOutcome string

// The outcomes.
const (
	DedupeClaimed    DedupeOutcome = "claimed"
	DedupeTakenOver  DedupeOutcome = "taken_over" // claimed in place of a claim whose holder is dead
	DedupeReplayed   DedupeOutcome = "replayed"
	DedupeConflict   DedupeOutcome = "conflict"
	DedupeMismatch   DedupeOutcome = "mismatch"
	DedupeStoreError DedupeOutcome = "store_error"
	DedupeMissingKey DedupeOutcome = "missing_key"
)

// Dedupe returns the ingress dedupe middleware. policy returns the policy of
// the inbound edge from a sender, or nil when the edge has none.
// holder names the process in its claims (nil: a claim is free only when its
// lease lapses).
func Dedupe(store DedupeStore, holder ClaimHolder, policy func(from string) *DedupePolicy, log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		d := &dedupe{store: store, holder: holder, policy: policy, log: log, next: next, kept: newKept(store, log)}
		return http.HandlerFunc(d.serve)
	}
}

type dedupe struct {
	store  DedupeStore
	policy func(string) *DedupePolicy
	log    *slog.Logger
	next   http.Handler
	kept   *kept       // window writes the store did not take (dedupe_kept.go)
	holder ClaimHolder // nil: none (dedupe_claim.go)
}

func (d *dedupe) serve(w http.ResponseWriter, r *http.Request) {
	in := info(r)
	pol := d.policy(in.From)
	if pol == nil || !pol.covers(r.Method) {
		d.nonceOnly(w, r, in)
		return
	}
	vs := r.Header[HeaderIdempotencyKey]
	if len(vs) == 0 {
		if pol.RequireKey && !mcpNotHandoff(r, in) {
			in.Dedupe = DedupeMissingKey
			refuse(w, r, problem.New(r, problem.KeyRequired,
				"edge "+in.Edge()+" requires an Idempotency-Key on "+r.Method))
			return
		}
		d.nonceOnly(w, r, in)
		return
	}
	key, err := ParseKey(vs)
	if err != nil {
		refuse(w, r, problem.New(r, problem.BadIdempotencyKey, err.Error()))
		return
	}
	in.Key = key
	if !Buffer(w, r, in) {
		return
	}
	body := in.Body
	if in.RPC == nil { // MCP or Contract may have read it already
		sniffRPC(in, r, body)
	}
	fp := fingerprint(r, body, in.RPC)
	skey := dedupeKey(in.From, in.To, key)
	c := d.newClaim(skey, fp)
	if final := d.kept.answer(skey); final != nil {
		// The answer is kept here until the store takes it.
		if d.nonceSeen(w, r, in) {
			return
		}
		d.duplicate(w, r, in, fp, final)
		return
	}

	ops := []state.ClaimOp{{Key: skey, Val: c.value(), TTL: pol.Lease}}
	if in.Nonce != nil {
		ops = append(ops, *in.Nonce)
	}
	// Not cut short by a caller that goes away: a claim whose reply is lost
	// may stand in the store all the same.
	res, err := d.store.ClaimMany(context.WithoutCancel(r.Context()), ops)
	if err != nil {
		// The claim may have been made though its reply was lost (a
		// timeout, a connection cut): it is released when the store
		// answers, and taken over meanwhile by the next request with its
		// key (dedupe_kept.go), instead of refusing it as in flight.
		if !pol.FailOpen || in.Nonce != nil { // refused: no request holds the claim
			d.kept.keep(skey, &keptWrite{pending: c.value(), edge: in.Edge()})
		}
		d.storeFailed(w, r, in, pol, err)
		return
	}
	ok, cur := res[0].OK, res[0].Cur
	if in.Nonce != nil && !res[1].OK {
		if ok {
			_, _ = d.store.Release(r.Context(), skey, c.value())
		}
		refuseSignature(w, r, ReasonReplayed, "this signature's nonce was seen before: a replayed request")
		return
	}
	in.Dedupe = DedupeClaimed
	if !ok {
		positional := r.Header.Get(HeaderKeySource) == record.KeyFromPosition
		if ok, err = d.takeOver(r.Context(), in, c, cur, fp, positional, pol.Lease); err != nil {
			d.storeFailed(w, r, in, pol, err)
			return
		}
		in.Dedupe = DedupeTakenOver
	}
	if !ok {
		d.duplicate(w, r, in, fp, cur)
		return
	}
	d.deliver(w, r, in, pol, c)
}

// mcpNotHandoff reports whether the request is an MCP message other than a
// tool call, which needs no key (mcp.go).
func mcpNotHandoff(r *http.Request, in *Info) bool {
	if in.RPC == nil && !in.Buffered && r.ContentLength >= 0 && r.ContentLength <= 1<<20 {
		if body, err := readBody(r, in); err == nil {
			in.Body, in.Buffered = body, true
			sniffRPC(in, r, body)
		}
	}
	return in.RPC != nil && in.RPC.MCP != nil && !in.RPC.MCP.Handoff() && !ambiguousKeys(in.Body)
}

// nonceSeen claims a signed request's nonce, and answers the request when
// the nonce was seen before or cannot be checked.
func (d *dedupe) nonceSeen(w http.ResponseWriter, r *http.Request, in *Info) bool {
	if in.Nonce == nil {
		return false
	}
	res, err := d.store.ClaimMany(r.Context(), []state.ClaimOp{*in.Nonce})
	switch {
	case err != nil:
		in.Err = err
		w.Header().Set("Retry-After", "1")
		MarkRefused(w, problem.StoreUnavailable)
		problem.Write(w, r, problem.StoreUnavailable, "the signature's nonce cannot be checked; retry later")
		return true
	case !res[0].OK:
		refuseSignature(w, r, ReasonReplayed, "this signature's nonce was seen before: a replayed request")
		return true
	}
	return false
}

// nonceOnly claims a signed request's nonce when the window does not cover
// the request, then delivers it.
func (d *dedupe) nonceOnly(w http.ResponseWriter, r *http.Request, in *Info) {
	if !d.nonceSeen(w, r, in) {
		d.next.ServeHTTP(w, r)
	}
}

// storeFailed applies the edge's on_store_error choice.
func (d *dedupe) storeFailed(w http.ResponseWriter, r *http.Request, in *Info, pol *DedupePolicy, err error) {
	in.Dedupe, in.Err = DedupeStoreError, err
	d.log.LogAttrs(r.Context(), slog.LevelError, "dedupe store unavailable",
		slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID),
		slog.Bool("fail_open", pol.FailOpen), slog.String("error", err.Error()))
	if pol.FailOpen && in.Nonce == nil {
		d.next.ServeHTTP(w, r)
		return
	}
	// A signed handoff fails closed even on a fail_open edge: without the
	// store its nonce cannot be checked, and a replay would get through.
	w.Header().Set("Retry-After", "1")
	MarkRefused(w, problem.StoreUnavailable)
	problem.Write(w, r, problem.StoreUnavailable,
		"the dedupe window cannot be checked, so the handoff was not delivered; retry later")
}

// duplicate answers a request whose key is already claimed or completed.
func (d *dedupe) duplicate(w http.ResponseWriter, r *http.Request, in *Info, fp [32]byte, cur []byte) {
	e, err := decodeEntry(cur)
	if err != nil {
		// Unreadable entry: refuse rather than risk a second delivery.
		in.Dedupe, in.Err = DedupeConflict, err
		w.Header().Set("Retry-After", "1")
		MarkRefused(w, problem.InFlight)
		refuse(w, r, problem.New(r, problem.InFlight, "the idempotency key is held by an entry Baton cannot read"))
		return
	}
	if e.fp != fp {
		// A positional key names a step of the sender's work, whatever its
		// body (a re-run's body may differ): the step's answer stands. Any
		// other key reused for another request is the caller's mistake.
		if r.Header.Get(HeaderKeySource) != record.KeyFromPosition {
			in.Dedupe = DedupeMismatch
			refuse(w, r, problem.New(r, problem.KeyMismatch,
				"this Idempotency-Key was first used with a different request (method, target or body)"))
			return
		}
		in.KeyMismatch = true
	}
	switch e.state {
	case statePending:
		in.Dedupe = DedupeConflict
		w.Header().Set("Retry-After", "1")
		MarkRefused(w, problem.InFlight)
		refuse(w, r, problem.New(r, problem.InFlight,
			"a request with this Idempotency-Key is still being processed; retry after it completes"))
	case stateNotRetained:
		in.Dedupe = DedupeReplayed
		refuse(w, r, problem.New(r, problem.NotRetained,
			"a request with this Idempotency-Key completed with status "+strconv.Itoa(e.status)+
				", but its response was larger than the window keeps").With("original_status", e.status))
	default:
		in.Dedupe = DedupeReplayed
		h := w.Header()
		for _, kv := range e.headers {
			h[kv[0]] = append(h[kv[0]], kv[1])
		}
		h.Set(HeaderReplayed, "true")
		if in.KeyMismatch {
			h.Set(HeaderKeyMismatch, "body")
		}
		body := e.body
		if in.RPC != nil && (in.RPC.MCP == nil || !in.RPC.MCP.Batch) { // a batch's answers keep their own ids
			body = withRPCID(body, h.Get("Content-Type"), in.RPC.ID)
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(e.status)
		_, _ = w.Write(body)
	}
}

// a2aFailure reports an A2A agent's failure inside an answer the window
// would otherwise keep (a2a_outcome.go): released like a 5xx, so that the
// chain re-sent runs the step again. A failed answer to a send (a stream's
// included, which the ingress proxy does not read ahead) marks the
// handoff's receipt failed (AgentFailed).
func a2aFailure(in *Info, cw *captureWriter) bool {
	if in.AgentFailed {
		return true
	}
	failed := in.RPC != nil && in.RPC.MCP == nil && !cw.over && A2AFailed(cw.body.Bytes(), cw.header.Get("Content-Type"))
	if failed && A2ASendMethod(in.RPC.Method) {
		in.AgentFailed = true
	}
	return failed
}

// dedupeKey scopes a key by (sender, edge) and hashes it to a fixed length;
// the hash is the Redis Cluster hash tag.
func dedupeKey(from, to, key string) string {
	// The fields are gathered on the stack (keys are at most 255 bytes)
	// and digested at once: no hash state and no copies on the heap.
	var buf [320]byte
	sum := sha256.Sum256(appendField(appendField(appendField(buf[:0], from), to), key))
	var out [len("idem:{") + 32 + len("}")]byte
	n := copy(out[:], "idem:{")
	n += hex.Encode(out[n:], sum[:16])
	out[n] = '}'
	return string(out[:])
}

// fingerprint digests what makes two requests the same request: method,
// target and body; for an A2A send, the JSON-RPC method and the message's id
// and parts, since a client resending a message gives it a new JSON-RPC id
// and the sender's Baton stamps the envelope in its metadata.
func fingerprint(r *http.Request, body []byte, rpc *RPC) [32]byte {
	// Gathered on the stack while it fits, and digested at once.
	var buf [256]byte
	msg := appendField(buf[:0], r.Method)
	msg = appendField(msg, r.URL.RequestURI())
	switch {
	case rpc != nil && rpc.MessageID != "":
		msg = appendField(msg, rpc.Method)
		msg = appendField(msg, rpc.MessageID)
		body = rpc.Parts
	case rpc != nil && rpc.MCP != nil:
		// Each message's method, id, tool and arguments: not _meta, which
		// each Baton rewrites.
		body = rpc.MCP.fingerprintInput()
	}
	b := sha256.Sum256(body)
	return sha256.Sum256(append(msg, b[:]...))
}

// captureWriter passes the response through while keeping a copy of status,
// headers and up to limit bytes of body. After the client has gone it keeps
// capturing and reports success to the proxy, so the agent's whole answer
// still reaches the window.
type captureWriter struct {
	http.ResponseWriter
	limit    int64
	status   int
	header   http.Header
	body     bytes.Buffer
	over     bool
	gone     bool
	hijacked bool
}

func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 && code >= 200 {
		c.status = code
		c.header = c.ResponseWriter.Header().Clone()
	}
	if !c.gone {
		c.ResponseWriter.WriteHeader(code)
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !c.over {
		if int64(c.body.Len()+len(b)) > c.limit {
			c.over = true
			c.body = bytes.Buffer{}
		} else {
			c.body.Write(b)
		}
	}
	if !c.gone {
		if _, err := c.ResponseWriter.Write(b); err != nil {
			c.gone = true
		}
	}
	return len(b), nil
}

func (c *captureWriter) Flush() {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !c.gone {
		if err := http.NewResponseController(c.ResponseWriter).Flush(); err != nil {
			c.gone = true
		}
	}
}

// Hijack hands the connection over for a protocol upgrade, which ends the
// capture: an upgraded exchange is never stored.
func (c *captureWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c.hijacked = true
	conn, rw, err := http.NewResponseController(c.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("dedupe: hijack: %w", err)
	}
	return conn, rw, nil
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

package middleware

// Contract checks the handoff envelope (docs/envelope.md) on both sides. A
// body is located cheaply (content type and a few byte searches) and only an
// envelope is parsed: the whole body as application/vnd.baton.handoff+json,
// or params.message.metadata["baton.handoff"] of an A2A send request. The
// edge's mode decides: off skips it; observe checks, reports the result in
// Baton-Contract ("violations=N; completeness=0.62") on the request and in
// the log and record, and passes the handoff; enforce refuses a handoff with
// violations with 422 listing every one (a JSON-RPC error on A2A requests).
// At egress Baton then stamps provenance (its own agent, the trace id, the
// hop and the time) and changes nothing else.
//
// It sits after IdempotencyKey at egress (the key is derived from what the
// agent sent, so a retry keeps it although each stamp differs) and before
// Dedupe at ingress (a refused handoff does not take its key). It cannot fail
// open: it needs no store.

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/state"
)

// HeaderContract reports the contract check of a handoff's envelope.
const HeaderContract = "Baton-Contract"

// ContractPolicy returns the contract policy of the request's edge.
type ContractPolicy func(in *Info) handoff.Policy

// Contract returns the envelope contract middleware.
func Contract(checker *handoff.Checker, policy ContractPolicy, log *slog.Logger) func(http.Handler) http.Handler {
	stamps := newStampTimes(1 << 16)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			r.Header.Del(HeaderContract) // only this Baton's own check counts
			pol := policy(in)
			if !in.Handoff() || pol.Mode == handoff.Off {
				next.ServeHTTP(w, r)
				return
			}
			ct := r.Header.Get("Content-Type")
			if !in.Buffered {
				if !mayCarryEnvelope(ct) {
					next.ServeHTTP(w, r)
					return
				}
				if !Buffer(w, r, in) {
					return
				}
			}
			agent := ""
			if in.Side == Egress {
				agent = in.Agent
			}
			res, err := checker.Check(ct, in.Body, pol, agent)
			if errors.Is(err, handoff.ErrNoEnvelope) {
				next.ServeHTTP(w, r)
				return
			}
			if err != nil {
				in.Err = err
				problem.Write(w, r, problem.Internal, "checking the handoff envelope failed")
				return
			}
			// A copy: res itself stays on the stack for the handoffs that
			// carry no envelope.
			kept := res
			in.Contract, in.ContractPolicy = &kept, pol
			if n := len(res.Violations); n > 0 {
				log.LogAttrs(r.Context(), slog.LevelWarn, "handoff contract violated",
					slog.String("side", in.Side.String()), slog.String("edge", in.Edge()),
					slog.String("trace_id", in.TraceID), slog.String("mode", pol.Mode.String()),
					slog.Int("violations", n), slog.Float64("completeness", res.Completeness),
					slog.String("first", res.Violations[0].Pointer+": "+res.Violations[0].Detail))
				if pol.Mode == handoff.Enforce {
					sniffRPC(in, r, in.Body)
					refuse(w, r, problem.New(r, problem.ContractViolation, violationsDetail(in, res)).
						With("violations", res.Violations).With("completeness", res.Completeness))
					return
				}
			}
			r.Header.Set(HeaderContract, res.Header())
			if in.Side == Egress {
				at := stamps.at(in.Edge()+"\x00"+in.Key, time.Now())
				stamped, err := res.Stamp(in.Body, handoff.Stamp{Agent: in.Agent, TraceID: in.TraceID, Hop: in.Hop, At: at})
				if err != nil {
					in.Err = err
					problem.Write(w, r, problem.Internal, "stamping the handoff envelope failed")
					return
				}
				replaceBody(r, in, stamped)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// stampTimes remembers when each handoff (edge and idempotency key) was
// first stamped, so that the agent retrying it sends the same bytes again:
// the receiver's dedupe window fingerprints the body, and a new stamp time
// would make a retry look like a different request.
type stampTimes struct{ m *state.FIFO[time.Time] }

func newStampTimes(n int) *stampTimes { return &stampTimes{m: state.NewFIFO[time.Time](n, 0)} }

// at returns the first stamp time of key, recording now when it is new.
func (s *stampTimes) at(key string, now time.Time) time.Time {
	return s.m.Update(key, func(t time.Time, ok bool) (time.Time, bool) {
		if ok {
			return t, false
		}
		return now, true
	})
}

// mayCarryEnvelope tells the content types worth buffering to look for an
// envelope: the envelope's own and JSON (A2A).
func mayCarryEnvelope(ct string) bool {
	return strings.HasPrefix(ct, handoff.MediaType) || strings.Contains(ct, "json")
}

func violationsDetail(in *Info, res handoff.Result) string {
	side := "the receiving Baton"
	if in.Side == Egress {
		side = "the sending Baton, before it left the pod"
	}
	n := len(res.Violations)
	s := "the handoff envelope breaks its contract"
	if n == 1 {
		s += " once: " + res.Violations[0].Pointer + " " + res.Violations[0].Detail
	} else {
		s += " in " + strconv.Itoa(n) + " places (see violations)"
	}
	return s + "; refused by " + side
}

// replaceBody swaps the request body for b, keeping what the agent wrote
// for lineage (Info.CallHead).
func replaceBody(r *http.Request, in *Info, b []byte) {
	if in.wrote == nil {
		in.wrote = in.Body
	}
	in.Body = b
	r.ContentLength = int64(len(b))
	in.replay.of(r, b)
	r.Header.Del("Content-Length")
}

package compensation

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// Side effects and their compensations (docs/compensation.md). An agent reports the side effects
// it performed in its answer (Baton-Side-Effects); the sending Baton keeps
// them on the handoff's record, with the answer's body for the
// compensation's template. When the trace is abandoned (abandon.go), the
// Baton that sent each such handoff sends the compensating handoff its edge
// (or the envelope's manifest) declares, through its own egress chain like
// any handoff of its agent: policy, grant, signature, breaker, retries,
// record and dead letter, with a key derived from the original's.

// maxKeptAnswer bounds the answer body kept for a compensation's template.
const maxKeptAnswer = 64 << 10

func effectAnswerKey(traceID, recordID string) string { return "{" + traceID + "}:answer:" + recordID }

// Answered records the side effects an answer reports on rec (the edge's
// record of the handoff, before it is written): those its
// Baton-Side-Effects header names, and, in an answer that is an envelope,
// the completed items whose id is a declared effect. It keeps the answer's
// body (up to maxKeptAnswer, not a stream) for the compensation's template.
// The body the agent reads is unchanged.
func (cr *Compensator) Answered(rec *record.Record, resp *http.Response) {
	if !cr.o.Config.RecordsOn() {
		return
	}
	rec.Effects = middleware.SideEffectsOf(resp.Header)
	ct := resp.Header.Get("Content-Type")
	var declared []string
	if strings.HasPrefix(ct, handoff.MediaType) {
		declared = cr.declared(rec)
	}
	if len(rec.Effects) == 0 && len(declared) == 0 || strings.HasPrefix(ct, "text/event-stream") || resp.ContentLength > maxKeptAnswer {
		return
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxKeptAnswer+1))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if err != nil || len(head) > maxKeptAnswer {
		return
	}
	if len(declared) > 0 {
		var answer struct {
			Completed []struct {
				ID string `json:"id"`
			} `json:"completed"`
		}
		_ = json.Unmarshal(head, &answer)
		for _, c := range answer.Completed {
			if slices.Contains(declared, c.ID) && !slices.Contains(rec.Effects, c.ID) && len(rec.Effects) < middleware.MaxSideEffects {
				rec.Effects = append(rec.Effects, c.ID)
			}
		}
	}
	if len(rec.Effects) == 0 {
		return
	}
	if rec.Compensates == "" {
		defer cr.repend(rec.TraceID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := cr.o.Store.Set(ctx, effectAnswerKey(rec.TraceID, rec.ID), head, cr.o.Config.Records.Retention.D()); err != nil {
		cr.o.Log.Warn("side effects: the answer was not kept for compensation", "record_id", rec.ID, "error", err.Error())
	}
}

// declared names the side effects declared for rec's receiver: on the
// edge, and in the handoff envelope's manifest.
func (cr *Compensator) declared(rec *record.Record) []string {
	var out []string
	for _, se := range cr.o.Config.SideEffectsTo(rec.To) {
		out = append(out, se.Name)
	}
	for _, m := range manifest(rec) {
		out = append(out, m.Effect)
	}
	return out
}

// manifest reads the side-effect manifest of the envelope rec's checkpoint
// carries.
func manifest(rec *record.Record) []handoff.Compensation {
	// Most envelopes carry no manifest: those are not decoded at all.
	if rec.Request == nil || !bytes.Contains(rec.Request.Body, []byte(`"compensations"`)) {
		return nil
	}
	ct := ""
	if rec.Request.Header != nil {
		ct = rec.Request.Header.Get("Content-Type")
	}
	raw := handoff.EnvelopeOf(ct, rec.Request.Body)
	if raw == nil {
		return nil
	}
	var env struct {
		Compensations []handoff.Compensation `json:"compensations"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Compensations
}

// compensationFor returns how to undo effect of the handoff rec: the
// sending edge's declaration, else the handoff envelope's manifest; nil
// with the reason when neither says.
func (cr *Compensator) compensationFor(rec *record.Record, effect string) (*config.Compensate, string) {
	for _, se := range cr.o.Config.SideEffectsTo(rec.To) {
		if se.Name == effect {
			cp := se.Compensate
			return &cp, ""
		}
	}
	for _, m := range manifest(rec) {
		if m.Effect != effect {
			continue
		}
		cp := config.Compensate{To: m.To, Method: m.Method, Path: m.Path, Body: m.Body, ContentType: m.ContentType}
		cp.Default(rec.To)
		if _, ok := cr.o.Config.Peers[cp.To]; !ok || !strings.HasPrefix(cp.Path, "/") {
			return nil, "the envelope's compensation of " + effect + " names no peer of this agent, or no path"
		}
		return &cp, ""
	}
	return nil, "no compensation is declared for " + effect + " on " + rec.Edge()
}

// compensationKey derives a compensation's idempotency key from the key of
// the handoff it undoes and the effect: every run of abandon, on any
// replica, sends the same key, and the receiver's window runs it once.
func compensationKey(key, effect string) string {
	sum := sha256.Sum256([]byte("compensate\x00" + key + "\x00" + effect))
	return "ck-" + hex.EncodeToString(sum[:16])
}

// compensate sends the compensation of effect of the handoff rec through
// this Baton's egress chain and returns the step's outcome: undone (with
// the compensation's record), failed (with its dead letter or why), or
// standing (nothing to send).
func (cr *Compensator) compensate(ctx context.Context, rec *record.Record, effect string) stepOutcome {
	cp, why := cr.compensationFor(rec, effect)
	if cp == nil {
		return stepOutcome{State: stepStanding, Why: why}
	}
	body, err := cr.compensationBody(ctx, cp, rec, effect)
	if err != nil {
		return stepOutcome{State: stepStanding, Why: "the compensation's body: " + err.Error()}
	}
	c := &middleware.Compensation{Of: rec.ID + "/" + effect}
	ctx = middleware.WithCompensation(ctx, c)
	req, err := http.NewRequestWithContext(ctx, cp.Method, "http://"+cp.To+cp.Path, bytes.NewReader(body))
	if err != nil {
		return stepOutcome{State: stepStanding, Why: err.Error()}
	}
	req.Host = cp.To
	req.RemoteAddr = "127.0.0.1:0"
	if cp.ContentType != "" {
		req.Header.Set("Content-Type", cp.ContentType)
	}
	req.Header.Set(middleware.HeaderIdempotencyKey, middleware.QuoteKey(compensationKey(rec.Key, effect)))
	req.Header.Set(middleware.HeaderTraceparent, "00-"+rec.TraceID+"-"+newSpanID()+"-01")
	w := &answerRecorder{header: http.Header{}}
	cr.o.Egress().ServeHTTP(w, req)
	cr.m.observe(ctx, w.status)
	switch {
	case w.header.Get(middleware.HeaderApproval) != "":
		return stepOutcome{State: stepHeld, Compensation: c.RecordID, Why: "held by the edge's confirmation gate for a person's approval"}
	case w.status >= 200 && w.status < 300:
		return stepOutcome{State: stepUndone, Compensation: c.RecordID}
	case w.status == http.StatusConflict && w.header.Get("Retry-After") != "":
		return stepOutcome{State: stepPending}
	}
	o := stepOutcome{State: stepFailed, Compensation: c.RecordID, DeadLetter: w.header.Get(middleware.HeaderDeadLetter),
		Why: "answered " + strconv.Itoa(w.status)}
	if d := strings.TrimSpace(w.body.String()); d != "" {
		o.Why += ": " + d[:min(len(d), 300)]
	}
	return o
}

// compensationBody renders the compensation's body template over the
// original handoff.
func (cr *Compensator) compensationBody(ctx context.Context, cp *config.Compensate, rec *record.Record, effect string) ([]byte, error) {
	if cp.Body == "" {
		return nil, nil
	}
	tmpl, err := template.New("body").Funcs(config.TemplateFuncs).Option("missingkey=error").Parse(cp.Body)
	if err != nil {
		return nil, err
	}
	data := map[string]any{"Key": rec.Key, "TraceID": rec.TraceID, "Effect": effect, "Record": rec.ID}
	if rec.Request != nil {
		var v any
		if json.Unmarshal(rec.Request.Body, &v) == nil {
			data["Request"] = v
		}
	}
	if answer, err := cr.o.Store.Get(ctx, effectAnswerKey(rec.TraceID, rec.ID)); err == nil {
		var v any
		if json.Unmarshal(answer, &v) == nil {
			data["Response"] = v
		}
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func newSpanID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// answerRecorder takes the egress chain's answer to a compensation.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answerRecorder) Header() http.Header { return a.header }
func (a *answerRecorder) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}
func (a *answerRecorder) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if room := 4096 - a.body.Len(); room > 0 {
		a.body.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}
func (a *answerRecorder) Flush() {}

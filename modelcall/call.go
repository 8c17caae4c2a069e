package modelcall

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/genai"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// call is one model call on its way: what its request said, where it
// went, and what became of it.
type call struct {
	mc    *Calls
	in    *middleware.Info
	h     *middleware.Handling // nil: tied to no handling
	c     genai.Call
	dest  string
	start time.Time
	span  trace.Span

	// Set by Guard, before the answer: the call went out, or was refused
	// (why, for the record).
	refused string

	stream genai.Stream // inited with the answer's head
	status int
	ans    answer // the answer's body as the agent reads it: one allocation with the call

	// A chain with a budget: the call's spend rides on the journal's
	// append of its answer (see meter). metered: Guard reads the answer
	// for the stream, as it comes from the network; ended: counted.
	ride *middleware.Ride

	once sync.Once
	// reqOnce reads the request's body (in.Body) for what the path does
	// not tell, only when something asks (readRequest): a recording span,
	// an answer that names no model or one without a price.
	reqOnce sync.Once
	ended   atomic.Bool
	live    bool
	journal bool
	metered bool
}

// callOf returns the model call r is, nil when it is none.
func callOf(r *http.Request) *call {
	if in := middleware.InfoFromContext(r.Context()); in != nil {
		c, _ := in.Understood.(*call)
		return c
	}
	return nil
}

// observe understands model calls: it reads a call's request, and its
// answer as the agent reads it.
type observe struct {
	mc   *Calls
	next http.RoundTripper
}

func (o observe) RoundTrip(r *http.Request) (*http.Response, error) {
	in := middleware.InfoFromContext(r.Context())
	if in == nil || in.Handoff() || r.Method != http.MethodPost || len(r.Header["Upgrade"]) > 0 {
		return o.next.RoundTrip(r)
	}
	api, dest := o.mc.apis.of(in)
	if api == 0 {
		return o.next.RoundTrip(r)
	}
	gc, ok := genai.DetectPath(api, r.Method, r.URL.Path)
	if !ok {
		return o.next.RoundTrip(r)
	}
	// The body is kept for its model (readRequest); one that streams or is
	// larger than limits.max_body_bytes is not, and the call is known by
	// its path only.
	if _, err := middleware.BufferBody(r, in, o.mc.maxBody); err != nil {
		return nil, err
	}
	c := &call{mc: o.mc, in: in, h: in.Handling, c: gc, dest: dest, start: o.mc.now(),
		span: trace.SpanFromContext(r.Context())}
	if c.span.IsRecording() {
		// The span's name and attributes say what the request asked.
		c.readRequest()
	}
	in.Operation, in.Model = c.c.Operation, c.c.RequestModel
	in.Understood = c
	if c.h != nil && c.h.Budget.Set() {
		var ctx context.Context
		ctx, c.ride = middleware.WithRide(r.Context())
		r = r.WithContext(ctx)
	}
	resp, err := o.next.RoundTrip(r)
	if err != nil {
		c.failed(err)
		return nil, err
	}
	c.status = resp.StatusCode
	c.journal = header(resp.Header, middleware.HeaderJournalReplayed) == "true"
	if !c.metered {
		c.initStream(resp)
	}
	if resp.Body == nil || resp.Body == http.NoBody || r.Method == http.MethodHead {
		c.finish(true)
		return resp, nil
	}
	c.ans = answer{ReadCloser: resp.Body, c: c}
	resp.Body = &c.ans
	return resp, nil
}

// readRequest reads the call's request body for what its path did not tell
// (its model, its settings), once. Nothing needs it on the way: an answer
// of Server-Sent Events is read as a stream whatever the request said.
func (c *call) readRequest() {
	c.reqOnce.Do(func() { c.c.ReadRequest(c.in.Body) })
}

// header is h.Get(key) for a key in canonical form, without canonicalizing
// it again.
func header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// answer passes a model call's answer to the agent and reads it on the
// way; at its end (or when the agent stops reading) the call is counted.
// A chain with a budget has the call's spend added to its count before the
// answer's end reaches the agent, so that its next call is checked against
// it.
type answer struct {
	io.ReadCloser
	c *call
}

func (a *answer) Read(p []byte) (int, error) {
	n, err := a.ReadCloser.Read(p)
	if n > 0 && !a.c.metered {
		_, _ = a.c.stream.Write(p[:n])
	}
	if err == io.EOF {
		a.c.finish(true)
	}
	return n, err
}

func (a *answer) Close() error {
	a.c.finish(false)
	return a.ReadCloser.Close()
}

// guard refuses the calls a handling or chain may not make.
type guard struct {
	mc   *Calls
	next http.RoundTripper
}

func (g guard) RoundTrip(r *http.Request) (*http.Response, error) {
	c := callOf(r)
	if c == nil {
		return g.next.RoundTrip(r)
	}
	if why, detail := g.mc.allow(r.Context(), c); why != "" {
		c.refused = why
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return c.refusal(r, detail), nil
	}
	c.live = true
	resp, err := g.next.RoundTrip(r)
	if err != nil || c.ride == nil || resp.Body == nil || resp.Body == http.NoBody || r.Method == http.MethodHead {
		return resp, err
	}
	c.initStream(resp)
	c.metered = true
	resp.Body = &meter{ReadCloser: resp.Body, c: c}
	return resp, nil
}

func (c *call) initStream(resp *http.Response) {
	c.stream.Init(c.c, resp.StatusCode, header(resp.Header, "Content-Type"), header(resp.Header, "Content-Encoding"), c.mc.now)
	c.stream.Expect(resp.ContentLength)
}

// meter reads a live call's answer for its stream as it comes from the
// network, inside the journal, and at its end offers the call's spend to
// the ride: the journal's append of the answer, which follows at once,
// carries it, and the spend costs no round trip of its own.
type meter struct {
	io.ReadCloser
	c *call
}

func (m *meter) Read(p []byte) (int, error) {
	n, err := m.ReadCloser.Read(p)
	c := m.c
	if n > 0 && !c.ended.Load() {
		_, _ = c.stream.Write(p[:n])
	}
	if err == io.EOF && !c.ended.Load() {
		_ = c.stream.Close()
		tokens, cost := c.mc.spendOf(c, c.stream.Result().Result)
		c.ride.Put(c.mc.spendCounts(c.h.Budget.Chain, tokens, cost))
	}
	return n, err
}

// Why Baton refuses a model call, as records and metrics say.
const (
	refusedCalls  = "calls per handling"
	refusedBudget = "chain budget"
	refusedBlind  = "chain budget unchecked"
)

// allow says why c may not go out ("" when it may), and a detail for the
// agent.
func (mc *Calls) allow(ctx context.Context, c *call) (why, detail string) {
	h := c.h
	if h == nil {
		return "", ""
	}
	n := h.ModelCallBegun()
	if mc.maxCalls > 0 && n > mc.maxCalls {
		return refusedCalls, "Baton refused this model call: the agent has made " + itoa(int64(n-1)) +
			" model calls for the request it is handling, models.max_calls_per_handling of its Baton (a loop breaker)"
	}
	if !h.Budget.Set() {
		return "", ""
	}
	s, err := mc.chainSpend(ctx, h.Budget.Chain)
	if err != nil {
		mc.m.unchecked()
		mc.log.Warn("model calls: the chain's spend could not be read", "chain", h.Budget.Chain, "trace_id", h.TraceID, "error", err.Error())
		if mc.denyBlind {
			return refusedBlind, "Baton refused this model call: its chain's budget cannot be checked (the store does not answer), and models.on_store_error is deny"
		}
		return "", ""
	}
	if over, how := s.over(h.Budget); over {
		return refusedBudget, "Baton refused this model call: " + how + " (chain " + h.Budget.Chain + ", trace " + h.TraceID +
			"). An approver can raise it: baton budget raise " + h.Budget.Chain
	}
	return "", ""
}

// refusal is Baton's answer to a call it refused, in the provider's error
// shape: 429 for a budget or the calls cap, 503 when the budget could not
// be checked.
func (c *call) refusal(r *http.Request, detail string) *http.Response {
	status, code := http.StatusTooManyRequests, "chain_budget_exceeded"
	switch c.refused {
	case refusedCalls:
		code = "model_calls_per_handling_exceeded"
	case refusedBlind:
		status, code = http.StatusServiceUnavailable, "chain_budget_unchecked"
	}
	w := &responseBuffer{header: http.Header{}}
	genai.WriteRefusal(w, c.c, status, code, detail)
	return &http.Response{StatusCode: w.status, Status: http.StatusText(w.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(bytes.NewReader(w.body.Bytes())), ContentLength: int64(w.body.Len()), Request: r}
}

// responseBuffer is the ResponseWriter a refusal is written to.
type responseBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *responseBuffer) Header() http.Header { return b.header }
func (b *responseBuffer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
func (b *responseBuffer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// failed counts a call that got no answer.
func (c *call) failed(err error) {
	c.once.Do(func() {
		c.ended.Store(true)
		c.mc.account(c, genai.StreamResult{Result: genai.Result{ErrorType: errorType(err)}}, false)
	})
}

// finish counts the call once its answer has ended (whole: read to its
// end) or the agent stopped reading it.
func (c *call) finish(whole bool) {
	c.once.Do(func() {
		c.ended.Store(true)
		_ = c.stream.Close()
		r := c.stream.Result()
		if !whole && !r.Ended && r.ErrorType == "" {
			r.ErrorType = "incomplete"
		}
		c.mc.account(c, r, true)
	})
}

// errorType names a transport error for error.type.
func errorType(err error) string {
	switch {
	case err == nil:
		return ""
	case strings.Contains(err.Error(), "timeout"), strings.Contains(err.Error(), "deadline"):
		return "timeout"
	}
	return "transport"
}

// account records what c did and cost: the span, the metrics, the
// handling's summary, and its chain's count.
func (mc *Calls) account(c *call, r genai.StreamResult, answered bool) {
	end := mc.now()
	model := r.ResponseModel
	if model == "" {
		c.readRequest()
		model = c.c.RequestModel
	}
	rec := record.ModelCall{At: c.start, Ms: ms(end.Sub(c.start)), API: c.dest, Provider: c.c.Provider,
		Operation: c.c.Operation, Model: model, Status: c.status, Finish: strings.Join(r.FinishReasons, ","), Error: r.ErrorType}
	if !r.FirstTokenAt.IsZero() {
		rec.TTFTMs = ms(r.FirstTokenAt.Sub(c.start))
	}
	var costNano int64
	switch {
	case c.refused != "":
		rec.Refused = c.refused
	case c.journal:
		rec.Journal = true
	default:
		if u := r.Usage; u.Known {
			rec.UsageKnown = true
			rec.InputTokens, rec.OutputTokens, rec.CachedTokens, rec.ReasoningTokens = u.Input, u.Output, u.CachedInput, u.Reasoning
		}
		if cost, ok := c.cost(r.Result); ok {
			costNano, rec.Priced, rec.CostUSD = cost, true, float64(cost)/1e9
		}
	}
	c.attributes(r, rec)
	mc.m.record(c, rec, end.Sub(c.start))
	if c.h == nil {
		return
	}
	c.h.NoteModelCall(rec)
	if c.live && c.h.Budget.Set() && answered {
		mc.addSpend(c, rec.InputTokens+rec.OutputTokens, costNano)
	}
}

// spendOf is what a call that went out spent: its tokens, and its cost in
// nano-dollars (0 when its model has no price).
func (mc *Calls) spendOf(c *call, r genai.Result) (tokens, costNano int64) {
	if u := r.Usage; u.Known {
		tokens = u.Input + u.Output
	}
	if cost, ok := c.cost(r); ok {
		costNano = cost
	}
	return tokens, costNano
}

// cost is what the call cost in nano-dollars (genai's Prices.Cost: priced
// by the model its answer names, else by the one its request asked for).
// The request is read for its model only when the answer's has no price.
func (c *call) cost(r genai.Result) (int64, bool) {
	if _, ok := c.mc.prices.Lookup(c.c.API, r.ResponseModel); !ok {
		c.readRequest()
	}
	return c.mc.prices.Cost(c.c, r)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

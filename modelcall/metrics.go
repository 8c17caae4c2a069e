package modelcall

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/handoff/record"
)

// maxModels bounds the model label: the first maxModels models a Baton sees
// are labelled by name, later ones "other", so that an agent that names
// models at will cannot grow the series without end.
const maxModels = 32

// Call outcomes, as the calls counter labels them.
const (
	outcomeLive    = "live"    // went out and was answered
	outcomeJournal = "journal" // answered from the journal
	outcomeRefused = "refused" // answered by Baton (budget, calls cap)
	outcomeError   = "error"   // went out and failed, or got an error answer
)

// metrics are the GenAI client metrics of OpenTelemetry's semantic
// conventions and Baton's counters of model calls, tokens and cost. A nil
// *metrics records nothing.
type metrics struct {
	agent         string
	tokenUsage    metric.Int64Histogram
	duration      metric.Float64Histogram
	tokens, calls metric.Int64Counter
	cost          metric.Float64Counter
	blind         metric.Int64Counter

	mu     sync.Mutex
	models map[string]bool
	attrs  map[labels]metric.MeasurementOption
}

// labels are a measurement's attributes before they are built.
type labels struct {
	kind                          uint8 // which instrument's set
	api, provider, op, model, val string
}

func newMetrics(mp metric.MeterProvider, agent string) (*metrics, error) {
	if mp == nil {
		return nil, nil
	}
	mt := mp.Meter("github.com/batonproxy/baton")
	m := &metrics{agent: agent, models: map[string]bool{}, attrs: map[labels]metric.MeasurementOption{}}
	var errs [6]error
	m.tokenUsage, errs[0] = mt.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used, per model call that went out."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
	m.duration, errs[1] = mt.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration, to the end of the answer."),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
	m.tokens, errs[2] = mt.Int64Counter("baton.genai.tokens", metric.WithUnit("{token}"),
		metric.WithDescription("Model tokens billed to the agent's calls that went out, by type (input, output)."))
	m.cost, errs[3] = mt.Float64Counter("baton.genai.cost_usd",
		metric.WithDescription("What the agent's priced model calls cost, by the price table."))
	m.calls, errs[4] = mt.Int64Counter("baton.genai.calls", metric.WithUnit("{call}"),
		metric.WithDescription("The agent's model calls, by outcome: live, journal (answered from the journal), refused (by Baton), error."))
	m.blind, errs[5] = mt.Int64Counter("baton.genai.budget_unchecked", metric.WithUnit("{call}"),
		metric.WithDescription("Model calls of chains with a budget whose count the store could not give."))
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("modelcall: metrics: %w", err)
		}
	}
	return m, nil
}

// Which attribute set a labels value builds.
const (
	setUsage    = iota // the GenAI histograms': operation, provider, models, server, token type
	setCounter         // Baton's counters: from, to, provider, model, and a type or outcome
	setDuration        // the duration's, with error.type
)

func (m *metrics) with(l labels) metric.MeasurementOption {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.models[l.model] {
		if len(m.models) >= maxModels {
			l.model = "other"
		} else {
			m.models[l.model] = true
		}
	}
	o, ok := m.attrs[l]
	if ok {
		return o
	}
	var kvs []attribute.KeyValue
	switch l.kind {
	case setUsage, setDuration:
		kvs = []attribute.KeyValue{attribute.String("gen_ai.operation.name", l.op), attrProvider.String(l.provider),
			attrRequestModel.String(l.model), attrServerAddress.String(l.api)}
		if l.kind == setUsage {
			kvs = append(kvs, attribute.String("gen_ai.token.type", l.val))
		} else if l.val != "" {
			kvs = append(kvs, attrErrorType.String(l.val))
		}
	default:
		kvs = []attribute.KeyValue{attribute.String("from", m.agent), attribute.String("to", l.api),
			attrProvider.String(l.provider), attribute.String("model", l.model), attribute.String("type", l.val)}
	}
	o = metric.WithAttributeSet(attribute.NewSet(kvs...))
	m.attrs[l] = o
	return o
}

// record counts one call.
func (m *metrics) record(c *call, rec record.ModelCall, took time.Duration) {
	if m == nil {
		return
	}
	ctx := context.Background()
	base := labels{api: c.dest, provider: c.c.Provider, op: c.c.Operation, model: rec.Model}
	outcome := outcomeLive
	switch {
	case rec.Refused != "":
		outcome = outcomeRefused
	case rec.Journal:
		outcome = outcomeJournal
	case rec.Error != "" || rec.Status >= 400:
		outcome = outcomeError
	}
	l := base
	l.kind, l.val = setCounter, outcome
	m.calls.Add(ctx, 1, m.with(l))
	if outcome == outcomeRefused || outcome == outcomeJournal {
		return
	}
	l = base
	l.kind, l.val = setDuration, rec.Error
	m.duration.Record(ctx, took.Seconds(), m.with(l))
	if rec.UsageKnown {
		for _, t := range [...]struct {
			typ string
			n   int64
		}{{"input", rec.InputTokens}, {"output", rec.OutputTokens}} {
			l = base
			l.kind, l.val = setUsage, t.typ
			m.tokenUsage.Record(ctx, t.n, m.with(l))
			l.kind = setCounter
			m.tokens.Add(ctx, t.n, m.with(l))
		}
	}
	if rec.Priced {
		l = base
		l.kind = setCounter
		m.cost.Add(ctx, rec.CostUSD, m.with(l))
	}
}

func (m *metrics) unchecked() {
	if m != nil {
		m.blind.Add(context.Background(), 1)
	}
}

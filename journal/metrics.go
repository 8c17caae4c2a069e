package journal

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Journal results and the reasons an answer was not journaled, as metric
// labels (docs/metrics.md).
const (
	resultHit    = "hit"    // answered from the journal
	resultMiss   = "miss"   // went out
	resultBypass = "bypass" // went out without the journal: no handling, or the store down

	reasonStatus      = "status"       // 408, 425, 429 or 5xx
	reasonIncomplete  = "incomplete"   // the answer was not read to its end
	reasonEntryCap    = "entry_cap"    // over journal.max_entry_bytes
	reasonHandlingCap = "handling_cap" // over journal.max_handling_bytes
	reasonStoreError  = "store_error"  // the store refused the entry
)

// journalMetrics are the journal's counters, by destination: a peer's name
// or a journal.hosts entry, so the labels are bounded by the configuration.
// A nil *journalMetrics records nothing.
type journalMetrics struct {
	calls, savedBytes, savedTokens, writtenBytes, skipped metric.Int64Counter

	mu    sync.Mutex
	attrs map[[3]string]metric.MeasurementOption
}

func newJournalMetrics(mp metric.MeterProvider) (*journalMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	mt := mp.Meter("github.com/batonproxy/baton")
	m := &journalMetrics{attrs: map[[3]string]metric.MeasurementOption{}}
	var errs [5]error
	m.calls, errs[0] = mt.Int64Counter("baton.journal.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls to journaled destinations, by result: hit (answered from the journal), miss (went out), bypass (went out without the journal)."))
	m.savedBytes, errs[1] = mt.Int64Counter("baton.journal.saved", metric.WithUnit("By"),
		metric.WithDescription("Response bytes answered from the journal instead of fetched again."))
	m.savedTokens, errs[2] = mt.Int64Counter("baton.journal.saved_tokens", metric.WithUnit("{token}"),
		metric.WithDescription("Model tokens answered from the journal, by the provider's usage field."))
	m.writtenBytes, errs[3] = mt.Int64Counter("baton.journal.written", metric.WithUnit("By"),
		metric.WithDescription("Bytes of journal entries written to the store."))
	m.skipped, errs[4] = mt.Int64Counter("baton.journal.unjournaled", metric.WithUnit("{call}"),
		metric.WithDescription("Answers that went out and were not journaled, by reason."))
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("proxy: journal metrics: %w", err)
		}
	}
	return m, nil
}

// with returns the measurement option of destination dest and, when set,
// one more label (result or reason), built once.
func (m *journalMetrics) with(dest string, key attribute.Key, v string) metric.MeasurementOption {
	k := [3]string{dest, string(key), v}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.attrs[k]
	if !ok {
		kvs := []attribute.KeyValue{attribute.String("destination", dest)}
		if v != "" {
			kvs = append(kvs, key.String(v))
		}
		o = metric.WithAttributeSet(attribute.NewSet(kvs...))
		m.attrs[k] = o
	}
	return o
}

func (m *journalMetrics) call(dest, result string) {
	if m != nil {
		m.calls.Add(context.Background(), 1, m.with(dest, "result", result))
	}
}

func (m *journalMetrics) hit(dest string, bytes, tokens int64) {
	if m == nil {
		return
	}
	m.call(dest, resultHit)
	o := m.with(dest, "", "")
	m.savedBytes.Add(context.Background(), bytes, o)
	if tokens > 0 {
		m.savedTokens.Add(context.Background(), tokens, o)
	}
}

func (m *journalMetrics) written(dest string, bytes int64) {
	if m != nil {
		m.writtenBytes.Add(context.Background(), bytes, m.with(dest, "", ""))
	}
}

func (m *journalMetrics) skip(dest, reason string) {
	if m != nil {
		m.skipped.Add(context.Background(), 1, m.with(dest, "reason", reason))
	}
}

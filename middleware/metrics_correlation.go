package middleware

// baton.handoff.correlation counts each outbound handoff by how it was tied
// to the inbound handoff its agent was handling (correlate.go): baggage,
// traceparent, trace, in-flight, lineage, a2a or mcp-session; ambiguous when its
// trace had several handlings, none when nothing tied it. A handoff counted
// none or ambiguous got a key from its content: a re-run of its agent with
// other bodies runs it again. `baton top` and the console show the share
// per edge, and the log warns of it (CorrelationWarner).

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/batonproxy/baton/handoff/record"
)

// keyCorrelation labels how a handoff was correlated.
const keyCorrelation = attribute.Key("correlation")

// CorrelationNone labels a handoff nothing tied to an inbound one.
const CorrelationNone = "none"

// correlationNames are the label values, in cell order.
var correlationNames = [...]string{
	record.CorrelatedByBaggage, record.CorrelatedByTraceparent, record.CorrelatedByTrace,
	record.CorrelatedByInFlight, record.CorrelatedByLineage, record.CorrelatedByA2A, record.CorrelatedByMCPSession,
	record.CorrelationAmbiguous, CorrelationNone,
}

// correlationIndex is the cell of how ("" is none).
func correlationIndex(how string) int {
	for i, n := range correlationNames {
		if n == how {
			return i
		}
	}
	return len(correlationNames) - 1
}

// countCorrelation counts an egress handoff by its correlation.
func (e *Edge) countCorrelation(in *Info) {
	i := correlationIndex(in.Correlation)
	if c := &e.correlation[i]; !c.add(1) {
		e.label(c, keyCorrelation.String(correlationNames[i]))
	}
}

package middleware

// The metrics' labels: the attribute keys, the names Baton gives edge ends
// that are not agents, and the tables of values each bounded label takes
// (outcomes, status classes, dedupe outcomes, signature and denial reasons,
// contract violation kinds, breaker states), in the order of the cells that
// count them.

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/batonproxy/baton/handoff"
)

// Label values for edge ends Baton does not name after an agent. None is a
// valid agent name (an agent name cannot start with "_").
const (
	LabelExternal = "_external" // egress to a host in external.allow
	LabelUnknown  = "_unknown"  // not known when the request ended (refused before resolution or HopGuard)
	LabelOther    = "_other"    // a sender beyond maxDynamicEdges
)

// Metric attribute keys.
var (
	keyFrom        = attribute.Key("from")
	keyTo          = attribute.Key("to")
	keySide        = attribute.Key("side")
	keyOutcome     = attribute.Key("outcome")
	keyStatusClass = attribute.Key("status_class")
	keyReason      = attribute.Key("reason")
	keyMode        = attribute.Key("mode")
	keyKind        = attribute.Key("kind")
	keyState       = attribute.Key("state")
	keyOp          = attribute.Key("op")
	keyMethod      = attribute.Key("http.request.method")
	keyStatus      = attribute.Key("http.response.status_code")
	keyServer      = attribute.Key("server.address")
	keyErrorType   = attribute.Key("error.type")
)

// outcome is what became of a request, as baton.handoff.requests counts it.
type outcome uint8

const (
	outcomeDelivered    outcome = iota // forwarded, and the other side answered
	outcomeReplayed                    // answered from the ingress dedupe window
	outcomeRefused                     // refused by this Baton before it was forwarded
	outcomeFailed                      // forwarded, and no answer came back
	outcomeDeadLettered                // retries exhausted or the breaker open: a dead letter
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"delivered", "replayed", "refused", "failed", "dead_lettered"}

// nClasses are the status classes: "none" (no status was sent), then 1xx to
// 5xx.
const nClasses = 6

var classNames = [nClasses]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

func classOf(status int) int {
	if status < 100 || status > 599 {
		return 0
	}
	return status / 100
}

// The dedupe outcomes, in label order.
var dedupeOutcomes = [...]DedupeOutcome{DedupeClaimed, DedupeTakenOver, DedupeReplayed, DedupeConflict, DedupeMismatch, DedupeStoreError, DedupeMissingKey}

// Signature failure reasons (trust.Reason* and ReasonReplayed) and policy
// denial reasons (trust.Decision*, and Baton's own), in label order; the last
// of each is "other", for a reason not listed.
var (
	signatureReasons = [...]string{"missing", "malformed", "unknown_key", "bad_signature", "digest_mismatch",
		"expired", "future", "agent_mismatch", "uncovered", ReasonReplayed, "other"}
	denialReasons = [...]string{"no_edge", "unsigned", "not_granted", "uncorrelated", "grant",
		DenialUnknownDestination, DenialDeniedAddress, DenialHopLimit, DenialBadCredential, DenialMissingCredential, "other"}
)

// Policy denial reasons Baton itself gives, besides trust's decisions.
const (
	DenialUnknownDestination = "unknown_destination" // neither a peer nor in external.allow
	DenialDeniedAddress      = "denied_address"      // an address the guard refuses
	DenialHopLimit           = "hop_limit"           // beyond the edge's max_hops
)

func reasonIndex(list []string, r string) int {
	for i, v := range list[:len(list)-1] {
		if v == r {
			return i
		}
	}
	return len(list) - 1
}

// Contract violation kinds, in label order; the last is "other".
var violationKinds = [...]handoff.Kind{handoff.KindSchema, handoff.KindRequired, handoff.KindCompleteness,
	handoff.KindSize, handoff.KindVersion, handoff.KindIdentity, "other"}

func kindIndex(k handoff.Kind) int {
	for i, v := range violationKinds[:len(violationKinds)-1] {
		if v == k {
			return i
		}
	}
	return len(violationKinds) - 1
}

// Breaker states as the gauge reports them (gobreaker's numbering).
var breakerStates = [3]string{"closed", "half_open", "open"}

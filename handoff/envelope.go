package handoff

import "encoding/json"

// Envelope is the handoff envelope, contract v1, for agents written in Go
// that build or read one. Baton itself never decodes into it nor re-encodes
// it: members a newer 1.x minor adds, which these types do not know, would be
// lost that way, and Baton passes every envelope on byte for byte.
type Envelope struct {
	SchemaVersion string        `json:"schema_version"`
	Task          Task          `json:"task"`
	Constraints   []Constraint  `json:"constraints,omitempty"`
	Completed     []Completed   `json:"completed,omitempty"`
	OpenQuestions []string      `json:"open_questions,omitempty"`
	RejectedPaths []Rejected    `json:"rejected_paths,omitempty"`
	Confidence    *float64      `json:"confidence,omitempty"`
	Provenance    *Provenance   `json:"provenance,omitempty"`
	SideEffects   []SideEffect  `json:"side_effects,omitempty"`
	FailureModes  *FailureModes `json:"failure_modes,omitempty"`
	Artifacts     []Artifact    `json:"artifacts,omitempty"`
	MemoryRefs    []string      `json:"memory_refs,omitempty"`
	// Compensations is the side-effect manifest: how to undo what the
	// receiver may do (docs/compensation.md).
	Compensations []Compensation `json:"compensations,omitempty"`
	// Omitted is set by the sending Baton: what it left out for the edge's
	// field policy or token budget, as pointers into the request body.
	Omitted []string `json:"omitted,omitempty"`
}

// Task is the work handed off.
type Task struct {
	ID             string `json:"id"`
	Intent         string `json:"intent"` // the original human request, in the human's words
	Scope          string `json:"scope,omitempty"`
	ExpectedOutput string `json:"expected_output,omitempty"`
}

// Constraint is a rule the receiver must (Hard) or should respect.
type Constraint struct {
	Text       string `json:"text"`
	Hard       bool   `json:"hard,omitempty"`
	OutOfScope bool   `json:"out_of_scope,omitempty"`
}

// Verification says how far a completed item was checked.
type Verification string

// The verification statuses.
const (
	Verified   Verification = "verified"
	Unverified Verification = "unverified"
	Failed     Verification = "failed"
)

// Completed is one piece of work already done.
type Completed struct {
	ID           string       `json:"id,omitempty"`
	Summary      string       `json:"summary"`
	Verification Verification `json:"verification,omitempty"`
	Evidence     string       `json:"evidence,omitempty"`
}

// Rejected is an approach tried or considered and dropped.
type Rejected struct {
	What string `json:"what"`
	Why  string `json:"why"`
}

// Provenance says who produced the handoff and with what. Agent, TraceID,
// Hop and StampedAt are stamped by the sender's Baton.
type Provenance struct {
	Agent               string     `json:"agent,omitempty"`
	InstructionsVersion string     `json:"instructions_version,omitempty"`
	Model               string     `json:"model,omitempty"`
	ToolCalls           []ToolCall `json:"tool_calls,omitempty"`
	TraceID             string     `json:"trace_id,omitempty"`
	Hop                 *int       `json:"hop,omitempty"`
	StampedAt           string     `json:"stamped_at,omitempty"`
}

// ToolCall is one tool call that led to the handoff.
type ToolCall struct {
	Name string `json:"name"`
	Ref  string `json:"ref,omitempty"`
	OK   *bool  `json:"ok,omitempty"`
}

// SideEffect is a write already committed.
type SideEffect struct {
	System       string `json:"system"`
	Action       string `json:"action"`
	Ref          string `json:"ref,omitempty"`
	Compensation string `json:"compensation,omitempty"`
}

// Compensation says how to undo a side effect the receiver may perform:
// a handoff to To (the receiver by default) with Method and Path, its Body
// a Go template over the original handoff.
type Compensation struct {
	Effect      string `json:"effect"`
	To          string `json:"to,omitempty"`
	Method      string `json:"method,omitempty"`
	Path        string `json:"path"`
	Body        string `json:"body,omitempty"`
	ContentType string `json:"content_type,omitempty"`
}

// FailureModes says which errors the receiver may retry and which must go to
// a human.
type FailureModes struct {
	Retryable []string `json:"retryable,omitempty"`
	Escalate  []string `json:"escalate,omitempty"`
}

// Trust labels where an artifact's content may be believed.
type Trust string

// The trust labels.
const (
	Trusted   Trust = "trusted"
	Untrusted Trust = "untrusted"
)

// Artifact is something handed over, inline (Content) or by reference (Ref).
type Artifact struct {
	Name      string          `json:"name"`
	MediaType string          `json:"media_type,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	Ref       string          `json:"ref,omitempty"`
	Digest    string          `json:"digest,omitempty"` // sha-256 of the content's bytes (docs/context.md)
	Size      *int64          `json:"size,omitempty"`
	Trust     Trust           `json:"trust"`
	Source    string          `json:"source,omitempty"`
}

// Example returns a complete, valid envelope, as the receiving agent sees it
// after the sender's Baton stamped it.
func Example() []byte { return []byte(example) }

const example = `{
  "schema_version": "1.0.0",
  "task": {
    "id": "task-7f3a9c",
    "intent": "Find out why checkout latency doubled after Tuesday's deploy and propose a fix we can ship this week.",
    "scope": "Analyse traces and deploy diffs of the checkout service only; propose a fix, do not apply it.",
    "expected_output": "A one-page report: root cause with evidence, the proposed change, its risk."
  },
  "constraints": [
    {"text": "Do not restart production services.", "hard": true},
    {"text": "The payment provider's internals.", "hard": true, "out_of_scope": true},
    {"text": "Prefer fixes that need no schema migration.", "hard": false}
  ],
  "completed": [
    {"id": "c1", "summary": "p95 latency of POST /checkout rose from 180 ms to 410 ms at 14:02 UTC on Tuesday.", "verification": "verified", "evidence": "dashboard checkout-latency, 7-day range, exported as latency.csv"},
    {"id": "c2", "summary": "The rise coincides with deploy 2025-11-04.3, which added a per-item inventory lookup.", "verification": "verified", "evidence": "deploy log; diff a1b2c3..d4e5f6 in inventory/client.go"},
    {"id": "c3", "summary": "The new lookup issues one query per cart item (N+1).", "verification": "unverified", "evidence": "read in the code, not yet seen in traces"},
    {"id": "c4", "summary": "Connection pool saturation ruled out.", "verification": "failed", "evidence": "pool metrics are missing for the window"}
  ],
  "open_questions": [
    "Does the inventory batch endpoint accept more than 50 SKUs per call?",
    "Is the rise visible for single-item carts too?"
  ],
  "rejected_paths": [
    {"what": "Roll back deploy 2025-11-04.3", "why": "It also carries a security fix that must stay."},
    {"what": "Enlarge the database connection pool", "why": "Saturation was not observed; it would hide the N+1 pattern."}
  ],
  "confidence": 0.7,
  "provenance": {
    "agent": "analyst",
    "instructions_version": "analyst-prompt@2025-11-01",
    "model": "example-model-2025-10",
    "tool_calls": [
      {"name": "metrics.query", "ref": "call-01", "ok": true},
      {"name": "deploys.list", "ref": "call-02", "ok": true},
      {"name": "traces.search", "ref": "call-03", "ok": false}
    ],
    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    "hop": 1,
    "stamped_at": "2025-11-06T09:30:00.000Z"
  },
  "side_effects": [
    {"system": "jira", "action": "created issue", "ref": "CHK-2231", "compensation": "close CHK-2231 as invalid"}
  ],
  "failure_modes": {
    "retryable": ["metrics backend timeout"],
    "escalate": ["any change to production", "evidence of data loss"]
  },
  "artifacts": [
    {"name": "latency.csv", "media_type": "text/csv", "ref": "s3://team-analysis/checkout/latency.csv", "trust": "trusted", "source": "analyst"},
    {"name": "vendor-status", "media_type": "text/plain", "content": "All systems operational.", "trust": "untrusted", "source": "https://status.example.com"}
  ],
  "memory_refs": ["mem:checkout/slo", "mem:inventory/batch-api"],
  "compensations": [
    {"effect": "draft-pr", "method": "POST", "path": "/prs/close", "body": "{\"pr\": {{json .Response.pr_id}}}"}
  ],
  "omitted": ["/memory_refs/2"]
}
`

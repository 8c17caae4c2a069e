package handoff

import "strconv"

// Kind classifies a violation.
type Kind string

// The kinds of violation.
const (
	KindSchema       Kind = "schema"       // the envelope does not match the v1 JSON Schema
	KindRequired     Kind = "required"     // a member the edge's policy requires is missing
	KindCompleteness Kind = "completeness" // completeness is below the edge's minimum
	KindSize         Kind = "size"         // the envelope is larger than the edge's max_bytes
	KindVersion      Kind = "version"      // schema_version is missing, malformed or of an unsupported major
	KindIdentity     Kind = "identity"     // provenance.agent names an agent other than the sender
)

// Violation is one way an envelope breaks the contract.
type Violation struct {
	// Pointer is the RFC 6901 JSON pointer of the offending value within the
	// request body ("" for the whole body; under A2APointer for A2A).
	Pointer string `json:"pointer"`
	Kind    Kind   `json:"kind"`
	// Detail says what is wrong and how to fix it, in plain English.
	Detail string `json:"detail"`
}

// Summary is what a delegation record keeps of an envelope.
type Summary struct {
	Digest        string  `json:"digest"`         // lowercase hex SHA-256 of the envelope bytes as received
	TaskID        string  `json:"task_id"`        // task.id
	Intent        string  `json:"intent"`         // task.intent, cut to IntentMax characters
	Completeness  float64 `json:"completeness"`   // as in Result
	OpenQuestions int     `json:"open_questions"` // number of open_questions
	Unverified    int     `json:"unverified"`     // completed items whose verification is not "verified"
	SchemaVersion string  `json:"schema_version"`
}

// IntentMax is the number of characters of task.intent a Summary keeps.
const IntentMax = 200

// Result is the outcome of checking one request's envelope.
type Result struct {
	Where        Where
	Version      string      // schema_version as sent ("" when absent or not a string)
	Violations   []Violation // every violation found; none means the envelope meets the edge's contract
	Completeness float64     // 0, 0.25, 0.5, 0.75 or 1: see docs/envelope.md
	Summary      Summary
	// Envelope is the envelope's bytes within the body (it aliases the body).
	Envelope []byte
	env      span // Envelope's offsets in the body, for Stamp
}

// Header is the value of the Baton-Contract header that reports r in
// observe mode: "violations=2; completeness=0.75".
func (r *Result) Header() string {
	return "violations=" + strconv.Itoa(len(r.Violations)) + "; completeness=" + strconv.FormatFloat(r.Completeness, 'f', 2, 64)
}

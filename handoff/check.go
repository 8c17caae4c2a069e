package handoff

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrNoEnvelope is returned by Check for a request that carries no envelope
// (Locate returns None): such a body is opaque and passes on unexamined.
var ErrNoEnvelope = errors.New("handoff: request carries no envelope")

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

// Version is the contract version this Baton implements; it reads every 1.x.
const Version = "1.0.0"

// supportedMajor is the one major version this Baton reads.
const supportedMajor = "1"

var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// Checker checks envelopes against the v1 schema and an edge's policy. It is
// safe for concurrent use.
type Checker struct {
	schema *jsonschema.Schema
	fast   *fastNode // nil when the schema uses a keyword the fast path lacks
	// byLoc maps a compiled schema's location to it, to word errors.
	byLoc map[string]*jsonschema.Schema
	top   map[string]int // top-level member names of the schema
	prov  map[string]int // member names of provenance
}

// NewChecker compiles the embedded schema, once.
func NewChecker() (*Checker, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("handoff: reading the embedded schema: %w", err)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.AssertFormat()
	if err := comp.AddResource(SchemaID, doc); err != nil {
		return nil, fmt.Errorf("handoff: loading the embedded schema: %w", err)
	}
	s, err := comp.Compile(SchemaID)
	if err != nil {
		return nil, fmt.Errorf("handoff: compiling the embedded schema: %w", err)
	}
	c := &Checker{schema: s, byLoc: map[string]*jsonschema.Schema{}, top: names(s)}
	if p := s.Properties["provenance"]; p != nil {
		c.prov = names(p)
	}
	index(s, c.byLoc)
	c.fast, _ = buildFast(s)
	return c, nil
}

func names(s *jsonschema.Schema) map[string]int {
	m := make(map[string]int, len(s.Properties))
	for name := range s.Properties {
		m[name] = len(m)
	}
	return m
}

func index(s *jsonschema.Schema, into map[string]*jsonschema.Schema) {
	if s == nil || into[s.Location] != nil {
		return
	}
	into[s.Location] = s
	for _, p := range s.Properties {
		index(p, into)
	}
	index(s.Items2020, into)
	for _, sub := range s.OneOf {
		index(sub, into)
	}
	index(s.If, into)
	index(s.Then, into)
	index(s.Else, into)
}

// Check finds the envelope of a request (see Locate) and checks it against
// the v1 schema and the edge's policy p. agent is the identity that
// provenance.agent must name: at egress the sending agent's own (Baton
// stamps it there), at ingress the verified sender or "" for no check. Every
// violation goes into the Result; the error is ErrNoEnvelope for a request
// without an envelope. Check does not modify body; Result.Envelope aliases it.
func (c *Checker) Check(contentType string, body []byte, p Policy, agent string) (Result, error) {
	loc := locate(contentType, body)
	if loc.where == None {
		return Result{}, ErrNoEnvelope
	}
	env := body[loc.env.s:loc.env.e]
	r := Result{Where: loc.where, Envelope: env, env: loc.env}
	sum := sha256.Sum256(env)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	r.Summary.Digest = string(hexSum[:])

	prefix := ""
	if loc.where == A2A {
		prefix = A2APointer
	}
	ck := check{c: c, b: env, prefix: prefix, agent: agent}
	if loc.dup != "" { // a pointer into the body, not the envelope
		ck.out = append(ck.out, Violation{Pointer: loc.dup, Kind: KindSchema, Detail: dotted(loc.dup) + " appears more than once on the way to the envelope, and decoders disagree on which copy counts: send it once"})
	}
	if p.MaxBytes > 0 && len(env) > p.MaxBytes {
		ck.add("", KindSize, fmt.Sprintf("the envelope is %d bytes, over this edge's limit of %d: pass large artifacts by reference (artifacts[].ref) or trim them", len(env), p.MaxBytes))
	}
	ck.run(p)
	sortViolations(ck.out)
	r.Version = ck.version
	r.Completeness = ck.completeness
	r.Violations = ck.out
	r.Summary.SchemaVersion = ck.version
	r.Summary.Completeness = ck.completeness
	r.Summary.TaskID = ck.taskID
	r.Summary.Intent = ck.intent
	r.Summary.OpenQuestions = ck.open
	r.Summary.Unverified = ck.unverified
	return r, nil
}

// check holds the state of one Check.
type check struct {
	c      *Checker
	b      []byte // the envelope
	prefix string // pointer of the envelope in the body
	agent  string
	out    []Violation

	root                                               span
	version                                            string
	task, completed, openQ, rejected, provenance, vers span
	completeness                                       float64
	taskID, intent                                     string
	open, unverified                                   int
}

func (ck *check) add(ptr string, k Kind, detail string) {
	ck.out = append(ck.out, Violation{Pointer: ck.prefix + ptr, Kind: k, Detail: detail})
}

func (ck *check) run(p Policy) {
	root, ok := document(ck.b)
	if !ok {
		ck.notJSON()
		return
	}
	ck.root = root
	if ck.b[root.s] != '{' {
		ck.add("", KindSchema, "the envelope must be a JSON object, not "+jsonTypeName(ck.b[root.s]))
		return
	}
	ck.scanTop()
	if !ck.checkVersion() {
		return
	}
	if ck.c.fast == nil || ck.c.fast.check(ck.b, root) != valid {
		ck.validate()
	}
	for _, req := range p.Require {
		if ptr := requirePointer(req); !resolve(ck.b, root, ptr) {
			ck.add(ptr, KindRequired, fmt.Sprintf("%s is required on this edge but missing%s", dotted(ptr), ck.c.hintAt(ptr)))
		}
	}
	ck.score(p.MinCompleteness)
	ck.checkIdentity()
	ck.summarise()
}

// notJSON reports a body that is not one JSON value, with encoding/json's
// words for what is wrong.
func (ck *check) notJSON() {
	_, err := jsonschema.UnmarshalJSON(bytes.NewReader(ck.b))
	why := "it is empty"
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		why = fmt.Sprintf("at byte %d: %s", se.Offset, se.Error())
	case err != nil && len(bytes.TrimSpace(ck.b)) > 0:
		why = err.Error()
	}
	ck.add("", KindSchema, "the envelope is not valid JSON ("+why+")")
}

// scanTop records the top-level members Baton reads, keeping the last of a
// repeated member as decoders do, and reports repeated members and members
// whose names differ from the schema's only in case.
func (ck *check) scanTop() {
	var seen uint64
	for it := objectAt(ck.b, ck.root.s); ; {
		m, ok := it.next()
		if !ok {
			return
		}
		switch {
		case m.is("schema_version"):
			ck.vers = m.val
		case m.is("task"):
			ck.task = m.val
		case m.is("completed"):
			ck.completed = m.val
		case m.is("open_questions"):
			ck.openQ = m.val
		case m.is("rejected_paths"):
			ck.rejected = m.val
		case m.is("provenance"):
			ck.provenance = m.val
		}
		ck.noDuplicate("", m, ck.c.top, &seen)
	}
}

// noDuplicate reports m when an earlier member of its object had the same
// known name, or when its name differs from a known one only in case.
func (ck *check) noDuplicate(parent string, m member, known map[string]int, seen *uint64) {
	var bit int
	var ok bool
	if m.escaped {
		bit, ok = known[m.name()]
	} else {
		bit, ok = known[string(m.key)]
	}
	if ok {
		if *seen&(1<<bit) != 0 {
			name := m.name()
			ck.add(parent+"/"+escapeToken(name), KindSchema, fmt.Sprintf("%q appears more than once, and decoders disagree on which copy counts: send it once", name))
		}
		*seen |= 1 << bit
		return
	}
	name := m.name()
	for k := range known {
		if strings.EqualFold(k, name) {
			ck.add(parent+"/"+escapeToken(name), KindSchema, fmt.Sprintf("%q differs from %q only in case, and some decoders (Go's encoding/json) take it for %s: rename or remove it", name, k, k))
		}
	}
}

// checkVersion reports a missing, malformed or unsupported schema_version,
// and returns whether the envelope can be read as 1.x.
func (ck *check) checkVersion() bool {
	v, ok := stringValue(ck.b, ck.vers)
	switch {
	case !ck.vers.ok():
		ck.add("/schema_version", KindVersion, `schema_version is missing: set it to the contract version the envelope follows, "`+Version+`"`)
		return true
	case !ok:
		ck.add("/schema_version", KindVersion, `schema_version must be a string like "`+Version+`", not `+jsonTypeName(ck.b[ck.vers.s]))
		return true
	}
	ck.version = v
	if !semver.MatchString(v) {
		ck.add("/schema_version", KindVersion, fmt.Sprintf(`schema_version %q is not a semantic version MAJOR.MINOR.PATCH: use %q`, v, Version))
		return true
	}
	if major, _, _ := strings.Cut(v, "."); major != supportedMajor {
		ck.add("/schema_version", KindVersion, fmt.Sprintf("schema_version %s is not supported: this Baton reads envelope versions %s.x (it implements %s; any 1.MINOR.PATCH is accepted and passed on unchanged); send a 1.x envelope or upgrade the receiving Baton", v, supportedMajor, Version))
		return false
	}
	return true
}

// validate runs jsonschema and words its errors.
func (ck *check) validate() {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ck.b))
	if err != nil {
		ck.notJSON()
		return
	}
	err = ck.c.schema.Validate(doc)
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return
	}
	ck.explain(verr)
}

// score computes completeness, and reports each missing part when it is
// below min.
func (ck *check) score(min float64) {
	var missing []Violation
	miss := func(ptr, detail string) {
		missing = append(missing, Violation{Pointer: ck.prefix + ptr, Kind: KindCompleteness, Detail: detail})
	}
	parts := 0
	if ck.isArray(ck.completed) {
		ok := true
		i := 0
		for it := arrayAt(ck.b, ck.completed.s); ; i++ {
			item, more := it.next()
			if !more {
				break
			}
			if !ck.verification(item).ok() {
				ok = false
				miss("/completed/"+strconv.Itoa(i)+"/verification", "completed["+strconv.Itoa(i)+"] does not say how it was checked: set verification to verified, unverified or failed")
			}
		}
		if ok {
			parts++
		}
	} else {
		miss("/completed", "completed is missing: list the work done so far, each item with verification (verified, unverified or failed), or [] if none")
	}
	if ck.isArray(ck.openQ) {
		parts++
	} else {
		miss("/open_questions", "open_questions is missing: list the questions and caveats still open, or [] if there are none")
	}
	if ck.isArray(ck.rejected) {
		parts++
	} else {
		miss("/rejected_paths", "rejected_paths is missing: list what was tried or considered and dropped, and why, or [] if nothing was")
	}
	if ck.agent != "" || ck.provenanceAgent() {
		parts++ // at egress Baton stamps provenance.agent, so it always leaves with one
	} else {
		miss("/provenance/agent", "provenance.agent is missing: the envelope did not pass through the sender's Baton, which stamps it")
	}
	ck.completeness = float64(parts) / 4
	if ck.completeness < min {
		for _, v := range missing {
			v.Detail = fmt.Sprintf("completeness %.2f is below this edge's minimum %.2f: %s", ck.completeness, min, v.Detail)
			ck.out = append(ck.out, v)
		}
	}
}

func (ck *check) isArray(v span) bool { return v.ok() && ck.b[v.s] == '[' }

// verification returns the span of a completed item's verification when it
// is one of the three statuses.
func (ck *check) verification(item span) span {
	if ck.b[item.s] != '{' {
		return span{}
	}
	var v span
	for it := objectAt(ck.b, item.s); ; {
		m, ok := it.next()
		if !ok {
			break
		}
		if m.is("verification") {
			v = m.val
		}
	}
	if isString(ck.b, v, "verified") || isString(ck.b, v, "unverified") || isString(ck.b, v, "failed") {
		return v
	}
	return span{}
}

// provenanceAgent reports whether provenance is an object with a non-empty
// agent string.
func (ck *check) provenanceAgent() bool {
	if !ck.provenance.ok() || ck.b[ck.provenance.s] != '{' {
		return false
	}
	var agent span
	for it := objectAt(ck.b, ck.provenance.s); ; {
		m, ok := it.next()
		if !ok {
			break
		}
		if m.is("agent") {
			agent = m.val
		}
	}
	s, ok := stringValue(ck.b, agent)
	return ok && s != ""
}

// checkIdentity reports every provenance.agent that names another agent than
// ck.agent, and repeated provenance members.
func (ck *check) checkIdentity() {
	if !ck.provenance.ok() || ck.b[ck.provenance.s] != '{' {
		return
	}
	var seen uint64
	for it := objectAt(ck.b, ck.provenance.s); ; {
		m, ok := it.next()
		if !ok {
			return
		}
		ck.noDuplicate("/provenance", m, ck.c.prov, &seen)
		if ck.agent == "" || !m.is("agent") {
			continue
		}
		if claim, ok := stringValue(ck.b, m.val); ok && claim != ck.agent {
			ck.add("/provenance/agent", KindIdentity, fmt.Sprintf("provenance.agent claims %q, but this handoff comes from %q: an agent cannot hand off in another's name; leave provenance.agent out (Baton stamps it) or set it to %q", claim, ck.agent, ck.agent))
		}
	}
}

// summarise fills the summary fields read from the envelope.
func (ck *check) summarise() {
	if ck.task.ok() && ck.b[ck.task.s] == '{' {
		for it := objectAt(ck.b, ck.task.s); ; {
			m, ok := it.next()
			if !ok {
				break
			}
			switch {
			case m.is("id"):
				ck.taskID, _ = stringValue(ck.b, m.val)
			case m.is("intent"):
				ck.intent, _ = stringValue(ck.b, m.val)
			}
		}
		ck.intent = truncate(ck.intent, IntentMax)
	}
	if ck.isArray(ck.openQ) {
		for it := arrayAt(ck.b, ck.openQ.s); ; ck.open++ {
			if _, ok := it.next(); !ok {
				break
			}
		}
	}
	if ck.isArray(ck.completed) {
		for it := arrayAt(ck.b, ck.completed.s); ; {
			item, ok := it.next()
			if !ok {
				break
			}
			if !isString(ck.b, ck.verification(item), "verified") {
				ck.unverified++
			}
		}
	}
}

// truncate cuts s to at most n characters, marking the cut with "…".
func truncate(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return s[:i] + "…"
		}
		count++
	}
	return s
}

func jsonTypeName(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

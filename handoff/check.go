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
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrNoEnvelope is returned by Check for a request that carries no envelope
// (Locate returns None): such a body is opaque and passes on unexamined.
var ErrNoEnvelope = errors.New("handoff: request carries no envelope")

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
	tapes sync.Pool      // *tape, reused across checks
}

// maxPooledNodes caps the tapes kept for reuse (1 MiB of nodes), so that one
// huge envelope does not pin its memory.
const maxPooledNodes = 1 << 16

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
	if len(c.top) > 64 || len(c.prov) > 64 {
		return nil, errors.New("handoff: the schema names more than 64 members in one object") // see noDuplicate
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
// the v1 schema and the edge's policy p. agent is this Baton's agent at
// egress, "" at ingress: at egress Baton stamps provenance.agent (see
// Result.Stamp), so an envelope that claims another agent there is an
// identity violation, and provenance counts as present for completeness.
// Every violation goes into the Result; the only error is ErrNoEnvelope, for
// a request without an envelope. Check does not modify body; Result.Envelope
// aliases it.
func (c *Checker) Check(contentType string, body []byte, p Policy, agent string) (Result, error) {
	t, _ := c.tapes.Get().(*tape)
	if t == nil {
		t = &tape{n: make([]node, 0, 512)}
	}
	defer func() {
		if t.b = nil; cap(t.n) <= maxPooledNodes {
			c.tapes.Put(t)
		}
	}()
	loc := locate(contentType, body, t)
	ck := check{c: c, t: t, agent: agent, root: -1}
	switch loc.where {
	case None:
		return Result{}, ErrNoEnvelope
	case Body:
		ck.env = span{0, len(body)}
		if t.parse(body) {
			ck.root = 0
		}
	case A2A:
		ck.env, ck.root, ck.prefix = t.span(loc.env), loc.env, A2APointer
	}
	env := body[ck.env.s:ck.env.e]
	r := Result{Where: loc.where, Envelope: env, env: ck.env}
	sum := sha256.Sum256(env)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	r.Summary.Digest = string(hexSum[:])

	if loc.dup != "" { // a pointer into the body, not the envelope
		ck.out = append(ck.out, Violation{Pointer: loc.dup, Kind: KindSchema, Detail: dotted(loc.dup) + " appears more than once on the way to the envelope, and decoders disagree on which copy counts: send it once"})
	}
	if p.MaxBytes > 0 && len(env) > p.MaxBytes {
		ck.add("", KindSize, fmt.Sprintf("the envelope is %d bytes, over this edge's limit of %d: pass large artifacts by reference (artifacts[].ref) or trim them", len(env), p.MaxBytes))
	}
	ck.run(env, p)
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
	t      *tape
	root   int    // node of the envelope; -1 when it is not JSON
	env    span   // the envelope's bytes in the body
	prefix string // pointer of the envelope in the body
	agent  string
	out    []Violation

	// nodes of the top-level members Baton reads; -1 when absent
	vers, task, completed, openQ, rejected, provenance int

	version          string
	completeness     float64
	taskID, intent   string
	open, unverified int
}

func (ck *check) add(ptr string, k Kind, detail string) {
	ck.out = append(ck.out, Violation{Pointer: ck.prefix + ptr, Kind: k, Detail: detail})
}

func (ck *check) run(env []byte, p Policy) {
	t := ck.t
	if ck.root < 0 {
		ck.notJSON(env)
		return
	}
	if !t.isObject(ck.root) {
		ck.add("", KindSchema, "the envelope must be a JSON object, not "+jsonTypeName(t.kind(ck.root)))
		return
	}
	ck.scanTop()
	if !ck.checkVersion() {
		return
	}
	if ck.c.fast == nil || ck.c.fast.check(t, ck.root) != valid {
		ck.validate(env)
	}
	for _, req := range p.Require {
		if req != "" && req[0] != '/' && t.member(ck.root, req) >= 0 || req != "" && req[0] == '/' && resolve(t, ck.root, req) {
			continue
		}
		ptr := requirePointer(req)
		ck.add(ptr, KindRequired, fmt.Sprintf("%s is required on this edge but missing%s", dotted(ptr), ck.c.hintAt(ptr)))
	}
	ck.score(p.MinCompleteness)
	ck.checkIdentity()
	ck.summarise()
}

// notJSON reports an envelope that is not one JSON value, with
// encoding/json's words for what is wrong.
func (ck *check) notJSON(env []byte) {
	_, err := jsonschema.UnmarshalJSON(bytes.NewReader(env))
	why := "it is empty"
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		why = fmt.Sprintf("at byte %d: %s", se.Offset, se.Error())
	case err != nil && len(bytes.TrimSpace(env)) > 0:
		why = err.Error()
	}
	ck.add("", KindSchema, "the envelope is not valid JSON ("+why+")")
}

// scanTop records the top-level members Baton reads, keeping the last of a
// repeated member as decoders do, and reports repeated members and members
// whose names differ from the schema's only in case.
func (ck *check) scanTop() {
	t := ck.t
	ck.vers, ck.task, ck.completed, ck.openQ, ck.rejected, ck.provenance = -1, -1, -1, -1, -1, -1
	var seen uint64
	for k, end := t.first(ck.root); k < end; k = t.after(k + 1) {
		switch {
		case t.is(k, "schema_version"):
			ck.vers = k + 1
		case t.is(k, "task"):
			ck.task = k + 1
		case t.is(k, "completed"):
			ck.completed = k + 1
		case t.is(k, "open_questions"):
			ck.openQ = k + 1
		case t.is(k, "rejected_paths"):
			ck.rejected = k + 1
		case t.is(k, "provenance"):
			ck.provenance = k + 1
		}
		ck.noDuplicate("", k, ck.c.top, &seen)
	}
}

// noDuplicate reports member name k when an earlier member of its object had
// the same known name, or when it differs from a known name only in case.
func (ck *check) noDuplicate(parent string, k int, known map[string]int, seen *uint64) {
	t := ck.t
	var bit int
	var ok bool
	if t.exact(k) {
		bit, ok = known[string(t.raw(k))]
	} else {
		name, _ := t.str(k)
		bit, ok = known[name]
	}
	if ok {
		if *seen&(1<<bit) != 0 {
			name, _ := t.str(k)
			ck.add(parent+"/"+escapeToken(name), KindSchema, fmt.Sprintf("%q appears more than once, and decoders disagree on which copy counts: send it once", name))
		}
		*seen |= 1 << bit
		return
	}
	name, _ := t.str(k)
	for want := range known {
		if strings.EqualFold(want, name) {
			ck.add(parent+"/"+escapeToken(name), KindSchema, fmt.Sprintf("%q differs from %q only in case, and some decoders (Go's encoding/json) take it for %s: rename or remove it", name, want, want))
		}
	}
}

// checkVersion reports a missing, malformed or unsupported schema_version,
// and returns whether the envelope can be read as 1.x.
func (ck *check) checkVersion() bool {
	v, ok := ck.t.str(ck.vers)
	switch {
	case ck.vers < 0:
		ck.add("/schema_version", KindVersion, `schema_version is missing: set it to the contract version the envelope follows, "`+Version+`"`)
		return true
	case !ok:
		ck.add("/schema_version", KindVersion, `schema_version must be a string like "`+Version+`", not `+jsonTypeName(ck.t.kind(ck.vers)))
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
func (ck *check) validate(env []byte) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(env))
	if err != nil {
		ck.notJSON(env)
		return
	}
	var verr *jsonschema.ValidationError
	if errors.As(ck.c.schema.Validate(doc), &verr) {
		ck.explain(verr)
	}
}

// score computes completeness, and reports each missing part when it is
// below min.
func (ck *check) score(min float64) {
	t := ck.t
	var missing []Violation
	miss := func(ptr, detail string) {
		missing = append(missing, Violation{Pointer: ck.prefix + ptr, Kind: KindCompleteness, Detail: detail})
	}
	parts := 0
	if t.isArray(ck.completed) {
		ok := true
		i := 0
		for k, end := t.first(ck.completed); k < end; k = t.after(k) {
			if ck.verification(k) < 0 {
				ok = false
				miss("/completed/"+strconv.Itoa(i)+"/verification", "completed["+strconv.Itoa(i)+"] does not say how it was checked: set verification to verified, unverified or failed")
			}
			i++
		}
		if ok {
			parts++
		}
	} else {
		miss("/completed", "completed is missing: list the work done so far, each item with verification (verified, unverified or failed), or [] if none")
	}
	if t.isArray(ck.openQ) {
		parts++
	} else {
		miss("/open_questions", "open_questions is missing: list the questions and caveats still open, or [] if there are none")
	}
	if t.isArray(ck.rejected) {
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

// verification returns the node of a completed item's verification when it
// is one of the three statuses, or -1.
func (ck *check) verification(item int) int {
	t := ck.t
	if !t.isObject(item) {
		return -1
	}
	v := t.member(item, "verification")
	if t.is(v, "verified") || t.is(v, "unverified") || t.is(v, "failed") {
		return v
	}
	return -1
}

// provenanceAgent reports whether provenance is an object with a non-empty
// agent string.
func (ck *check) provenanceAgent() bool {
	if !ck.t.isObject(ck.provenance) {
		return false
	}
	s, ok := ck.t.str(ck.t.member(ck.provenance, "agent"))
	return ok && s != ""
}

// checkIdentity reports every provenance.agent that names another agent than
// ck.agent, and repeated provenance members.
func (ck *check) checkIdentity() {
	t := ck.t
	if !t.isObject(ck.provenance) {
		return
	}
	var seen uint64
	for k, end := t.first(ck.provenance); k < end; k = t.after(k + 1) {
		ck.noDuplicate("/provenance", k, ck.c.prov, &seen)
		if ck.agent == "" || !t.is(k, "agent") {
			continue
		}
		if claim, ok := t.str(k + 1); ok && claim != ck.agent {
			ck.add("/provenance/agent", KindIdentity, fmt.Sprintf("provenance.agent claims %q, but this handoff comes from %q: an agent cannot hand off in another's name; leave provenance.agent out (Baton stamps it) or set it to %q", claim, ck.agent, ck.agent))
		}
	}
}

// summarise fills the summary fields read from the envelope.
func (ck *check) summarise() {
	t := ck.t
	if t.isObject(ck.task) {
		ck.taskID, _ = t.str(t.member(ck.task, "id"))
		intent, _ := t.str(t.member(ck.task, "intent"))
		ck.intent = truncate(intent, IntentMax)
	}
	if t.isArray(ck.openQ) {
		ck.open = t.count(ck.openQ)
	}
	if t.isArray(ck.completed) {
		for k, end := t.first(ck.completed); k < end; k = t.after(k) {
			if !t.is(ck.verification(k), "verified") {
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

package handoff

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// want is one expected violation: its pointer, kind, and words its detail
// must contain.
type want struct {
	pointer string
	kind    Kind
	detail  string
}

func TestCheckViolations(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	tests := []struct {
		name   string
		body   []byte
		policy Policy
		agent  string
		want   []want // exactly these, in order
	}{
		{name: "valid", body: Example()},
		{
			name: "schema: missing required members",
			body: mutate(t, func(m map[string]any) { delete(obj(m, "task"), "intent"); delete(item(m, "rejected_paths", 0), "why") }),
			want: []want{
				{"/rejected_paths/0/why", KindSchema, "rejected_paths[0].why is missing"},
				{"/task/intent", KindSchema, "task.intent is missing (the original human request, in the human's words)"},
			},
		},
		{
			name: "schema: no task at all",
			body: mutate(t, func(m map[string]any) { delete(m, "task") }),
			want: []want{{"/task", KindSchema, "task is missing (the work being handed off)"}},
		},
		{
			name: "schema: wrong types",
			body: mutate(t, func(m map[string]any) {
				obj(m, "task")["intent"] = 42
				m["open_questions"] = "none"
				item(m, "constraints", 0)["hard"] = "yes"
			}),
			want: []want{
				{"/constraints/0/hard", KindSchema, "constraints[0].hard must be true or false, not a string"},
				{"/open_questions", KindSchema, "open_questions must be an array, not a string"},
				{"/task/intent", KindSchema, "task.intent must be a string, not a number"},
			},
		},
		{
			name: "schema: enums, bounds, patterns, formats",
			body: mutate(t, func(m map[string]any) {
				item(m, "completed", 0)["verification"] = "done"
				m["confidence"] = 1.5
				obj(m, "provenance")["trace_id"] = "XYZ"
				obj(m, "provenance")["hop"] = -1
				obj(m, "provenance")["stamped_at"] = "yesterday"
				item(m, "artifacts", 0)["trust"] = "maybe"
				item(m, "artifacts", 0)["media_type"] = "csv"
				obj(m, "task")["id"] = ""
			}),
			want: []want{
				{"/artifacts/0/media_type", KindSchema, `artifacts[0].media_type must be a media type such as text/plain or application/json, not "csv"`},
				{"/artifacts/0/trust", KindSchema, `artifacts[0].trust must be "trusted" or "untrusted", not "maybe"`},
				{"/completed/0/verification", KindSchema, `completed[0].verification must be "verified", "unverified" or "failed", not "done"`},
				{"/confidence", KindSchema, "confidence must be at most 1, not 1.5"},
				{"/provenance/hop", KindSchema, "provenance.hop must be at least 0, not -1"},
				{"/provenance/stamped_at", KindSchema, "must be an RFC 3339 date-time"},
				{"/provenance/trace_id", KindSchema, "must be a W3C trace id: 32 lowercase hexadecimal digits"},
				{"/task/id", KindSchema, "task.id must not be empty"},
			},
		},
		{
			name: "schema: artifact with neither content nor ref, untrusted without source",
			body: mutate(t, func(m map[string]any) {
				a := item(m, "artifacts", 1)
				delete(a, "content")
				delete(a, "source")
			}),
			want: []want{
				{"/artifacts/1", KindSchema, "artifacts[1] must have exactly one of content or ref; it has none"},
				{"/artifacts/1/source", KindSchema, `artifacts[1].source is missing, which is required when trust is "untrusted"`},
			},
		},
		{
			name: "schema: artifact with both content and ref",
			body: mutate(t, func(m map[string]any) { item(m, "artifacts", 1)["ref"] = "s3://x" }),
			want: []want{{"/artifacts/1", KindSchema, "artifacts[1] must have exactly one of content or ref, not several"}},
		},
		{
			name: "schema: not JSON",
			body: []byte(`{"schema_version": "1.0.0", "task": `),
			want: []want{{"", KindSchema, "the envelope is not valid JSON"}},
		},
		{
			name: "schema: not an object",
			body: []byte(`["schema_version", "1.0.0"]`),
			want: []want{{"", KindSchema, "the envelope must be a JSON object, not an array"}},
		},
		{
			name: "schema: repeated and case-variant members",
			body: []byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{"agent":"a"},"provenance":{"agent":"a","Agent":"b"},"Task":{}}`),
			want: []want{
				{"/Task", KindSchema, `"Task" differs from "task" only in case`},
				{"/provenance", KindSchema, `"provenance" appears more than once`},
				{"/provenance/Agent", KindSchema, `"Agent" differs from "agent" only in case`},
			},
		},
		{
			name:   "required: top-level names and pointers",
			body:   mutate(t, func(m map[string]any) { delete(m, "side_effects"); delete(obj(m, "task"), "scope") }),
			policy: Policy{Require: []string{"side_effects", "/task/scope", "/completed/3/evidence", "/completed/9", "memory_refs"}},
			want: []want{
				{"/completed/9", KindRequired, "completed[9] is required on this edge but missing"},
				{"/side_effects", KindRequired, "side_effects is required on this edge but missing (writes already committed"},
				{"/task/scope", KindRequired, "task.scope is required on this edge but missing (what the receiver is asked to do"},
			},
		},
		{
			name:   "required: escaped pointer",
			body:   mutate(t, func(m map[string]any) { m["x/y"] = map[string]any{"a~b": 1} }),
			policy: Policy{Require: []string{"/x~1y/a~0b", "/x~1y/c"}},
			want:   []want{{"/x~1y/c", KindRequired, `["x/y"].c is required on this edge but missing`}},
		},
		{
			name:   "completeness: below the minimum names each missing part",
			body:   mutate(t, func(m map[string]any) { delete(m, "open_questions"); delete(item(m, "completed", 1), "verification") }),
			policy: Policy{MinCompleteness: 0.8},
			want: []want{
				{"/completed/1/verification", KindCompleteness, "completeness 0.50 is below this edge's minimum 0.80: completed[1] does not say how it was checked"},
				{"/open_questions", KindCompleteness, "open_questions is missing: list the questions and caveats still open, or [] if there are none"},
			},
		},
		{
			name:   "completeness: at the minimum",
			body:   mutate(t, func(m map[string]any) { delete(m, "open_questions") }),
			policy: Policy{MinCompleteness: 0.75},
		},
		{
			name:   "size",
			body:   Example(),
			policy: Policy{MaxBytes: 1024},
			want:   []want{{"", KindSize, "over this edge's limit of 1024: pass large artifacts by reference"}},
		},
		{
			name: "version: missing",
			body: mutate(t, func(m map[string]any) { delete(m, "schema_version") }),
			want: []want{{"/schema_version", KindVersion, `schema_version is missing: set it to the contract version the envelope follows, "1.0.0"`}},
		},
		{
			name: "version: not semver",
			body: mutate(t, func(m map[string]any) { m["schema_version"] = "v1" }),
			want: []want{{"/schema_version", KindVersion, `schema_version "v1" is not a semantic version MAJOR.MINOR.PATCH`}},
		},
		{
			name: "version: not a string",
			body: mutate(t, func(m map[string]any) { m["schema_version"] = 1 }),
			want: []want{{"/schema_version", KindVersion, "schema_version must be a string like \"1.0.0\", not a number"}},
		},
		{
			name: "version: unsupported major 2",
			body: mutate(t, func(m map[string]any) { m["schema_version"] = "2.0.0"; m["task"] = "whatever 2.x says" }),
			want: []want{{"/schema_version", KindVersion, "schema_version 2.0.0 is not supported: this Baton reads envelope versions 1.x"}},
		},
		{
			name: "version: unsupported major 0",
			body: mutate(t, func(m map[string]any) { m["schema_version"] = "0.9.0" }),
			want: []want{{"/schema_version", KindVersion, "schema_version 0.9.0 is not supported"}},
		},
		{
			name:  "identity: another agent claimed",
			body:  Example(),
			agent: "planner",
			want:  []want{{"/provenance/agent", KindIdentity, `provenance.agent claims "analyst", but this handoff comes from "planner"`}},
		},
		{
			name:  "identity: every copy of a repeated agent is checked",
			body:  []byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{"agent":"root","agent":"analyst"}}`),
			agent: "analyst",
			want: []want{
				{"/provenance/agent", KindSchema, `"agent" appears more than once`},
				{"/provenance/agent", KindIdentity, `provenance.agent claims "root"`},
			},
		},
		{
			name:  "identity: the own agent, or none, is fine",
			body:  mutate(t, func(m map[string]any) { delete(obj(m, "provenance"), "agent") }),
			agent: "analyst",
		},
		{
			name:   "every violation of every kind at once",
			body:   []byte(`{"schema_version":"1.0","task":{"id":"t"},"confidence":"high","provenance":{"agent":"root"}}`),
			policy: Policy{Require: []string{"side_effects"}, MinCompleteness: 0.5, MaxBytes: 10},
			agent:  "analyst",
			want: []want{
				{"", KindSize, "over this edge's limit of 10"},
				{"/schema_version", KindVersion, `"1.0" is not a semantic version`},
				{"/confidence", KindSchema, "confidence must be a number, not a string"},
				{"/task/intent", KindSchema, "task.intent is missing"},
				{"/side_effects", KindRequired, "side_effects is required on this edge"},
				{"/completed", KindCompleteness, "completeness 0.25 is below this edge's minimum 0.50: completed is missing"},
				{"/open_questions", KindCompleteness, "open_questions is missing"},
				{"/rejected_paths", KindCompleteness, "rejected_paths is missing"},
				{"/provenance/agent", KindIdentity, `claims "root"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := c.Check(MediaType, tt.body, tt.policy, tt.agent)
			if err != nil {
				t.Fatal(err)
			}
			assertViolations(t, r.Violations, tt.want)
		})
	}
}

func assertViolations(t *testing.T, got []Violation, wants []want) {
	t.Helper()
	for i := range max(len(got), len(wants)) {
		switch {
		case i >= len(wants):
			t.Errorf("unexpected violation %s [%s] %s", got[i].Pointer, got[i].Kind, got[i].Detail)
		case i >= len(got):
			t.Errorf("missing violation %s [%s] …%s…", wants[i].pointer, wants[i].kind, wants[i].detail)
		case got[i].Pointer != wants[i].pointer || got[i].Kind != wants[i].kind || !strings.Contains(got[i].Detail, wants[i].detail):
			t.Errorf("violation %d:\n got %s [%s] %s\nwant %s [%s] …%s…", i, got[i].Pointer, got[i].Kind, got[i].Detail, wants[i].pointer, wants[i].kind, wants[i].detail)
		}
	}
}

func TestCompleteness(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	minimal := func(extra string) []byte {
		return []byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"i"}` + extra + `}`)
	}
	tests := []struct {
		name  string
		body  []byte
		agent string // "" scores as at ingress
		want  float64
	}{
		{name: "the example", body: Example(), want: 1},
		{name: "nothing but the task", body: minimal(""), want: 0},
		{name: "nothing but the task, at egress: Baton stamps provenance", body: minimal(""), agent: "analyst", want: 0.25},
		{name: "empty lists count", body: minimal(`,"completed":[],"open_questions":[],"rejected_paths":[]`), want: 0.75},
		{name: "empty lists and provenance", body: minimal(`,"completed":[],"open_questions":[],"rejected_paths":[],"provenance":{"agent":"a"}`), want: 1},
		{name: "a completed item without verification", body: minimal(`,"completed":[{"summary":"s","verification":"verified"},{"summary":"s"}]`), want: 0},
		{name: "a completed item with a bogus verification", body: minimal(`,"completed":[{"summary":"s","verification":"yes"}]`), want: 0},
		{name: "every completed item verified or not", body: minimal(`,"completed":[{"summary":"s","verification":"unverified"},{"summary":"s","verification":"failed"}]`), want: 0.25},
		{name: "provenance without agent", body: minimal(`,"provenance":{"model":"m"}`), want: 0},
		{name: "provenance with an empty agent", body: minimal(`,"provenance":{"agent":""}`), want: 0},
		{name: "null is not a list", body: minimal(`,"open_questions":null,"rejected_paths":null`), want: 0},
		{name: "unsupported major scores nothing", body: []byte(`{"schema_version":"2.0.0","completed":[],"open_questions":[]}`), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := c.Check(MediaType, tt.body, Policy{}, tt.agent)
			if err != nil {
				t.Fatal(err)
			}
			if r.Completeness != tt.want || r.Summary.Completeness != tt.want {
				t.Fatalf("completeness %v (summary %v), want %v", r.Completeness, r.Summary.Completeness, tt.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	long := strings.Repeat("é", IntentMax+50)
	body := mutate(t, func(m map[string]any) { obj(m, "task")["intent"] = long })
	r, err := c.Check(MediaType, body, Policy{}, "")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	want := Summary{
		Digest:        hex.EncodeToString(sum[:]),
		TaskID:        "task-7f3a9c",
		Intent:        strings.Repeat("é", IntentMax) + "…",
		Completeness:  1,
		OpenQuestions: 2,
		Unverified:    2,
		SchemaVersion: "1.0.0",
	}
	if r.Summary != want {
		t.Fatalf("summary\n got %+v\nwant %+v", r.Summary, want)
	}
	if utf8.RuneCountInString(r.Summary.Intent) != IntentMax+1 || r.Version != "1.0.0" {
		t.Fatalf("intent of %d characters, version %q", utf8.RuneCountInString(r.Summary.Intent), r.Version)
	}
	// A summary is JSON for records.
	if _, err := json.Marshal(r.Summary); err != nil {
		t.Fatal(err)
	}
}

func TestCheckA2A(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	broken := mutate(t, func(m map[string]any) { delete(obj(m, "task"), "intent") })
	tests := []struct {
		name    string
		body    []byte
		wantErr error
		want    []want
	}{
		{name: "v1.0 SendMessage", body: a2aRequest("SendMessage", Example())},
		{name: "v1.0 SendStreamingMessage", body: a2aRequest("SendStreamingMessage", Example())},
		{name: "v0.3 message/send", body: a2aRequest("message/send", Example())},
		{name: "v0.3 message/stream", body: a2aRequest("message/stream", Example())},
		{
			name: "v1.0 with a broken envelope: pointers lead into the request",
			body: a2aRequest("SendMessage", broken),
			want: []want{{A2APointer + "/task/intent", KindSchema, "task.intent is missing"}},
		},
		{
			name: "v0.3 with an envelope that is not an object",
			body: a2aRequest("message/send", []byte(`"see attached"`)),
			want: []want{{A2APointer, KindSchema, "the envelope must be a JSON object, not a string"}},
		},
		{
			name: "repeated metadata key",
			body: []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"baton.handoff":{},"baton.handoff":` + string(Example()) + `}}}}`),
			want: []want{{A2APointer, KindSchema, `params.message.metadata["baton.handoff"] appears more than once on the way to the envelope`}},
		},
		{name: "v1.0 without an envelope", body: []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":"hi"}]}}}`), wantErr: ErrNoEnvelope},
		{name: "v0.3 without an envelope", body: []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{}}}}`), wantErr: ErrNoEnvelope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := c.Check("application/json", tt.body, Policy{}, "")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if r.Where != A2A {
				t.Fatalf("Where %v", r.Where)
			}
			assertViolations(t, r.Violations, tt.want)
		})
	}
}

// A newer minor passes: members 1.0 does not know are allowed anywhere.
func TestCheckNewerMinor(t *testing.T) {
	t.Parallel()
	r, err := newChecker(t).Check(MediaType, newerMinor(t), Policy{MinCompleteness: 1}, "analyst")
	if err != nil || len(r.Violations) > 0 || r.Version != "1.7.0" {
		t.Fatalf("err %v, version %q, violations %+v", err, r.Version, r.Violations)
	}
}

// newerMinor is the example as a 1.7.0 sender would write it, with members
// this Baton does not know at every level.
func newerMinor(tb testing.TB) []byte {
	return mutate(tb, func(m map[string]any) {
		m["schema_version"] = "1.7.0"
		m["budget"] = map[string]any{"tokens": 120000, "currency": "EUR"}
		obj(m, "task")["priority"] = "p1"
		item(m, "completed", 0)["verified_by"] = "reviewer"
		obj(m, "provenance")["cost"] = map[string]any{"usd": 0.42}
		item(m, "artifacts", 0)["checksum"] = "sha256:abc"
	})
}

// One Checker serves concurrent checks (run with -race).
func TestCheckConcurrent(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	inputs := []struct {
		contentType string
		body        []byte
	}{
		{MediaType, Example()},
		{"application/json", a2aRequest("SendMessage", newerMinor(t))},
		{MediaType, mutate(t, func(m map[string]any) { delete(obj(m, "task"), "intent") })},
		{MediaType, []byte(`{"schema_version":"2.0.0"}`)},
	}
	want := make([]Result, len(inputs))
	for i, in := range inputs {
		want[i], _ = c.Check(in.contentType, in.body, Policy{MinCompleteness: 1}, "analyst")
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for n := range 50 {
				i := (g + n) % len(inputs)
				got, _ := c.Check(inputs[i].contentType, inputs[i].body, Policy{MinCompleteness: 1}, "analyst")
				if got.Summary != want[i].Summary || len(got.Violations) != len(want[i].Violations) {
					errs <- fmt.Errorf("input %d: got %+v, want %+v", i, got.Summary, want[i].Summary)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestErrNoEnvelope(t *testing.T) {
	t.Parallel()
	_, err := newChecker(t).Check("text/plain", []byte("hello"), Policy{}, "")
	if !errors.Is(err, ErrNoEnvelope) {
		t.Fatalf("err %v", err)
	}
}

func TestResultHeader(t *testing.T) {
	t.Parallel()
	r := Result{Violations: make([]Violation, 3), Completeness: 0.625}
	if got := r.Header(); got != "violations=3; completeness=0.62" {
		t.Fatalf("Header() = %q", got)
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy Policy
		want   []string // substrings of the error; none for a valid policy
	}{
		{name: "zero", policy: Policy{}},
		{name: "full", policy: Policy{Mode: Enforce, Require: []string{"open_questions", "/task/scope", "/a~0b~1c"}, MinCompleteness: 1, MaxBytes: 1 << 20}},
		{name: "bad everything", policy: Policy{Mode: 7, Require: []string{"", "/task/~2"}, MinCompleteness: 1.5, MaxBytes: -1}, want: []string{
			"mode: must be off, observe or enforce", `require[0]: "": must be a member name`, `require[1]: "/task/~2": in a JSON pointer "~" must be followed by 0 or 1`,
			"min_completeness: must be between 0 and 1, got 1.5", "max_bytes: must be >= 0",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Validate()
			if (err != nil) != (len(tt.want) > 0) {
				t.Fatalf("Validate() = %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{in: "", want: Off}, {in: "off", want: Off}, {in: "observe", want: Observe}, {in: "enforce", want: Enforce}, {in: "Enforce", wantErr: true},
	} {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseMode(tt.in)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("ParseMode(%q) = %v, %v", tt.in, got, err)
			}
			if err == nil && tt.in != "" && got.String() != tt.in {
				t.Fatalf("String() = %q", got.String())
			}
		})
	}
}

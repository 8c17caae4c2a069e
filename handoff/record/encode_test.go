package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// encodedFields is every field the encoders write, as "json tag: Go type".
// TestEncodedFieldsMatchStructs fails when a struct gains, loses or changes
// a field, so that the encoders are updated along with the structs.
var encodedFields = map[reflect.Type][]string{
	reflect.TypeFor[Record](): {
		"id: string",
		"trace_id: string",
		"span_id: string",
		"parent_id,omitempty: string",
		"side: record.Side",
		"from: string",
		"to: string",
		"hop: int",
		"idempotency_key,omitempty: string",
		"method: string",
		"target: string",
		"call,omitempty: string",
		"request_digest: string",
		"envelope,omitempty: *record.EnvelopeSummary",
		"shaping,omitempty: *record.Shaping",
		"trust,omitempty: []string",
		"grant,omitempty: string",
		"sender_key_id,omitempty: string",
		"caller,omitempty: string",
		"key_source,omitempty: string",
		"position,omitempty: int",
		"correlation,omitempty: string",
		"compensates,omitempty: string",
		"state: record.State",
		"status,omitempty: int",
		"attempts: int",
		"latency_ms: float64",
		"outcome,omitempty: string",
		"error,omitempty: string",
		"stopped_at,omitempty: string",
		"resolved_by,omitempty: string",
		"approval,omitempty: *record.Approval",
		"side_effects,omitempty: []string",
		"replayable: bool",
		"journal,omitempty: *record.JournalSummary",
		"uncorrelated_calls,omitempty: int",
		"created: time.Time",
		"updated: time.Time",
		"request,omitempty: *record.Request",
	},
	reflect.TypeFor[EnvelopeSummary](): {
		"digest: string",
		"schema_version,omitempty: string",
		"task_id,omitempty: string",
		"intent,omitempty: string",
		"completeness: float64",
		"open_questions: int",
		"unverified: int",
		"violations,omitempty: int",
	},
	reflect.TypeFor[Shaping](): {
		"tokens: int",
		"tokens_before: int",
		"max_tokens,omitempty: int",
		"tokenizer: string",
		"dropped,omitempty: []string",
		"trimmed,omitempty: []string",
	},
	reflect.TypeFor[JournalSummary](): {
		"hits: int",
		"misses: int",
		"journaled: int",
		"saved_bytes,omitempty: int64",
		"saved_tokens,omitempty: int64",
		"skipped,omitempty: []string",
	},
	reflect.TypeFor[Approval](): {
		"gate: string",
		"expires: time.Time",
		"decision,omitempty: string",
		"by,omitempty: string",
		"at,omitempty: *time.Time",
		"reason,omitempty: string",
	},
	reflect.TypeFor[Update](): {
		"id: string",
		"state: record.State",
		"status,omitempty: int",
		"attempts: int",
		"latency_ms: float64",
		"outcome,omitempty: string",
		"error,omitempty: string",
		"stopped_at,omitempty: string",
		"resolved_by,omitempty: string",
		"approval,omitempty: *record.Approval",
		"side_effects,omitempty: []string",
		"updated: time.Time",
	},
	reflect.TypeFor[Entry](): {
		"seq: int",
		"prev: string",
		"at: time.Time",
		"record,omitempty: *record.Record",
		"update,omitempty: *record.Update",
	},
	reflect.TypeFor[Request](): {
		"method: string",
		"url: string",
		"header: http.Header",
		"body,omitempty: []uint8",
		"body_bytes: int64",
		"truncated,omitempty: bool",
	},
}

func TestEncodedFieldsMatchStructs(t *testing.T) {
	for typ, want := range encodedFields {
		var got []string
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			tag, ok := f.Tag.Lookup("json")
			if !ok {
				tag = f.Name
			}
			got = append(got, tag+": "+f.Type.String())
		}
		if slices.Equal(got, want) {
			continue
		}
		var unknown, gone []string
		for _, g := range got {
			if !slices.Contains(want, g) {
				unknown = append(unknown, g)
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				gone = append(gone, w)
			}
		}
		t.Errorf("%s: AppendJSON does not encode %q; encodes fields that are gone or changed %q; fields in order %q",
			typ, unknown, gone, got)
	}
}

// substituted returns r with the values json.Marshal rejects replaced as
// AppendJSON documents, so json.Marshal of it is what AppendJSON must give.
func substituted(r Record) Record {
	finite := func(f float64) float64 {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	}
	valid := func(t time.Time) time.Time {
		if _, err := t.MarshalJSON(); err == nil {
			return t
		}
		if _, err := t.UTC().MarshalJSON(); err == nil {
			return t.UTC()
		}
		return time.Time{}
	}
	r.Latency = finite(r.Latency)
	r.Created, r.Updated = valid(r.Created), valid(r.Updated)
	if r.Approval != nil {
		a := *r.Approval
		a.Expires = valid(a.Expires)
		if a.At != nil {
			at := valid(*a.At)
			a.At = &at
		}
		r.Approval = &a
	}
	if r.Envelope != nil {
		e := *r.Envelope
		e.Completeness = finite(e.Completeness)
		r.Envelope = &e
	}
	return r
}

// checkRecord fails unless r.AppendJSON gives json.Marshal's bytes (for the
// substituted record where json.Marshal rejects r) after any prefix, and the
// bytes decode back to r.
func checkRecord(t *testing.T, r *Record) {
	t.Helper()
	s := substituted(*r)
	want, err := json.Marshal(&s)
	if err != nil {
		t.Fatalf("json.Marshal of the substituted record: %v", err)
	}
	prefix := []byte("prefix")
	got := r.AppendJSON(slices.Clip(prefix))
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("AppendJSON overwrote the buffer: %q", got)
	}
	if got = got[len(prefix):]; !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON differs from json.Marshal\n got: %s\nwant: %s", got, want)
	}
	checkEntries(t, r, s)
	back := new(Record)
	if err := json.Unmarshal(got, back); err != nil {
		t.Fatalf("json.Unmarshal: %v", err)
	}
	if want, ok := decodedForm(back, s); !reflect.DeepEqual(*back, want) || !ok {
		t.Fatalf("round trip changed the record\n got: %s\nwant: %s", dump(*back), dump(want))
	}
}

// checkEntries fails unless encodeEntry gives json.Marshal's bytes of the
// Entry it documents, for r as a first entry (a snapshot without its
// checkpoint) and as a later one (an Update); s is r substituted.
func checkEntries(t *testing.T, r *Record, s Record) {
	t.Helper()
	now := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.FixedZone("", 3600))
	for _, stored := range []bool{false, true} {
		rr := *r
		rr.stored = stored
		got, seq := encodeEntry("3:abcd", &rr, now)
		e := Entry{Seq: 4, Prev: "abcd", At: now.UTC()}
		if stored {
			e.Update = &Update{ID: s.ID, State: s.State, Status: s.Status, Attempts: s.Attempts, Latency: s.Latency,
				Outcome: s.Outcome, Error: s.Error, StoppedAt: s.StoppedAt, ResolvedBy: s.ResolvedBy, Approval: s.Approval, Effects: s.Effects, Updated: s.Updated}
		} else {
			snap := s
			snap.Request = nil
			e.Record = &snap
		}
		want, err := json.Marshal(&e)
		if err != nil {
			t.Fatalf("json.Marshal of the entry: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encodeEntry (stored %v) differs from json.Marshal\n got: %s\nwant: %s", stored, got, want)
		}
		if seq != 4 {
			t.Fatalf("encodeEntry: seq %d, want 4", seq)
		}
	}
}

// decodedForm returns what json.Unmarshal should make of r encoded, and
// whether the times decoded holds are r's (compared here, then zeroed in
// both). JSON keeps no empty omitempty slices, no invalid UTF-8 (each byte
// becomes U+FFFD) and not the unexported field.
func decodedForm(decoded *Record, r Record) (Record, bool) {
	ok := sameTime(decoded.Created, r.Created) && sameTime(decoded.Updated, r.Updated)
	decoded.Created, decoded.Updated = time.Time{}, time.Time{}
	r.Created, r.Updated = time.Time{}, time.Time{}
	r.checkpointed = false
	if len(r.Trust) == 0 {
		r.Trust = nil
	}
	if r.Request != nil {
		q := *r.Request
		if len(q.Body) == 0 {
			q.Body = nil
		}
		if q.Header != nil {
			// Names alike but for invalid bytes decode as one: the last.
			q.Header = http.Header{}
			for _, k := range slices.Sorted(maps.Keys(r.Request.Header)) {
				q.Header[toValidUTF8(k)] = validUTF8(r.Request.Header[k])
			}
		}
		q.Method, q.URL = toValidUTF8(q.Method), toValidUTF8(q.URL)
		r.Request = &q
	}
	if r.Envelope != nil {
		e := *r.Envelope
		for _, s := range []*string{&e.Digest, &e.Version, &e.TaskID, &e.Intent} {
			*s = toValidUTF8(*s)
		}
		r.Envelope = &e
	}
	if r.Shaping != nil {
		sh := *r.Shaping
		sh.Tokenizer = toValidUTF8(sh.Tokenizer)
		if sh.Dropped = validUTF8(sh.Dropped); len(sh.Dropped) == 0 {
			sh.Dropped = nil
		}
		if sh.Trimmed = validUTF8(sh.Trimmed); len(sh.Trimmed) == 0 {
			sh.Trimmed = nil
		}
		r.Shaping = &sh
	}
	if r.Journal != nil {
		j := *r.Journal
		j.Skipped = validUTF8(j.Skipped)
		if len(j.Skipped) == 0 {
			j.Skipped = nil
		}
		r.Journal = &j
	}
	if r.Approval != nil {
		a := *r.Approval
		ok = ok && sameTime(decoded.Approval.Expires, a.Expires) && (a.At == nil) == (decoded.Approval.At == nil)
		if a.At != nil && decoded.Approval.At != nil {
			ok = ok && sameTime(*decoded.Approval.At, *a.At)
		}
		decoded.Approval.Expires, decoded.Approval.At = time.Time{}, nil
		a.Expires, a.At = time.Time{}, nil
		for _, s := range []*string{&a.Gate, &a.Decision, &a.By, &a.Reason} {
			*s = toValidUTF8(*s)
		}
		r.Approval = &a
	}
	r.Trust = validUTF8(r.Trust)
	if r.Effects = validUTF8(r.Effects); len(r.Effects) == 0 {
		r.Effects = nil
	}
	for _, s := range []*string{&r.ID, &r.TraceID, &r.SpanID, &r.ParentID, (*string)(&r.Side), &r.From, &r.To,
		&r.Key, &r.Method, &r.Target, &r.Call, &r.RequestDigest, &r.Grant, &r.SenderKeyID, &r.Caller, (*string)(&r.State),
		&r.Outcome, &r.Error, &r.KeySource, &r.Correlation, &r.StoppedAt, &r.ResolvedBy, &r.Compensates} {
		*s = toValidUTF8(*s)
	}
	return r, ok
}

// sameTime reports whether decoded is t as far as RFC 3339 text holds it:
// the instant and offset, with the offset in whole minutes.
func sameTime(decoded, t time.Time) bool {
	want, err := time.Parse(time.RFC3339Nano, t.Format(time.RFC3339Nano))
	if err != nil {
		return false
	}
	_, got := decoded.Zone()
	_, off := want.Zone()
	return decoded.Equal(want) && got == off
}

// dump shows r with what its pointers point to.
func dump(r Record) string {
	var env, req string
	if r.Envelope != nil {
		env = fmt.Sprintf("%#v", *r.Envelope)
	}
	if r.Request != nil {
		req = fmt.Sprintf("%#v", *r.Request)
	}
	if r.Journal != nil {
		req += fmt.Sprintf("\njournal %#v", *r.Journal)
	}
	if r.Shaping != nil {
		req += fmt.Sprintf("\nshaping %#v", *r.Shaping)
	}
	if r.Approval != nil {
		req += fmt.Sprintf("\napproval %#v", *r.Approval)
	}
	r.Envelope, r.Request, r.Journal, r.Approval, r.Shaping = nil, nil, nil, nil, nil
	return fmt.Sprintf("%#v\nenvelope %s\nrequest %s", r, env, req)
}

// toValidUTF8 replaces each invalid byte by U+FFFD, as encoding/json does
// (strings.ToValidUTF8 would replace runs of them).
func toValidUTF8(s string) string {
	return strings.Map(func(r rune) rune { return r }, s)
}

func validUTF8(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = toValidUTF8(s)
	}
	return out
}

// checkRequest fails unless q.AppendJSON gives json.Marshal's bytes.
func checkRequest(t *testing.T, q *Request) {
	t.Helper()
	want, err := json.Marshal(q)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if got := q.AppendJSON(nil); !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON differs from json.Marshal\n got: %s\nwant: %s", got, want)
	}
}

var (
	cest = time.FixedZone("CEST", 2*3600)
	nst  = time.FixedZone("NST", -(3*3600 + 30*60))
)

func fullRecord() *Record {
	return &Record{
		ID:            "4bf92f3577b34da6a3ce929d0e0e4736.00f067aa0ba902b7",
		TraceID:       "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:        "00f067aa0ba902b7",
		ParentID:      "4bf92f3577b34da6a3ce929d0e0e4736.1122334455667788",
		Side:          Egress,
		From:          "planner",
		To:            "researcher",
		Hop:           3,
		Key:           "idem-<1>&'2'",
		Method:        http.MethodPost,
		Target:        "http://researcher:8080/v1/tasks?a=1&b=<2>",
		RequestDigest: "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
		Envelope: &EnvelopeSummary{Digest: "d", Version: "1.2", TaskID: "t", Intent: "find \"x\"",
			Completeness: 0.75, OpenQuestions: 2, Unverified: 1, Violations: 4},
		Trust:       []string{"verified", "untrusted:web"},
		Grant:       "read:docs",
		SenderKeyID: "k1",
		Caller:      "jwt:user-<7>",
		KeySource:   KeyFromPosition,
		Position:    2,
		Correlation: CorrelatedByBaggage,
		State:       Dead,
		Status:      503,
		Attempts:    5,
		Latency:     123456789.125,
		Outcome:     "gave up after 5 attempts",
		Error:       "dial tcp: connection refused\n",
		StoppedAt:   "4bf92f3577b34da6a3ce929d0e0e4736.aabbccddeeff0011",
		ResolvedBy:  "4bf92f3577b34da6a3ce929d0e0e4736.<&>",
		Replayable:  true,
		Created:     time.Date(2025, 3, 4, 5, 6, 7, 890123000, cest),
		Updated:     time.Date(2025, 3, 4, 5, 6, 8, 1, nst),
		Request: &Request{
			Method: http.MethodPost,
			URL:    "http://researcher:8080/v1/tasks",
			Header: http.Header{
				"Content-Type": {"application/json"},
				"X-Multi":      {"a", "b<>"},
				"X-Empty":      {},
				"X-Nil":        nil,
				"Accept":       {"*/*"},
			},
			Body:      []byte(`{"task":"summarise"}`),
			BodyBytes: 20,
			Truncated: true,
		},
		checkpointed: true,
	}
}

func TestRecordAppendJSON(t *testing.T) {
	utc := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	with := func(f func(r *Record)) *Record {
		r := &Record{ID: "r", State: Sent, Side: Ingress, Created: utc, Updated: utc}
		f(r)
		return r
	}
	withText := func(s string) *Record {
		return with(func(r *Record) { r.Outcome, r.From, r.Trust = s, s, []string{s, s + s} })
	}
	withLatency := func(f float64) *Record { return with(func(r *Record) { r.Latency = f }) }
	withTime := func(tm time.Time) *Record { return with(func(r *Record) { r.Created = tm }) }
	withRequest := func(q *Request) *Record { return with(func(r *Record) { r.Request = q }) }

	tests := map[string]*Record{
		"empty":               {},
		"every field set":     fullRecord(),
		"minimal":             with(func(*Record) {}),
		"html":                withText(`<script>alert("x&y")</script>`),
		"quotes and slashes":  withText(`a"b\c/d`),
		"control chars":       withText("\x00\x01\x07\b\t\n\v\f\r\x1b\x1f\x7f"),
		"invalid utf-8":       withText("a\xffb\xc3(\xed\xa0\x80\xf0\x9f\x98z\xc3"),
		"line separators":     withText("a\u2028b\u2029c\u2027\u202a"),
		"unicode":             withText("héllo 日本語 🚀 \ufffd \uFEFF"),
		"long text":           withText(strings.Repeat("abc<def>\n", 200)),
		"empty trust":         with(func(r *Record) { r.Trust = []string{} }),
		"trust of empty":      with(func(r *Record) { r.Trust = []string{""} }),
		"negative ints":       with(func(r *Record) { r.Hop, r.Status, r.Attempts = -1, math.MinInt64, math.MaxInt64 }),
		"zero envelope":       with(func(r *Record) { r.Envelope = &EnvelopeSummary{} }),
		"float 1e21":          withLatency(1e21),
		"float below 1e21":    withLatency(math.Nextafter(1e21, 0)),
		"float 1e-6":          withLatency(1e-6),
		"float below 1e-6":    withLatency(math.Nextafter(1e-6, 0)),
		"float 1e-7":          withLatency(1e-7),
		"float 123456789.125": withLatency(123456789.125),
		"float -0":            withLatency(math.Copysign(0, -1)),
		"float negative":      withLatency(-2.5e-300),
		"float max":           withLatency(math.MaxFloat64),
		"float smallest":      withLatency(math.SmallestNonzeroFloat64),
		"float 1e100":         withLatency(1e100),
		"float 0.1":           withLatency(0.1),
		"float 1e20":          withLatency(1e20),
		"nan":                 withLatency(math.NaN()),
		"+inf":                withLatency(math.Inf(1)),
		"-inf envelope": with(func(r *Record) {
			r.Envelope = &EnvelopeSummary{Completeness: math.Inf(-1)}
		}),
		"time nanoseconds":     withTime(time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC)),
		"time trailing zeros":  withTime(time.Date(2024, 2, 29, 23, 59, 59, 120000000, time.UTC)),
		"time zone east":       withTime(time.Date(2024, 6, 1, 0, 0, 0, 5, cest)),
		"time zone west":       withTime(time.Date(2024, 6, 1, 0, 0, 0, 5, nst)),
		"time zone zero":       withTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.FixedZone("GMT", 0))),
		"time zone seconds":    withTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.FixedZone("LMT", 3600+59))),
		"time zone 23:59":      withTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.FixedZone("", 23*3600+59*60))),
		"time local":           withTime(time.Now()),
		"time year 0":          withTime(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)),
		"time year 9999":       withTime(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)),
		"time year 10000":      withTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
		"time year -1":         withTime(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)),
		"time zone 24h":        withTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))),
		"time zone -100h":      withTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.FixedZone("", -100*3600))),
		"time zone 24h at end": withTime(time.Date(9999, 12, 31, 0, 0, 0, 0, time.FixedZone("", -25*3600))),
		"request nil header":   withRequest(&Request{}),
		"request empty header": withRequest(&Request{Header: http.Header{}}),
		"request empty body":   withRequest(&Request{Body: []byte{}}),
		"request odd header": withRequest(&Request{Header: http.Header{
			"b": {"\u2028<"}, "B": {""}, "a\xff": nil, "": {}, "\u00e9": {"x"}, "<&>": {"\x00"},
		}}),
	}
	for name, r := range tests {
		t.Run(name, func(t *testing.T) { checkRecord(t, r) })
	}
}

// TestRecordAppendJSONRejectedValues pins what AppendJSON writes for the
// values json.Marshal rejects.
func TestRecordAppendJSONRejectedValues(t *testing.T) {
	tests := []struct {
		name string
		r    Record
		want string
	}{
		{"nan", Record{Latency: math.NaN()}, `"latency_ms":0,`},
		{"inf", Record{Envelope: &EnvelopeSummary{Completeness: math.Inf(1)}}, `"completeness":0,`},
		{"zone over 23h", Record{Created: time.Date(2024, 6, 1, 1, 2, 3, 4, time.FixedZone("", 24*3600))},
			`"created":"2024-05-31T01:02:03.000000004Z"`},
		{"year 10000", Record{Created: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
			`"created":"0001-01-01T00:00:00Z"`},
		{"year -1", Record{Updated: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
			`"updated":"0001-01-01T00:00:00Z"`},
	}
	for _, tt := range tests {
		if _, err := json.Marshal(&tt.r); err == nil {
			t.Errorf("%s: json.Marshal accepts the record", tt.name)
		}
		got := tt.r.AppendJSON(nil)
		if !bytes.Contains(got, []byte(tt.want)) {
			t.Errorf("%s: got %s, want it to hold %s", tt.name, got, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: invalid JSON %s", tt.name, got)
		}
	}
}

func TestRequestAppendJSON(t *testing.T) {
	tests := map[string]*Request{
		"nil":          nil,
		"empty":        {},
		"empty header": {Header: http.Header{}},
		"nil body":     {Header: http.Header{"A": nil}},
		"empty body":   {Body: []byte{}, Header: http.Header{"A": {}}},
		"body":         {Body: []byte{0, 1, 2, 0xff, 0xfe}, BodyBytes: 5},
		"body lengths": {Body: []byte("ab"), BodyBytes: -1},
		"full":         fullRecord().Request,
		"many headers": manyHeaders(sortedKeysOnStack + 10),
		"exact stack":  manyHeaders(sortedKeysOnStack),
		"text": {Method: "GET\x00", URL: "http://h/?q=<a>&b=\u2029\xff", Header: http.Header{
			"Z": {"1"}, "a": {"2"}, "A": {"3"}, "Ab": {"4"}, "Aa": {"5", "6"}, "\x7f": {"7"}}},
	}
	for name, q := range tests {
		t.Run(name, func(t *testing.T) { checkRequest(t, q) })
	}
	var nilRecord *Record
	if got := nilRecord.AppendJSON(nil); string(got) != "null" {
		t.Errorf("nil record: got %s", got)
	}
}

func manyHeaders(n int) *Request {
	h := http.Header{}
	for i := range n {
		h[strings.Repeat("k", i%7)+string(rune('A'+i%50))+strings.Repeat("x", i)] = []string{"v"}
	}
	return &Request{Method: "PUT", Header: h, Body: make([]byte, 100), BodyBytes: 100}
}

// tricky are fragments random strings are made of.
var tricky = []string{
	"a", "Z", "0", " ", "/", "\"", "\\", "<", ">", "&", "'", "\x00", "\b", "\t", "\n", "\f", "\r",
	"\x1f", "\x7f", "é", "日本", "🚀", "\u2028", "\u2029", "\ufffd", "\xff", "\xc3", "\xed\xa0\x80",
	"\xf4\x90\x80\x80", "\xe2\x80", "abcdefgh", "\u00a0", "\U0010FFFF",
}

func randString(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for range rng.IntN(12) {
		if rng.IntN(3) == 0 {
			b.WriteByte(byte(rng.IntN(256)))
		} else {
			b.WriteString(tricky[rng.IntN(len(tricky))])
		}
	}
	return b.String()
}

func randStrings(rng *rand.Rand) []string {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	ss := make([]string, 1+rng.IntN(4))
	for i := range ss {
		ss[i] = randString(rng)
	}
	return ss
}

func randInt(rng *rand.Rand) int {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return rng.IntN(1000)
	case 2:
		return -rng.IntN(1000)
	}
	return int(rng.Uint64())
}

func randFloat(rng *rand.Rand) float64 {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return []float64{1e21, 1e-6, 1e-7, 1e20, 123456789.125, math.MaxFloat64,
			math.SmallestNonzeroFloat64, math.Copysign(0, -1), math.NaN(), math.Inf(1)}[rng.IntN(10)]
	case 2:
		f := []float64{1e21, 1e-6}[rng.IntN(2)]
		return math.Nextafter(f, []float64{0, math.Inf(1)}[rng.IntN(2)])
	case 3:
		return math.Pow10(rng.IntN(60)-30) * (1 + float64(rng.IntN(10)))
	case 4:
		return rng.Float64() * 1000
	case 5:
		return -rng.NormFloat64() * 1e10
	}
	return math.Float64frombits(rng.Uint64())
}

func randTime(rng *rand.Rand) time.Time {
	var sec int64
	switch rng.IntN(8) {
	case 0:
		return time.Time{}
	case 1:
		sec = rng.Int64() >> rng.IntN(30) // far outside [0,9999] mostly
	default:
		sec = rng.Int64N(315537897600) - 62167219200 // years 0 to 9999
	}
	t := time.Unix(sec, rng.Int64N(1e9))
	switch rng.IntN(5) {
	case 0:
		return t.UTC()
	case 1:
		return t.Local()
	case 2:
		return t.In(time.FixedZone("", (rng.IntN(48*60)-24*60)*60))
	case 3:
		return t.In(time.FixedZone("odd", rng.IntN(200*3600)-100*3600))
	}
	return t.Round(time.Duration(rng.IntN(4)) * time.Second)
}

func randHeader(rng *rand.Rand) http.Header {
	switch rng.IntN(5) {
	case 0:
		return nil
	case 1:
		return http.Header{}
	}
	h := http.Header{}
	for range rng.IntN(12) {
		h[randString(rng)] = randStrings(rng)
	}
	return h
}

func randBytes(rng *rand.Rand) []byte {
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rng.IntN(100))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func randRecord(rng *rand.Rand) *Record {
	r := &Record{
		ID: randString(rng), TraceID: randString(rng), SpanID: randString(rng), ParentID: randString(rng),
		Side: Side(randString(rng)), From: randString(rng), To: randString(rng), Hop: randInt(rng),
		Key: randString(rng), Method: randString(rng), Target: randString(rng), Call: randString(rng),
		RequestDigest: randString(rng), Trust: randStrings(rng), Grant: randString(rng),
		SenderKeyID: randString(rng), Caller: randString(rng), State: State(randString(rng)), Status: randInt(rng),
		Attempts: randInt(rng), Latency: randFloat(rng), Outcome: randString(rng),
		Error: randString(rng), KeySource: randString(rng), Position: randInt(rng), Correlation: randString(rng),
		Compensates: randString(rng), Effects: randStrings(rng),
		StoppedAt: randString(rng), ResolvedBy: randString(rng), Replayable: rng.IntN(2) == 0, Created: randTime(rng),
		Updated: randTime(rng), checkpointed: rng.IntN(2) == 0, UncorrelatedCalls: randInt(rng),
	}
	if rng.IntN(2) == 0 {
		r.Envelope = &EnvelopeSummary{Digest: randString(rng), Version: randString(rng),
			TaskID: randString(rng), Intent: randString(rng), Completeness: randFloat(rng),
			OpenQuestions: randInt(rng), Unverified: randInt(rng), Violations: randInt(rng)}
	}
	if rng.IntN(2) == 0 {
		r.Shaping = &Shaping{Tokens: randInt(rng), Before: randInt(rng), MaxTokens: randInt(rng),
			Tokenizer: randString(rng), Dropped: randStrings(rng), Trimmed: randStrings(rng)}
	}
	if rng.IntN(2) == 0 {
		r.Journal = &JournalSummary{Hits: randInt(rng), Misses: randInt(rng), Journaled: randInt(rng),
			SavedBytes: int64(randInt(rng)), SavedTokens: int64(randInt(rng)), Skipped: randStrings(rng)}
	}
	if rng.IntN(2) == 0 {
		r.Approval = &Approval{Gate: randString(rng), Expires: randTime(rng), Decision: randString(rng),
			By: randString(rng), Reason: randString(rng)}
		if rng.IntN(2) == 0 {
			at := randTime(rng)
			r.Approval.At = &at
		}
	}
	if rng.IntN(2) == 0 {
		r.Request = &Request{Method: randString(rng), URL: randString(rng), Header: randHeader(rng),
			Body: randBytes(rng), BodyBytes: int64(randInt(rng)), Truncated: rng.IntN(2) == 0}
	}
	return r
}

func TestRecordAppendJSONRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 5000
	if testing.Short() {
		n = 2000
	}
	for i := range n {
		r := randRecord(rng)
		ok := t.Run("", func(t *testing.T) {
			checkRecord(t, r)
			checkRequest(t, r.Request)
		})
		if !ok {
			t.Fatalf("seed %d, record %d", seed, i)
		}
	}
}

func FuzzRecordAppendJSON(f *testing.F) {
	f.Add("id", "<b>&\u2028", "x\xff", 1, 200, 12.5, 0.5, []byte("body"), "Content-Type", "a\nb",
		int64(1700000000), int64(123456789), 7200, uint8(0))
	f.Add("", "", "", 0, 0, 1e21, 1e-7, []byte(nil), "", "", int64(0), int64(0), 0, uint8(0xff))
	f.Add("\x00", "日本", "\\\"", -1, math.MaxInt, math.Copysign(0, -1), math.NaN(), []byte{}, "\xc3", "\u2029",
		int64(253402300800), int64(-1), 24*3600, uint8(0x55))
	f.Fuzz(func(t *testing.T, id, outcome, hkey string, hop, status int, latency, completeness float64,
		body []byte, hval, trust string, sec, nsec int64, zone int, flags uint8) {
		r := &Record{ID: id, TraceID: hkey, From: outcome, To: hval, Hop: hop, Status: status,
			Attempts: hop ^ status, Latency: latency, Outcome: outcome, Error: trust, KeySource: hval,
			Position: status, Correlation: hkey, StoppedAt: id, ResolvedBy: outcome, Call: trust, Compensates: hval, Caller: outcome,
			State: State(hval), Side: Side(id), Replayable: flags&1 != 0, UncorrelatedCalls: hop,
			Created: time.Unix(sec, nsec).In(time.FixedZone("", zone%(1<<20))),
			Updated: time.Unix(nsec, sec%1e9).UTC()}
		if flags&2 != 0 {
			r.Trust = []string{trust, id}
		}
		if flags&4 != 0 {
			r.Envelope = &EnvelopeSummary{Digest: hkey, Intent: outcome, Completeness: completeness,
				Violations: status}
		}
		if flags&128 != 0 {
			r.Journal = &JournalSummary{Hits: hop, Misses: status, SavedTokens: sec, Skipped: []string{trust, hval}}
			r.Shaping = &Shaping{Tokens: hop, Before: status, Tokenizer: trust, Trimmed: []string{hval, id}}
			r.Approval = &Approval{Gate: trust, Expires: r.Created, Decision: hval, By: id, At: &r.Updated, Reason: outcome}
		}
		if flags&8 != 0 {
			r.Request = &Request{Method: id, URL: outcome, Body: body, BodyBytes: int64(len(body)),
				Truncated: flags&16 != 0}
			switch {
			case flags&32 != 0:
				r.Request.Header = http.Header{hkey: {hval, trust}, trust: nil, hval: {}}
			case flags&64 != 0:
				r.Request.Header = http.Header{}
			}
		}
		checkRecord(t, r)
		checkRequest(t, r.Request)
	})
}

func BenchmarkRecordAppendJSON(b *testing.B) {
	r := benchRecord()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkRecordMarshal(b *testing.B) {
	r := benchRecord()
	var n int
	b.ReportAllocs()
	for b.Loop() {
		enc, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		n = len(enc)
	}
	b.SetBytes(int64(n))
}

func BenchmarkRequestAppendJSON(b *testing.B) {
	q := benchRequest()
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		buf = q.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkRequestMarshal(b *testing.B) {
	q := benchRequest()
	var n int
	b.ReportAllocs()
	for b.Loop() {
		enc, err := json.Marshal(q)
		if err != nil {
			b.Fatal(err)
		}
		n = len(enc)
	}
	b.SetBytes(int64(n))
}

// benchRecord is a record as the book writes it to the chain: delivered,
// without its checkpoint.
func benchRecord() *Record {
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	created := time.Date(2025, 5, 14, 9, 31, 2, 123456789, time.UTC)
	return &Record{
		ID:            trace + ".00f067aa0ba902b7",
		TraceID:       trace,
		SpanID:        "00f067aa0ba902b7",
		ParentID:      trace + ".b7ad6b7169203331",
		Side:          Egress,
		From:          "planner",
		To:            "researcher",
		Hop:           2,
		Key:           "9f1c2e6a-7b3d-4c8e-a2f1-5d6e7f8a9b0c",
		Method:        http.MethodPost,
		Target:        "http://researcher.agents.svc.cluster.local:8080/v1/handoff",
		RequestDigest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		State:         Delivered,
		Status:        200,
		Attempts:      1,
		Latency:       48.213,
		Outcome:       "delivered: 200 OK",
		Replayable:    true,
		Created:       created,
		Updated:       created.Add(48213 * time.Microsecond),
	}
}

func benchRequest() *Request {
	body := bytes.Repeat([]byte(`{"task":"summarise the findings","n":1}`), 14)[:512]
	return &Request{
		Method: http.MethodPost,
		URL:    "http://researcher.agents.svc.cluster.local:8080/v1/handoff",
		Header: http.Header{
			"Content-Type":    {"application/json"},
			"Accept":          {"application/json"},
			"User-Agent":      {"planner/1.4.2"},
			"Traceparent":     {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			"Idempotency-Key": {"9f1c2e6a-7b3d-4c8e-a2f1-5d6e7f8a9b0c"},
			"Content-Digest":  {"sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"},
			"Authorization":   {"Bearer eyJhbGciOiJFUzI1NiJ9.e30.sig"},
			"X-Baton-Hop":     {"2"},
		},
		Body:      body,
		BodyBytes: int64(len(body)),
	}
}

// TestRequestEncodedSize: the size a checkpoint's buffer is made with holds
// the encoding of a request whose strings need no escaping, with little to
// spare, so that the buffer neither grows nor wastes.
func TestRequestEncodedSize(t *testing.T) {
	for _, q := range []*Request{
		{},
		{Method: "POST", URL: "http://b/x", BodyBytes: 0},
		{Method: "POST", URL: "http://bench-b/v1/tasks?x=1", Header: http.Header{
			"Content-Type": {"application/json"}, "Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			"Idempotency-Key": {"k1"}, "Accept": {"a", "b", "c"}, "Empty": {}},
			Body: bytes.Repeat([]byte("x"), 513), BodyBytes: 513, Truncated: true},
	} {
		n, got := q.encodedSize(), len(q.AppendJSON(nil))
		if n < got || n > got+len(`,"body":"","truncated":true}`)+8 {
			t.Errorf("encodedSize = %d for an encoding of %d bytes: %s", n, got, q.AppendJSON(nil))
		}
	}
}

// TestEntrySize: an entry's buffer is made big enough for the entry (of a
// record whose strings need no escaping), with little to spare, as a
// snapshot and as an update, with and without the optional members.
func TestEntrySize(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	full := benchRecord()
	full.Envelope = &EnvelopeSummary{Digest: "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:", Version: "1.0",
		TaskID: "task-1", Intent: "flag anomalies", Completeness: 0.8333333333333334, OpenQuestions: 2, Unverified: 1, Violations: 3}
	full.Trust = []string{"posture=verified", "untrusted=/data/0<-https://example.com"}
	full.Grant, full.SenderKeyID, full.Error = "grant-token", "key-1", "connection refused"
	full.Caller = "jwt:service-account-7"
	full.KeySource, full.Position, full.Correlation = KeyFromPosition, 3, CorrelatedByTraceparent
	full.StoppedAt, full.ResolvedBy = NewID("4bf92f3577b34da6a3ce929d0e0e4736"), NewID("4bf92f3577b34da6a3ce929d0e0e4736")
	bare := &Record{ID: NewID("4bf92f3577b34da6a3ce929d0e0e4736"), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Side: Ingress, From: "a", To: "b", Method: "POST", Target: "/", State: Sent, Created: now, Updated: now}
	for _, r := range []*Record{benchRecord(), full, bare} {
		for _, stored := range []bool{false, true} {
			for _, tail := range []string{"", "12:" + strings.Repeat("ab", 32)} {
				rr := *r
				rr.stored = stored
				n := rr.entrySize()
				e, _ := encodeEntry(tail, &rr, now)
				if n < len(e) || n > len(e)+96 {
					t.Errorf("entrySize = %d for an entry of %d bytes (stored %v): %s", n, len(e), stored, e)
				}
			}
		}
	}
}

package record

import (
	"bytes"
	"encoding/json"
	"math"
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
		"correlation_evidence,omitempty: string",
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
		"models,omitempty: *record.ModelSummary",
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
	reflect.TypeFor[ModelSummary](): {
		"calls: int",
		"journal_hits,omitempty: int",
		"refused,omitempty: int",
		"unknown_usage,omitempty: int",
		"unpriced,omitempty: int",
		"input_tokens: int64",
		"output_tokens: int64",
		"cached_input_tokens,omitempty: int64",
		"reasoning_tokens,omitempty: int64",
		"cost_usd: float64",
		"budget,omitempty: *record.BudgetView",
		"budget_note,omitempty: string",
		"list,omitempty: []record.ModelCall",
		"more,omitempty: int",
	},
	reflect.TypeFor[BudgetView](): {
		"chain,omitempty: string",
		"tokens,omitempty: int64",
		"cost_usd,omitempty: float64",
	},
	reflect.TypeFor[ModelCall](): {
		"at: time.Time",
		"ms: float64",
		"ttft_ms,omitempty: float64",
		"api: string",
		"provider: string",
		"operation: string",
		"model: string",
		"status,omitempty: int",
		"input_tokens,omitempty: int64",
		"output_tokens,omitempty: int64",
		"cached_input_tokens,omitempty: int64",
		"reasoning_tokens,omitempty: int64",
		"usage_known: bool",
		"cost_usd,omitempty: float64",
		"priced,omitempty: bool",
		"journal,omitempty: bool",
		"refused,omitempty: string",
		"finish,omitempty: string",
		"error,omitempty: string",
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

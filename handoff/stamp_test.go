package handoff

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var testStamp = Stamp{Agent: "analyst", TraceID: "0af7651916cd43dd8448eb211c80319c", Hop: 3, At: time.Date(2025, 11, 6, 10, 0, 0, 123e6, time.FixedZone("CET", 3600))}

// provenanceSpans returns the spans of the top-level provenance members of
// the envelope at env within b.
func provenanceSpans(b []byte, env span) []span {
	var ps []span
	var t tape
	if !t.parse(b[env.s:env.e]) {
		return nil
	}
	for k, end := t.first(0); k < end; k = t.after(k + 1) {
		if t.is(k, "provenance") {
			v := t.span(k + 1)
			ps = append(ps, span{env.s + v.s, env.s + v.e})
		}
	}
	return ps
}

// outside returns the bytes of b around the spans.
func outside(b []byte, spans []span) [][]byte {
	var parts [][]byte
	at := 0
	for _, s := range spans {
		parts = append(parts, b[at:s.s])
		at = s.e
	}
	return append(parts, b[at:])
}

func TestStamp(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	tests := []struct {
		name        string
		contentType string
		body        []byte
		// want is the whole stamped body when set; in every case the test
		// checks that nothing outside provenance changed.
		want string
		// claim: Check reports an identity violation before stamping.
		claim bool
	}{
		{name: "the example", contentType: MediaType, body: Example()},
		{name: "a newer minor with unknown members", contentType: MediaType, body: newerMinor(t)},
		{name: "a2a v1.0", contentType: "application/json", body: a2aRequest("SendMessage", Example())},
		{name: "a2a v0.3, newer minor", contentType: "application/json", body: a2aRequest("message/stream", newerMinor(t))},
		{
			name:        "pretty provenance without stamp members keeps its layout",
			contentType: MediaType,
			body:        []byte("{\n  \"schema_version\": \"1.0.0\",\n  \"task\": {\"id\": \"t\", \"intent\": \"i\"},\n  \"provenance\": {\n    \"model\": \"m\",\n    \"x\": [1, 2]\n  },\n  \"z\": 1\n}\n"),
			want:        "{\n  \"schema_version\": \"1.0.0\",\n  \"task\": {\"id\": \"t\", \"intent\": \"i\"},\n  \"provenance\": {\n    \"model\": \"m\",\n    \"x\": [1, 2],\n    \"agent\": \"analyst\",\n    \"trace_id\": \"0af7651916cd43dd8448eb211c80319c\",\n    \"hop\": 3,\n    \"stamped_at\": \"2025-11-06T09:00:00.123Z\"\n  },\n  \"z\": 1\n}\n",
		},
		{
			name:        "claimed identity and old stamp replaced in place",
			contentType: MediaType,
			body:        []byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{"agent":"root","hop":0,"model":"m","trace_id":"x","stamped_at":"then"}}`),
			want:        `{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{"agent":"analyst","hop":3,"model":"m","trace_id":"0af7651916cd43dd8448eb211c80319c","stamped_at":"2025-11-06T09:00:00.123Z"}}`,
			claim:       true,
		},
		{
			name:        "every copy of a repeated provenance and agent is stamped",
			contentType: MediaType,
			body:        []byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{"agent":"root"},"provenance":{"agent":"x","agent":"y"}}`),
			want:        `{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{"agent":"analyst","trace_id":"0af7651916cd43dd8448eb211c80319c","hop":3,"stamped_at":"2025-11-06T09:00:00.123Z"},"provenance":{"agent":"analyst","agent":"analyst","trace_id":"0af7651916cd43dd8448eb211c80319c","hop":3,"stamped_at":"2025-11-06T09:00:00.123Z"}}`,
			claim:       true,
		},
		{
			name:        "empty provenance",
			contentType: MediaType,
			body:        []byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{ }}`),
			want:        `{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{"agent":"analyst","trace_id":"0af7651916cd43dd8448eb211c80319c","hop":3,"stamped_at":"2025-11-06T09:00:00.123Z" }}`,
		},
		{
			name:        "no provenance: added after the last member, laid out like it",
			contentType: MediaType,
			body:        []byte("{\n  \"schema_version\": \"1.0.0\",\n  \"task\": {\"id\": \"t\", \"intent\": \"i\"}\n}"),
			want:        "{\n  \"schema_version\": \"1.0.0\",\n  \"task\": {\"id\": \"t\", \"intent\": \"i\"},\n  \"provenance\": {\"agent\":\"analyst\",\"trace_id\":\"0af7651916cd43dd8448eb211c80319c\",\"hop\":3,\"stamped_at\":\"2025-11-06T09:00:00.123Z\"}\n}",
		},
		{
			name:        "provenance that is not an object is replaced",
			contentType: MediaType,
			body:        []byte(`{"schema_version":"1.0.0","provenance":"me","task":{"id":"t","intent":"i"}}`),
			want:        `{"schema_version":"1.0.0","provenance":{"agent":"analyst","trace_id":"0af7651916cd43dd8448eb211c80319c","hop":3,"stamped_at":"2025-11-06T09:00:00.123Z"},"task":{"id":"t","intent":"i"}}`,
		},
		{
			name:        "an empty envelope",
			contentType: MediaType,
			body:        []byte(` {} `),
			want:        ` {"provenance":{"agent":"analyst","trace_id":"0af7651916cd43dd8448eb211c80319c","hop":3,"stamped_at":"2025-11-06T09:00:00.123Z"}} `,
		},
		{
			name:        "a2a: the request around the envelope is untouched",
			contentType: "application/json",
			body:        []byte(`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"metadata":{"baton.handoff":{"schema_version":"1.0.0","task":{"id":"t","intent":"i"}},"after":true}}},"tail":[1]}`),
			want:        `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"metadata":{"baton.handoff":{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"provenance":{"agent":"analyst","trace_id":"0af7651916cd43dd8448eb211c80319c","hop":3,"stamped_at":"2025-11-06T09:00:00.123Z"}},"after":true}}},"tail":[1]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := bytes.Clone(tt.body)
			r, err := c.Check(tt.contentType, in, Policy{}, "analyst")
			if err != nil {
				t.Fatal(err)
			}
			claimed := false
			for _, v := range r.Violations {
				claimed = claimed || v.Kind == KindIdentity
			}
			if claimed != tt.claim {
				t.Fatalf("identity violation reported: %v, want %v (%+v)", claimed, tt.claim, r.Violations)
			}
			out, err := r.Stamp(in, testStamp)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(in, tt.body) {
				t.Fatal("Stamp modified its input")
			}
			if tt.want != "" && string(out) != tt.want {
				t.Fatalf("stamped\n got %s\nwant %s", out, tt.want)
			}
			// Nothing outside provenance changed.
			if pin := provenanceSpans(in, r.env); len(pin) > 0 {
				again, err := c.Check(tt.contentType, out, Policy{}, "")
				if err != nil {
					t.Fatal(err)
				}
				a, b := outside(in, pin), outside(out, provenanceSpans(out, again.env))
				if len(a) != len(b) {
					t.Fatalf("provenance members: %d before, %d after", len(a), len(b))
				}
				for i := range a {
					if !bytes.Equal(a[i], b[i]) {
						t.Fatalf("bytes outside provenance changed:\n in %s\nout %s", in, out)
					}
				}
			}
			// The stamped envelope carries the stamp, keeps the other
			// provenance members, and passes identity at ingress.
			again, err := c.Check(tt.contentType, out, Policy{}, "analyst")
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range again.Violations {
				if v.Kind == KindIdentity {
					t.Fatalf("stamped envelope: %+v", v)
				}
			}
			prov := obj(decode(t, again.Envelope), "provenance")
			if prov["agent"] != "analyst" || prov["trace_id"] != testStamp.TraceID || prov["hop"] != json.Number("3") || prov["stamped_at"] != "2025-11-06T09:00:00.123Z" {
				t.Fatalf("provenance %v", prov)
			}
			if len(r.Violations) == 0 && len(again.Violations) != 0 {
				t.Fatalf("a valid envelope became invalid: %+v", again.Violations)
			}
		})
	}
}

// A 1.7.0 envelope passes on byte for byte, but for the stamp.
func TestStampNewerMinorByteEquivalent(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	in := []byte(`{"schema_version":"1.7.0","task":{"id":"t","intent":"i","priority":"p1"},"budget":{"tokens":120000,"note":"\u00e9t\u00e9"},` +
		`"provenance":{"agent":"analyst","cost":{"usd":0.42},"tool_calls":[{"name":"search","latency_ms":12}]},"future":[1.0e3, true, null]}`)
	r, err := c.Check(MediaType, in, Policy{}, "analyst")
	if err != nil || len(r.Violations) > 0 {
		t.Fatal(err, r.Violations)
	}
	out, err := r.Stamp(in, testStamp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema_version":"1.7.0","task":{"id":"t","intent":"i","priority":"p1"},"budget":{"tokens":120000,"note":"\u00e9t\u00e9"},` +
		`"provenance":{"agent":"analyst","cost":{"usd":0.42},"tool_calls":[{"name":"search","latency_ms":12}],"trace_id":"0af7651916cd43dd8448eb211c80319c","hop":3,"stamped_at":"2025-11-06T09:00:00.123Z"},"future":[1.0e3, true, null]}`
	if string(out) != want {
		t.Fatalf("stamped\n got %s\nwant %s", out, want)
	}
}

func TestStampErrors(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	body := Example()
	r, err := c.Check(MediaType, body, Policy{}, "analyst")
	if err != nil {
		t.Fatal(err)
	}
	notObject, err := c.Check(MediaType, []byte(`[1]`), Policy{}, "")
	if err != nil {
		t.Fatal(err)
	}
	at := testStamp.At
	tests := []struct {
		name   string
		result Result
		body   []byte
		stamp  Stamp
		want   string
	}{
		{name: "empty agent", result: r, body: body, stamp: Stamp{TraceID: testStamp.TraceID, At: at}, want: "agent must not be empty"},
		{name: "bad trace id", result: r, body: body, stamp: Stamp{Agent: "a", TraceID: "0AF7651916CD43DD8448EB211C80319C", At: at}, want: "must be 32 lowercase hexadecimal digits"},
		{name: "zero trace id", result: r, body: body, stamp: Stamp{Agent: "a", TraceID: strings.Repeat("0", 32), At: at}, want: "not all zero"},
		{name: "negative hop", result: r, body: body, stamp: Stamp{Agent: "a", TraceID: testStamp.TraceID, Hop: -1, At: at}, want: "hop must be >= 0"},
		{name: "no time", result: r, body: body, stamp: Stamp{Agent: "a", TraceID: testStamp.TraceID}, want: "time must be set"},
		{name: "another body", result: r, body: bytes.Replace(body, []byte("checkout"), []byte("checkin!"), 1), stamp: testStamp, want: "body is not the one that was checked"},
		{name: "no envelope", result: Result{}, body: body, stamp: testStamp, want: "body is not the one that was checked"},
		{name: "not an object", result: notObject, body: []byte(`[1]`), stamp: testStamp, want: "the envelope is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.result.Stamp(tt.body, tt.stamp)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want …%s…", err, tt.want)
			}
		})
	}
}

package handoff

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func seedEnvelopes(f *testing.F) {
	f.Helper()
	big, err := os.ReadFile("testdata/envelope-4k.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][]byte{
		Example(), big, newerMinor(f),
		[]byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"i"}}`),
		[]byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"\u00e9\n"},"confidence":1.0000000001,"provenance":{"hop":1.0,"agent":"a","agent":"b"}}`),
		[]byte(`{"schema_version":"2.0.0"}`),
		[]byte(`{"schema_version":"1.0.0","artifacts":[{"name":"a","trust":"untrusted","content":{},"ref":"r"}],"Provenance":1,"provenance":[]}`),
		[]byte(`{"task":{"id":"t","intent":""},"completed":[{"summary":"s","verification":"verified"},{}]}`),
		[]byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"confidence":1e-400,"provenance":{"hop":-0,"trace_id":"\u0030af7651916cd43dd8448eb211c80319c","stamped_at":"2025-11-06T09:00:00Z"},"completed":[{"summary":"s","verification":"verifi\u0065d"}]}`),
		[]byte("{\"schema_version\":\"1.0.0\",\"task\":{\"id\":\"\xff\",\"intent\":\"\xc3\"},\"artifacts\":[{\"name\":\"a\",\"trust\":\"untrusted\",\"content\":1,\"source\":\"s\",\"media_type\":\"text/plain\"}]}"),
		[]byte(`{"a":`), []byte(`[]`), []byte(`"x"`), []byte(``), []byte(`{}`), []byte(` { } `),
	} {
		f.Add(s)
	}
}

// FuzzCheck feeds arbitrary bytes to Check as a body envelope: it must never
// panic, its results must be well-formed, and stamping any object envelope
// must yield JSON whose provenance carries the stamp.
func FuzzCheck(f *testing.F) {
	seedEnvelopes(f)
	c := newChecker(f)
	p := Policy{Require: []string{"open_questions", "/task/scope", "/completed/0"}, MinCompleteness: 1, MaxBytes: 1 << 10}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := c.Check(MediaType, body, p, "analyst")
		if err != nil || r.Where != Body || !bytes.Equal(r.Envelope, body) {
			t.Fatalf("err %v, where %v", err, r.Where)
		}
		switch r.Completeness {
		case 0, 0.25, 0.5, 0.75, 1:
		default:
			t.Fatalf("completeness %v", r.Completeness)
		}
		for _, v := range r.Violations {
			if _, ok := kindRank[v.Kind]; !ok || v.Detail == "" || (v.Pointer != "" && v.Pointer[0] != '/') {
				t.Fatalf("malformed violation %+v", v)
			}
		}
		var tp tape
		if !tp.parse(body) || !tp.isObject(0) {
			return
		}
		out, err := r.Stamp(body, testStamp)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Check(MediaType, out, Policy{}, "analyst")
		if err != nil {
			t.Fatal(err)
		}
		if !tp.parse(out) {
			t.Fatalf("stamped envelope is not JSON: %q", out)
		}
		for _, v := range again.Violations {
			if v.Kind == KindIdentity {
				t.Fatalf("stamped envelope fails identity: %+v\n%q", v, out)
			}
		}
		if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out)); err != nil {
			t.Fatalf("encoding/json rejects the stamped envelope: %v\n%q", err, out)
		} else if prov, _ := doc.(map[string]any)["provenance"].(map[string]any); prov["agent"] != testStamp.Agent || prov["trace_id"] != testStamp.TraceID {
			t.Fatalf("stamped provenance %v\n%q", prov, out)
		}
	})
}

// FuzzLocateA2A feeds arbitrary JSON-RPC bodies to Locate and checks it
// against encoding/json: it finds an envelope exactly when a decoder sees a
// JSON-RPC 2.0 request for a handoff method with
// params.message.metadata["baton.handoff"], and the bytes it finds decode to
// that value.
func FuzzLocateA2A(f *testing.F) {
	for _, m := range a2aMethods {
		f.Add(a2aRequest(m, Example()))
	}
	f.Add(a2aRequest("GetTask", []byte(`{}`)))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"message\/send","params":{"message":{"metadata":{"\u0062aton.handoff":{"schema_version":"1.0.0"}}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"metadata":{"baton.handoff":1,"baton.handoff":{}}}},"params":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"user","parts":[{"text":"baton.handoff"}]}}}`))
	c := newChecker(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var tp tape
		loc := locate("application/json", body, &tp)
		var want any
		found := false
		if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body)); err == nil {
			want, found = a2aEnvelope(doc)
		}
		if found != (loc.where == A2A) {
			t.Fatalf("Locate says %v, encoding/json says found=%v: %q", loc.where, found, body)
		}
		if !found {
			return
		}
		env := tp.span(loc.env)
		got, err := jsonschema.UnmarshalJSON(bytes.NewReader(body[env.s:env.e]))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("located %q, decoders see %v", body[env.s:env.e], want)
		}
		r, err := c.Check("application/json", body, Policy{}, "analyst")
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := want.(map[string]any); !ok || m == nil {
			return
		}
		out, err := r.Stamp(body, testStamp)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("stamped body is not JSON: %v\n%q", err, out)
		}
		stamped, ok := a2aEnvelope(doc)
		if prov, _ := stamped.(map[string]any)["provenance"].(map[string]any); !ok || prov["agent"] != testStamp.Agent {
			t.Fatalf("stamped body %q", out)
		}
	})
}

// a2aEnvelope is what a decoder finds at params.message.metadata["baton.handoff"]
// of an A2A handoff request.
func a2aEnvelope(doc any) (any, bool) {
	root, _ := doc.(map[string]any)
	if root["jsonrpc"] != "2.0" {
		return nil, false
	}
	method, _ := root["method"].(string)
	handoff := false
	for _, m := range a2aMethods {
		handoff = handoff || method == m
	}
	params, _ := root["params"].(map[string]any)
	msg, _ := params["message"].(map[string]any)
	meta, _ := msg["metadata"].(map[string]any)
	env, ok := meta[MetadataKey]
	return env, handoff && ok
}

// FuzzFastPath checks that the fast path never disagrees with jsonschema:
// what it calls valid, jsonschema accepts; what it calls invalid, jsonschema
// rejects.
func FuzzFastPath(f *testing.F) {
	seedEnvelopes(f)
	c := newChecker(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var tp tape
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if !tp.parse(body) {
			if err == nil {
				t.Fatalf("the tape rejects what encoding/json accepts: %q", body)
			}
			return
		}
		if err != nil {
			t.Fatalf("the tape accepts what encoding/json rejects (%v): %q", err, body)
		}
		slow := c.schema.Validate(doc)
		switch c.fast.check(&tp, 0) {
		case valid:
			if slow != nil {
				t.Fatalf("fast path: valid; jsonschema: %v\n%q", slow, body)
			}
		case invalid:
			if slow == nil {
				t.Fatalf("fast path: invalid; jsonschema: valid\n%q", body)
			}
		}
	})
}

package handoff_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/batonproxy/baton/handoff"
)

func decodeAny(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return m
}

const a2aBody = `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m","kind":"message",
 "parts":[{"kind":"text","text":"hello"},{"kind":"text","text":"debug dump"}],
 "metadata":{"notes":"internal","baton.handoff":{"schema_version":"1.0.0","task":{"id":"t","intent":"x","scope":"s"},
   "completed":[{"id":"c1","summary":"a","evidence":"e1"},{"id":"c2","summary":"b","evidence":"e2"}],"memory_refs":["m1"]}}}}}`

func TestApplyFields(t *testing.T) {
	for _, c := range []struct {
		name              string
		envelope, message handoff.FieldPolicy
		dropped           []string
		check             func(m map[string]any) bool
	}{
		{"drop with a wildcard, never the task",
			handoff.FieldPolicy{Drop: []string{"/completed/*/evidence", "/task", "/task/scope", "/absent"}}, handoff.FieldPolicy{},
			[]string{handoff.A2APointer + "/completed/0/evidence", handoff.A2APointer + "/completed/1/evidence"},
			func(m map[string]any) bool {
				env := envOf(m)
				c := env["completed"].([]any)[1].(map[string]any)
				return c["evidence"] == nil && c["summary"] == "b" && env["task"].(map[string]any)["scope"] == "s"
			}},
		{"keep", handoff.FieldPolicy{Keep: []string{"/completed/*/summary"}}, handoff.FieldPolicy{},
			[]string{handoff.A2APointer + "/completed/0/id", handoff.A2APointer + "/completed/0/evidence",
				handoff.A2APointer + "/completed/1/id", handoff.A2APointer + "/completed/1/evidence", handoff.A2APointer + "/memory_refs"},
			func(m map[string]any) bool {
				env := envOf(m)
				return reflect.DeepEqual(env["completed"], []any{map[string]any{"summary": "a"}, map[string]any{"summary": "b"}}) &&
					env["task"] != nil && env["schema_version"] == "1.0.0"
			}},
		{"message parts and metadata", handoff.FieldPolicy{}, handoff.FieldPolicy{Drop: []string{"/parts/1", "/metadata/notes", "/role", "/metadata/baton.handoff", "/metadata"}},
			[]string{"/params/message/parts/1", "/params/message/metadata/notes"},
			func(m map[string]any) bool {
				msg := m["params"].(map[string]any)["message"].(map[string]any)
				return len(msg["parts"].([]any)) == 1 && msg["metadata"].(map[string]any)["notes"] == nil && msg["role"] == "user" && envOf(m) != nil
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, dropped := handoff.ApplyFields("application/json", []byte(a2aBody), c.envelope, c.message)
			if !slices.Equal(dropped, c.dropped) {
				t.Fatalf("dropped %q, want %q", dropped, c.dropped)
			}
			if !c.check(decodeAny(t, out)) {
				t.Fatalf("got %s", out)
			}
		})
	}
}

func envOf(m map[string]any) map[string]any {
	env, _ := m["params"].(map[string]any)["message"].(map[string]any)["metadata"].(map[string]any)["baton.handoff"].(map[string]any)
	return env
}

// TestTrimDetail trims by priority, each class largest first, and stops as
// soon as the text is within budget; Note tells the agent what went.
func TestTrimDetail(t *testing.T) {
	body := []byte(`{"schema_version":"1.0.0","task":{"id":"t","intent":"x"},
	 "completed":[{"summary":"a","evidence":"0123456789"},{"summary":"b","evidence":"0123456789012345678901234567890123456789"}],
	 "rejected_paths":[{"what":"w","why":"short"},{"what":"v","why":"a much longer reason than the other"}]}`)
	bytes := func(b []byte) int { return len(b) }
	ct := handoff.MediaType
	n := handoff.CountText(ct, body, bytes)
	// Enough to take both reasons and the longer evidence only.
	tr := handoff.TrimDetail(ct, body, n-60, n, bytes)
	want := []string{"/rejected_paths/1/why", "/rejected_paths/0/why", "/completed/1/evidence"}
	if !slices.Equal(tr.Pointers, want) || tr.Tokens > n-60 || tr.Tokens != handoff.CountText(ct, tr.Body, bytes) {
		t.Fatalf("trimmed %q to %d (of %d); want %q within %d", tr.Pointers, tr.Tokens, n, want, n-60)
	}
	noted := handoff.Note(ct, tr.Body, tr.Pointers)
	var env handoff.Envelope
	if err := json.Unmarshal(noted, &env); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(env.Omitted, want) || env.RejectedPaths[1].Why != handoff.OmittedText || env.Completed[0].Evidence != "0123456789" || env.Completed[1].Evidence != "" {
		t.Fatalf("noted %s", noted)
	}
	if again := handoff.Note(ct, noted, want[:1]); !slices.Equal(decodeEnv(t, again).Omitted, want[:1]) {
		t.Fatalf("a second note did not replace the first: %s", again)
	}
	if fs := handoff.FieldSizes(ct, body, bytes, 2); len(fs) != 2 || fs[0].Pointer != "/completed" {
		t.Fatalf("FieldSizes: %+v", fs)
	}
}

func decodeEnv(t *testing.T, b []byte) handoff.Envelope {
	t.Helper()
	var env handoff.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	return env
}

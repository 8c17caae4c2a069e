package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/batonproxy/baton/problem"
)

func TestEveryClassIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/problems.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range problem.Classes() {
		if !strings.Contains(string(doc), "\n### "+string(c)+"\n") {
			t.Errorf("class %q has no section in docs/problems.md", c)
		}
		if c.Title() == "" || c.Status() < 400 {
			t.Errorf("class %q: title %q status %d", c, c.Title(), c.Status())
		}
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/tasks?x=1", nil)
	w := httptest.NewRecorder()
	w.Header().Set("Retry-After", "2")
	problem.New(r, problem.HopLimit, "too deep").With("hop", 9).With("max_hops", 8).Write(w)
	if w.Code != http.StatusLoopDetected {
		t.Errorf("status %d", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Errorf("content type %q", ct)
	}
	if w.Header().Get("Retry-After") != "2" {
		t.Error("headers set before Write were dropped")
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	want := map[string]any{
		"type": problem.TypeBase + "hop-limit", "title": "Handoff hop limit exceeded", "status": 508.0,
		"detail": "too deep", "instance": "/tasks", "hop": 9.0, "max_hops": 8.0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["trace_id"]; ok {
		t.Error("trace_id present without a span")
	}
}

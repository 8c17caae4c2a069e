package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/batonproxy/baton/problem"
)

func TestInfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		in          Info
		wantEdge    string
		wantHandoff bool
		wantSide    string
	}{
		{name: "egress handoff", in: Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer"},
			wantEdge: "analyst→summarizer", wantHandoff: true, wantSide: "egress"},
		{name: "ingress handoff", in: Info{Side: Ingress, Agent: "summarizer", From: "analyst", To: "summarizer"},
			wantEdge: "analyst→summarizer", wantHandoff: true, wantSide: "ingress"},
		{name: "external fetch", in: Info{Side: Egress, Agent: "analyst", From: "analyst", External: "api.example.com:443"},
			wantEdge: "analyst→api.example.com:443", wantHandoff: false, wantSide: "egress"},
		{name: "detached", in: Info{}, wantEdge: "→", wantHandoff: true, wantSide: "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.in.Edge(); got != tc.wantEdge {
				t.Errorf("Edge() = %q, want %q", got, tc.wantEdge)
			}
			if got := tc.in.Handoff(); got != tc.wantHandoff {
				t.Errorf("Handoff() = %v, want %v", got, tc.wantHandoff)
			}
			if got := tc.in.Side.String(); got != tc.wantSide {
				t.Errorf("Side.String() = %q, want %q", got, tc.wantSide)
			}
			if tc.in.Status() != 0 || tc.in.Written() {
				t.Errorf("Info without a recorder reports status %d, written %v", tc.in.Status(), tc.in.Written())
			}
		})
	}
}

func TestInfoFromContext(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if InfoFromContext(r.Context()) != nil {
		t.Fatal("InfoFromContext outside the chain is not nil")
	}
	if info(r) == nil {
		t.Fatal("info() outside the chain returned nil, want a detached Info")
	}
	in := &Info{Agent: "analyst"}
	r = withInfo(r, in)
	if got := InfoFromContext(r.Context()); got != in {
		t.Fatalf("InfoFromContext = %p, want %p", got, in)
	}
	if got := info(r); got != in {
		t.Fatalf("info() = %p, want the Info in the context", got)
	}
}

// withInfo returns r carrying in, as AccessLog would have set it.
func withInfo(r *http.Request, in *Info) *http.Request {
	return r.WithContext(WithInfo(r.Context(), in))
}

// logBuffer returns a JSON logger at debug level writing to a buffer. Tests
// serve through httptest.NewRecorder on one goroutine, so a bytes.Buffer is
// enough.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// logLines decodes every JSON log line in b.
func logLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range bytes.Lines(b) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// readProblem decodes an RFC 9457 answer, checking its media type, its class
// and that its status member matches the response's.
func readProblem(t *testing.T, rec *httptest.ResponseRecorder, want problem.Class) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("Content-Type = %q, want %s; body %s", ct, problem.ContentType, rec.Body)
	}
	if rec.Code != want.Status() {
		t.Errorf("status = %d, want %d", rec.Code, want.Status())
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("problem body %q: %v", rec.Body, err)
	}
	if doc["type"] != want.Type() {
		t.Errorf("type = %v, want %s", doc["type"], want.Type())
	}
	if doc["status"] != float64(rec.Code) {
		t.Errorf("status member %v != response status %d", doc["status"], rec.Code)
	}
	return doc
}

// mustNotServe is a next handler that fails the test when reached.
func mustNotServe(t *testing.T) http.Handler {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the request went on down the chain; want it refused")
	})
}

func TestEdgeNameInterned(t *testing.T) {
	in := &Info{Agent: "analyst", From: "analyst", To: "summarizer"}
	if got := in.Edge(); got != "analyst→summarizer" {
		t.Fatalf("Edge() = %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = in.Edge() }); n != 0 {
		t.Errorf("Edge() allocates %v times for a known edge", n)
	}
	ext := &Info{Agent: "analyst", External: "api.example.com:443"}
	if got := ext.Edge(); got != "analyst→api.example.com:443" {
		t.Fatalf("Edge() = %q", got)
	}
	// Past the bound, names are still right, only not kept.
	for i := range maxEdgeNames + 10 {
		from := "sender-" + strconv.Itoa(i)
		if got := (&Info{From: from, To: "x"}).Edge(); got != from+"→x" {
			t.Fatalf("Edge() = %q", got)
		}
	}
	edgeNames.RLock()
	n := len(edgeNames.m)
	edgeNames.RUnlock()
	if n > maxEdgeNames {
		t.Fatalf("%d interned edge names, bound %d", n, maxEdgeNames)
	}
}

// TestDetached: the context outlives its parent's cancellation, keeps its
// values, carries the Info given, and a lookup made on it directly (as
// net/http's and the tracer's are) allocates nothing.
func TestDetached(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	in := &Info{Agent: "b"}
	ctx := Detached(parent, in)
	cancel()
	if ctx.Err() != nil || ctx.Done() != nil {
		t.Fatalf("canceled with its parent: %v", ctx.Err())
	}
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("has a deadline")
	}
	if got := ctx.Value(key{}); got != "v" {
		t.Fatalf("parent's value: got %v", got)
	}
	if got := InfoFromContext(ctx); got != in {
		t.Fatalf("Info: got %p, want %p", got, in)
	}
	if n := testing.AllocsPerRun(100, func() { _ = ctx.Value(key{}) }); n != 0 {
		t.Fatalf("a lookup allocates %.0f times", n)
	}
}

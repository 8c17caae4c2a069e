package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/handoff/tokens"
	"github.com/batonproxy/baton/records"
)

// headerAgent keeps the bodies and headers it gets.
type headerAgent struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

func (a *headerAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.bodies, a.headers = append(a.bodies, b), append(a.headers, r.Header.Clone())
	a.mu.Unlock()
	io.WriteString(w, `{"ok":true}`)
}

// wordy repeats a sentence to about n tokens of English.
func wordy(n int) string {
	return strings.Repeat("The p95 latency of checkout rose after the deploy. ", n/10)
}

// budgetEnvelope has detail to trim: long reasons for rejected paths, long
// evidence, an inline artifact, and a task and constraints that never go.
func budgetEnvelope(intent string) []byte {
	env := map[string]any{
		"schema_version": "1.0.0",
		"task":           map[string]any{"id": "t-budget", "intent": intent},
		"constraints":    []any{map[string]any{"text": "Do not restart production.", "hard": true}},
		"completed": []any{
			map[string]any{"id": "c1", "summary": "Latency doubled at 14:02.", "verification": "verified", "evidence": wordy(300)},
			map[string]any{"id": "c2", "summary": "The deploy added a lookup.", "verification": "unverified", "evidence": wordy(150)},
		},
		"rejected_paths": []any{
			map[string]any{"what": "Roll back", "why": wordy(200)},
			map[string]any{"what": "Grow the pool", "why": wordy(100)},
		},
		"artifacts":   []any{map[string]any{"name": "trace.txt", "content": wordy(1500), "trust": "trusted"}},
		"memory_refs": []any{"mem:a", "mem:b"},
	}
	b, _ := json.Marshal(env)
	return b
}

// TestBudgetEnforcedAndTrimmed hands off an envelope of about 2,500 tokens
// (o200k_base, gpt-4o) on three edges of a's Baton, on one Redis: strict
// (max_tokens 400, enforce) refuses it, naming its size and largest fields;
// lean (max_tokens 400, trim, and a field policy) delivers it trimmed
// within budget: rejected paths' reasons, completed items' evidence, then
// the artifact by reference, the task and constraints untouched, the
// receiving agent told what was left out, and a's record saying what was
// dropped and trimmed. A task alone over budget is refused even on lean.
func TestBudgetEnforcedAndTrimmed(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	strict, lean := &headerAgent{}, &headerAgent{}
	strictB := startBatonWith(t, "agent: strict\nupstream: "+serve(t, strict)+"\n", store(), nil)
	leanB := startBatonWith(t, "agent: lean\nupstream: "+serve(t, lean)+"\n", store(), nil)
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+
		peerYAML(map[string]string{"strict": strictB.IngressAddr(), "lean": leanB.IngressAddr()})+`edges:
  - {to: strict, context: {budget: {max_tokens: 400, model: gpt-4o}}}
  - to: lean
    context:
      budget: {max_tokens: 400, model: gpt-4o, over: trim}
      fields: {envelope: {drop: [/memory_refs, /completed/*/id, /task]}}
`, store(), withMetrics(t))
	o200k, err := tokens.For("gpt-4o", "")
	if err != nil {
		t.Fatal(err)
	}
	body := budgetEnvelope("Find why checkout latency doubled.")
	before := o200k.Count(body)
	if before < 2000 {
		t.Fatalf("the envelope is %d tokens; the test needs one well over budget", before)
	}
	hdr := func(trace string) http.Header {
		return http.Header{"Content-Type": {handoff.MediaType}, "Traceparent": {"00-" + trace + "-b7ad6b7169203331-01"}}
	}

	resp := send(t, aB.EgressAddr(), "strict", http.MethodPost, "/handoff", string(body), hdr("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1"))
	var over struct {
		Type      string              `json:"type"`
		Tokens    int                 `json:"tokens"`
		MaxTokens int                 `json:"max_tokens"`
		Tokenizer string              `json:"tokenizer"`
		Estimate  bool                `json:"estimate"`
		Fields    []handoff.FieldSize `json:"fields"`
		Trimmed   []string            `json:"trimmed"`
	}
	decodeBody(t, resp, &over)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.HasSuffix(over.Type, "#over-budget") || over.Tokens != before ||
		over.MaxTokens != 400 || over.Tokenizer != "o200k_base" || over.Estimate || len(over.Fields) == 0 || over.Fields[0].Pointer != "/artifacts" {
		t.Fatalf("enforced: %d %+v; want 422 over-budget with %d tokens, the artifacts named largest", resp.StatusCode, over, before)
	}
	if len(strict.bodies) != 0 {
		t.Fatal("strict's agent got a handoff over its budget")
	}

	const trace = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2"
	resp = send(t, aB.EgressAddr(), "lean", http.MethodPost, "/handoff", string(body), hdr(trace))
	if answer, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
		t.Fatalf("trimmed: %d %s", resp.StatusCode, answer)
	}
	if len(lean.bodies) != 1 {
		t.Fatalf("lean's agent got %d handoffs, want 1", len(lean.bodies))
	}
	got := lean.bodies[0]
	var env handoff.Envelope
	if err := json.Unmarshal(got, &env); err != nil {
		t.Fatal(err)
	}
	wantOmitted := []string{"/memory_refs", "/completed/0/id", "/completed/1/id",
		"/rejected_paths/0/why", "/rejected_paths/1/why", "/completed/0/evidence", "/completed/1/evidence", "/artifacts/0/content"}
	if !slices.Equal(env.Omitted, wantOmitted) {
		t.Fatalf("the envelope's omitted note is %q, want %q", env.Omitted, wantOmitted)
	}
	if env.Task.Intent != "Find why checkout latency doubled." || len(env.Constraints) != 1 || env.MemoryRefs != nil ||
		env.RejectedPaths[0].What != "Roll back" || env.RejectedPaths[0].Why != handoff.OmittedText || env.Completed[0].Evidence != "" ||
		env.Completed[0].Summary == "" || env.Artifacts[0].Content != nil || env.Artifacts[0].Digest == "" {
		t.Fatalf("lean's agent got %s", got)
	}
	// Within budget as it reached the agent, less the stamp and the note.
	if n := o200k.Count(got); n > 400+150 {
		t.Fatalf("lean's agent got %d tokens", n)
	}
	if h := lean.headers[0].Get("Baton-Omitted"); !strings.Contains(h, `"/artifacts/0/content"`) || !strings.Contains(h, `"/memory_refs"`) {
		t.Fatalf("Baton-Omitted: %q", h)
	}
	// The artifact is the agent's to read from its Baton when it needs it.
	read := send(t, leanB.EgressAddr(), "localhost", http.MethodGet, env.Artifacts[0].Ref, "", nil)
	if data, _ := io.ReadAll(read.Body); read.StatusCode != http.StatusOK || string(data) != wordy(1500) {
		t.Fatalf("reading the trimmed artifact: %d, %d bytes", read.StatusCode, len(data))
	}
	view := waitTrace(t, aB.AdminAddr(), trace, func(v records.TraceView) bool { return len(v.Records) == 2 && v.Records[0].State == record.Delivered })
	sh := view.Records[0].Shaping // a's delegation record; the receipt is lean's
	if sh == nil || sh.Before != before || sh.Tokens > 400 || sh.MaxTokens != 400 || sh.Tokenizer != "o200k_base" ||
		!slices.Equal(sh.Dropped, wantOmitted[:3]) || !slices.Equal(sh.Trimmed, wantOmitted[3:]) {
		t.Fatalf("a's record shaping %+v; want %d tokens before, within 400 after, dropped %q, trimmed %q", sh, before, wantOmitted[:3], wantOmitted[3:])
	}

	// A task alone over budget cannot be trimmed.
	resp = send(t, aB.EgressAddr(), "lean", http.MethodPost, "/handoff", string(budgetEnvelope(wordy(800))), hdr("ccccccccccccccccccccccccccccccc3"))
	decodeBody(t, resp, &over)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.HasSuffix(over.Type, "#over-budget") || over.Tokens <= 400 ||
		!slices.Contains(over.Trimmed, "/artifacts/0/content") || over.Fields[0].Pointer != "/task" {
		t.Fatalf("a task over budget: %d %+v; want over-budget after trimming, the task named largest", resp.StatusCode, over)
	}
	if len(lean.bodies) != 1 {
		t.Fatal("lean's agent got a handoff still over budget")
	}
	s := scrapeMetrics(t, aB.AdminAddr())
	for outcome, want := range map[string]float64{"refused": 2, "trimmed": 1} {
		if v, _ := s.value("baton_budget_handoffs_total", map[string]string{"outcome": outcome}); v != want {
			t.Errorf("baton_budget_handoffs_total{outcome=%q} = %v, want %v", outcome, v, want)
		}
	}
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("answer %d: %v: %s", resp.StatusCode, err, b)
	}
}

// TestBudgetA2AMessage shapes an A2A SendMessage: the message's field
// policy drops a debug part and a metadata member, and the envelope in its
// metadata is trimmed to the budget; the pointers the agent is told of are
// the request body's.
func TestBudgetA2AMessage(t *testing.T) {
	t.Parallel()
	store := sharedStore(t) // the artifact trimmed by reference is read by lean's Baton
	lean := &headerAgent{}
	leanB := startBatonWith(t, "agent: lean\nupstream: "+serve(t, lean)+"\n", store(), nil)
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"lean": leanB.IngressAddr()})+`edges:
  - to: lean
    context:
      budget: {max_tokens: 600, model: gpt-4o, over: trim}
      fields: {message: {drop: [/parts/1, /metadata/debug]}}
`, store(), nil)
	var env map[string]any
	_ = json.Unmarshal(budgetEnvelope("Summarise the incident."), &env)
	msg := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": map[string]any{
		"role": "user", "messageId": "m-1", "kind": "message",
		"parts":    []any{map[string]any{"kind": "text", "text": "see the envelope"}, map[string]any{"kind": "text", "text": wordy(400)}},
		"metadata": map[string]any{"debug": wordy(100), "baton.handoff": env},
	}}}
	body, _ := json.Marshal(msg)
	resp := send(t, aB.EgressAddr(), "lean", http.MethodPost, "/a2a", string(body), http.Header{"Content-Type": {"application/json"}})
	if answer, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || len(lean.bodies) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, answer)
	}
	var got struct {
		Params struct {
			Message struct {
				Parts    []map[string]any `json:"parts"`
				Metadata struct {
					Debug   any              `json:"debug"`
					Handoff handoff.Envelope `json:"baton.handoff"`
				} `json:"metadata"`
			} `json:"message"`
		} `json:"params"`
	}
	if err := json.Unmarshal(lean.bodies[0], &got); err != nil {
		t.Fatal(err)
	}
	m := got.Params.Message
	omitted := m.Metadata.Handoff.Omitted
	if len(m.Parts) != 1 || m.Metadata.Debug != nil || m.Metadata.Handoff.Task.Intent != "Summarise the incident." ||
		!slices.Contains(omitted, "/params/message/parts/1") || !slices.Contains(omitted, "/params/message/metadata/debug") ||
		!slices.Contains(omitted, handoff.A2APointer+"/rejected_paths/0/why") {
		t.Fatalf("lean got parts %d, debug %v, omitted %q", len(m.Parts), m.Metadata.Debug, omitted)
	}
	o200k, _ := tokens.For("gpt-4o", "")
	if n := o200k.Count(lean.bodies[0]); n > 600+250 {
		t.Fatalf("lean got %d tokens", n)
	}
}

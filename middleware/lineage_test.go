package middleware

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func handlingReading(id string, reads ...string) *Handling {
	h := &Handling{ID: id, Work: true}
	for i, r := range reads {
		src := "its task"
		if i > 0 {
			src = fmt.Sprintf("the answer of call %d", i)
		}
		h.lineage.read(src, []byte(r), nil, false)
	}
	return h
}

// TestMatchLineage: a call is tied to the one handling whose distinctive
// phrases it quotes, never when they are shared or point at two.
func TestMatchLineage(t *testing.T) {
	t.Parallel()
	task := func(account string) string {
		return `{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":"Pay the March invoice of Acme Corp from account ` +
			account + ` and tell finance when it is done"}]}}}`
	}
	h1, h2, h3 := handlingReading("h1", task("DE4417")), handlingReading("h2", task("DE4418")), handlingReading("h3", task("DE4419"))
	model := func(account string) string {
		return `{"model":"gpt-4.1-mini","messages":[{"role":"system","content":"You are a payments agent."},` +
			`{"role":"user","content":"Pay the March invoice of Acme Corp from account ` + account + ` and tell finance when it is done"}]}`
	}
	for _, tc := range []struct {
		name  string
		cands []*Handling
		call  string
		want  *Handling
	}{
		{"one token apart: each its own", []*Handling{h1, h2, h3}, model("DE4418"), h2},
		{"one token apart: the first", []*Handling{h1, h2, h3}, model("DE4417"), h1},
		{"quotes two requests' phrases", []*Handling{h1, h2, h3}, model("DE4417") + model("DE4419"), nil},
		{"quotes only what all read", []*Handling{h1, h2, h3}, `{"content":"Pay the March invoice of Acme Corp"}`, nil},
		{"quotes another account", []*Handling{h1, h2, h3}, model("DE9999"), nil},
		{"a single handling: not lineage's to decide", []*Handling{h1}, model("DE4417"), nil},
	} {
		m := matchLineage(tc.cands, []byte(tc.call))
		if m.h != tc.want {
			t.Errorf("%s: tied to %v (%s), want %v", tc.name, id(m.h), m.evidence, id(tc.want))
		}
	}

	// Identical requests: nothing is distinctive.
	same1, same2 := handlingReading("s1", task("DE4417")), handlingReading("s2", task("DE4417"))
	if m := matchLineage([]*Handling{same1, same2}, []byte(model("DE4417"))); m.h != nil {
		t.Errorf("identical requests: tied to %s", m.h.ID)
	}

	// Each tie feeds the next: the answer a handling's call got is its
	// own, and the next call quotes it.
	a := handlingReading("a", task("DE4417"), `{"output":[{"type":"function_call","name":"book","arguments":"{\"request\":\"book the lakeside lodge for forty on Friday\"}"}]}`)
	b := handlingReading("b", task("DE4417"), `{"output":[{"type":"function_call","name":"book","arguments":"{\"request\":\"book the harbour hall for twelve on Monday\"}"}]}`)
	m := matchLineage([]*Handling{a, b}, []byte(`{"message":{"parts":[{"text":"book the harbour hall for twelve on Monday"}]}}`))
	if m.h != b || !strings.Contains(m.evidence, "the answer of call 1") {
		t.Errorf("the tool call's handoff: tied to %v (%s), want b by its answer", id(m.h), m.evidence)
	}

	// What an answer repeats of its call, the agent wrote: a model's answer
	// names the model every call of the agent names, and is no handling's
	// phrase. Without the call kept beside it, the answer would make every
	// other handling's model call quote two handlings.
	ask := func(task string) string {
		return `{"model":"gpt-4.1-mini","instructions":"Book what the task needs.","input":[{"role":"user","content":"` + task + `"}]}`
	}
	answer := func(task string) string {
		return `{"id":"resp_1","object":"response","model":"gpt-4.1-mini-2025-04-14","instructions":"Book what the task needs.",` +
			`"output":[{"type":"function_call","name":"book","arguments":"{\"request\":\"book #1: ` + task + `\"}"}]}`
	}
	first, second := "reserve the lakeside lodge for team aurora", "reserve the harbour hall for team basalt"
	h1, h2 = handlingReading("h1", task(first)), handlingReading("h2", task(second))
	h1.lineage.read("the answer of llm", []byte(answer(first)), []byte(ask(first)), false)
	if m := matchLineage([]*Handling{h1, h2}, []byte(ask(second))); m.h != h2 {
		t.Errorf("h2's model call after h1 read its answer: tied to %v (%s), want h2", id(m.h), m.evidence)
	}
	if m := matchLineage([]*Handling{h1, h2}, []byte(`{"parts":[{"text":"book #1: `+first+`"}]}`)); m.h != h1 {
		t.Errorf("h1's handoff quoting its model's answer: tied to %v (%s), want h1", id(m.h), m.evidence)
	}
	h3 = handlingReading("h3", task(first))
	h3.lineage.read("the answer of llm", []byte(answer(first)), nil, false) // no call kept: its echo counts
	if m := matchLineage([]*Handling{h3, h2}, []byte(ask(second))); m.h != nil {
		t.Errorf("without the call kept beside the answer: tied to %s (%s); want none (the echo is h3's)", m.h.ID, m.evidence)
	}

	// Answered handlings keep nothing.
	b.Finish()
	if m := matchLineage([]*Handling{a, b}, []byte(`book the harbour hall for twelve on Monday`)); m.h != nil {
		t.Errorf("after b answered: tied to %s", m.h.ID)
	}
}

// TestLineageReading: an answer counts for its handling part by part, as
// the agent reads it (its next call may come before the answer's end), up
// to the bounds; once the agent answered, nothing more is kept.
func TestLineageReading(t *testing.T) {
	t.Parallel()
	a, b := handlingReading("a", "plan the offsite"), handlingReading("b", "plan the offsite")
	r := a.Reading("the answer of llm", []byte(`{"model":"gpt-4.1-mini"}`))
	answer := []byte(`{"model":"gpt-4.1-mini","output":"book the lakeside lodge `)
	r.Read(answer)
	if m := matchLineage([]*Handling{a, b}, []byte(`book the lakeside lodge`)); m.h != a || !strings.Contains(m.evidence, "the answer of llm") {
		t.Errorf("the answer's first part: tied to %v (%s), want a", id(m.h), m.evidence)
	}
	answer = append(answer, `for forty on Friday"}`...)
	r.Read(answer)
	if m := matchLineage([]*Handling{a, b}, []byte(`for forty on Friday`)); m.h != a || m.phrases != 2 {
		t.Errorf("the answer's second part: tied to %v (%s), want a by 2 phrases", id(m.h), m.evidence)
	}
	// The bounds: a long answer is kept up to MaxLineageRead, a handling's
	// reads and calls up to maxLineageBytes in all.
	long := []byte(strings.Repeat("word ", 3*MaxLineageRead))
	for range 8 {
		b.Reading("the answer of c", long[:100]).Read(long)
	}
	b.lineage.mu.Lock()
	size, n := b.lineage.size, len(b.lineage.reads)
	b.lineage.mu.Unlock()
	if size > maxLineageBytes || n != 5 {
		t.Errorf("b keeps %d bytes in %d reads; want at most %d, in 5 (its task, 4 answers: then it is full)", size, n, maxLineageBytes)
	}
	a.Finish()
	a.Reading("the answer of d", nil).Read([]byte("a late answer"))
	a.lineage.read("its task", []byte("a late task"), nil, false)
	if a.lineage.size != 0 || len(a.lineage.reads) != 0 {
		t.Errorf("after a answered it keeps %d bytes", a.lineage.size)
	}
}

func id(h *Handling) string {
	if h == nil {
		return "none"
	}
	return h.ID
}

// TestEachPhrase: words are runs of letters and digits, JSON escapes
// separate them, and case does not matter.
func TestEachPhrase(t *testing.T) {
	t.Parallel()
	collect := func(s string) []uint64 {
		var out []uint64
		eachPhrase([]byte(s), func(h uint64) { out = append(out, h) })
		return out
	}
	a := collect(`Book the Lodge`)
	b := collect(`{"text":"book THE lodge"}`)
	if len(a) != 1 || len(b) != 2 || b[1] != a[0] {
		t.Errorf("phrases %v and %v", a, b)
	}
	if c := collect(`"line\nbook the lodge\u00e9"`); len(c) != 2 || c[1] != a[0] {
		t.Errorf("escapes: %v, want %v second", c, a)
	}
}

func BenchmarkMatchLineage(b *testing.B) {
	var cands []*Handling
	for i := range 16 {
		cands = append(cands, handlingReading(fmt.Sprint(i), strings.Repeat(fmt.Sprintf("request %d asks to plan the offsite for team %d in spring. ", i, i), 40),
			strings.Repeat(fmt.Sprintf("the model proposes venue %d with catering and rooms. ", i), 40)))
	}
	call := []byte(`{"model":"gpt-4.1-mini","input":[{"role":"user","content":"` + strings.Repeat("request 7 asks to plan the offsite for team 7 in spring. ", 20) + `"}]}`)
	matchLineage(cands, call) // hash the handlings' reads once
	b.ReportAllocs()
	b.SetBytes(int64(len(call)))
	for b.Loop() {
		if m := matchLineage(cands, call); m.h != cands[7] {
			b.Fatal("wrong tie")
		}
	}
}

// TestCallHeadAsWritten: the call an answer is kept with is the body as the
// agent wrote it, not as Baton rewrote it (trust marks re-encode the JSON,
// its keys in another order): an answer that repeats the agent's own words
// repeats them in the agent's order.
func TestCallHeadAsWritten(t *testing.T) {
	t.Parallel()
	wrote := []byte(`{"message":{"role":"ROLE_USER","parts":[{"text":"notify #2: book the lodge","mediaType":"text/plain"}]}}`)
	r := httptest.NewRequest(http.MethodPost, "http://d/", bytes.NewReader(wrote))
	in := &Info{Body: wrote, Buffered: true}
	if got := in.CallHead(); !bytes.Equal(got, wrote) {
		t.Fatalf("buffered: %s", got)
	}
	replaceBody(r, in, []byte(`{"message":{"metadata":{"baton.trust":{}},"parts":[{"mediaType":"text/plain","text":"notify #2: book the lodge"}],"role":"ROLE_USER"}}`))
	replaceBody(r, in, []byte(`{}`))
	if got := in.CallHead(); !bytes.Equal(got, wrote) {
		t.Errorf("rewritten: %s; want the body as the agent wrote it", got)
	}
}

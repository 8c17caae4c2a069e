package proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// TestHandlingsForgetAnsweredOldestFirst: a handling in flight is found
// however many are answered meanwhile; answered ones are forgotten oldest
// first, and not found past their time.
func TestHandlingsForgetAnsweredOldestFirst(t *testing.T) {
	t.Parallel()
	hs := newHandlings(time.Hour)
	live := &middleware.Handling{ID: record.NewID(traceN(0)), TraceID: traceN(0), Started: time.Now(), Contexts: []string{"ctx-live"}}
	hs.Begin(live)
	first := &middleware.Handling{ID: record.NewID(traceN(1)), TraceID: traceN(1), Started: time.Now(), Contexts: []string{"ctx-1"}}
	hs.Begin(first)()
	for i := 2; i < recentHandlings+2; i++ {
		hs.Begin(&middleware.Handling{ID: record.NewID(traceN(i)), TraceID: traceN(i), Started: time.Now()})()
	}
	if hs.Handling(live.ID) != live || hs.OfContext("ctx-live") != live || len(hs.OfTrace(live.TraceID, nil)) != 1 {
		t.Error("a handling in flight was forgotten")
	}
	if hs.Handling(first.ID) != nil || hs.OfContext("ctx-1") != nil || len(hs.OfTrace(first.TraceID, nil)) != 0 {
		t.Error("the oldest answered handling is still found")
	}
	if len(hs.byID) != recentHandlings+1 || len(hs.byTrace) != recentHandlings+1 {
		t.Errorf("%d handlings by id, %d traces; want %d", len(hs.byID), len(hs.byTrace), recentHandlings+1)
	}
	old := &middleware.Handling{ID: record.NewID(traceN(-1)), TraceID: traceN(-1), Started: time.Now().Add(-2 * time.Hour)}
	hs.Begin(old)()
	if hs.Handling(old.ID) != nil {
		t.Error("a handling answered past its time is found")
	}
}

func traceN(i int) string { return fmt.Sprintf("4bf92f35%024x", i+1<<20) }

// BenchmarkHandle is what the ingress pays per delivered request for the
// handling: its key, its baggage member, and the registry, kept full.
func BenchmarkHandle(b *testing.B) {
	hs := newHandlings(time.Hour)
	h := middleware.Handle(hs)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	traces := make([]string, 1<<12)
	for i := range traces {
		traces[i] = traceN(i)
	}
	r := httptest.NewRequest(http.MethodPost, "http://summarizer/work", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		in := &middleware.Info{Side: middleware.Ingress, From: "analyst", To: "summarizer", Hop: 1,
			TraceID: traces[i%len(traces)], Key: "bk-0123456789abcdef0123456789abcdef", Start: time.Now()}
		in.RecordID = in.TraceID + ".00f067aa0ba902b7"
		r.Header = http.Header{"Content-Type": {"application/json"}}
		h.ServeHTTP(w, r.WithContext(middleware.WithInfo(r.Context(), in)))
	}
}

// TestHandlingsOfTraceNewestFirst: a trace's handlings come newest first,
// at most perTrace of them, and one forgotten leaves the others linked.
func TestHandlingsOfTraceNewestFirst(t *testing.T) {
	t.Parallel()
	hs := newHandlings(time.Hour)
	var all []*middleware.Handling
	for range perTrace + 2 {
		h := &middleware.Handling{ID: record.NewID(traceN(7)), TraceID: traceN(7), Started: time.Now()}
		hs.Begin(h)
		all = append(all, h)
	}
	got := hs.OfTrace(traceN(7), nil)
	if len(got) != perTrace || got[0] != all[len(all)-1] || got[perTrace-1] != all[2] {
		t.Fatalf("OfTrace: %d handlings; want the %d newest, newest first", len(got), perTrace)
	}
	hs.mu.Lock()
	hs.forget(all[5])
	hs.mu.Unlock()
	got = hs.OfTrace(traceN(7), nil)
	if len(got) != perTrace-1 || got[len(got)-1] != all[2] {
		t.Errorf("after forgetting one in the middle: %d handlings", len(got))
	}
	for _, h := range got {
		if h == all[5] {
			t.Error("a forgotten handling is still listed")
		}
	}
}

// BenchmarkCorrelate is what the egress pays per call to tie it to its
// handling (middleware.Correlate), by each rule, with the registry holding
// 4,096 answered handlings: the baggage member, traceparent as received,
// the one handling in flight (the call carries no trace: its traceparent is
// written), and nothing to tie it to (several in flight). Each rule's
// "bare" twin runs the same loop (a fresh Info and header per call) through
// a handler that does nothing: the difference is correlation's.
func BenchmarkCorrelate(b *testing.B) {
	hs := newHandlings(time.Hour)
	for i := range 1 << 12 {
		hs.Begin(&middleware.Handling{ID: traceN(i) + ".00f067aa0ba902b7", TraceID: traceN(i), Started: time.Now(), Work: true})()
	}
	live := &middleware.Handling{ID: traceN(99999) + ".00f067aa0ba902b7", TraceID: traceN(99999), Hop: 1,
		Started: time.Now(), Work: true}
	live.SpanID = [8]byte{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	end := hs.Begin(live)
	defer end()
	bare := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	c := middleware.Correlate(hs)(bare)
	tp := "00-" + live.TraceID + "-00f067aa0ba902b7-01"
	for _, bc := range []struct {
		name   string
		header http.Header
		other  bool // another handling in flight
	}{
		{"baggage", http.Header{"Traceparent": {tp}, "Baggage": {"tenant=acme,baton.handling=" + live.ID}}, false},
		{"traceparent", http.Header{"Traceparent": {tp}}, false},
		{"in-flight", http.Header{}, false},
		{"none", http.Header{}, true},
	} {
		for _, h := range []struct {
			name string
			h    http.Handler
		}{{bc.name, c}, {bc.name + "/bare", bare}} {
			b.Run(h.name, func(b *testing.B) {
				if bc.other {
					other := &middleware.Handling{ID: traceN(99998) + ".00f067aa0ba902b7", TraceID: traceN(99998), Work: true}
					defer hs.Begin(other)()
				}
				r := httptest.NewRequest(http.MethodPost, "http://summarizer/work", nil)
				w := httptest.NewRecorder()
				b.ReportAllocs()
				for b.Loop() {
					in := &middleware.Info{Side: middleware.Egress}
					r.Header = bc.header.Clone()
					h.h.ServeHTTP(w, r.WithContext(middleware.WithInfo(r.Context(), in)))
				}
			})
		}
	}
}

// TestHandlingsOverlapping: lineage keeps what the agent reads once two
// handlings that set it to work were in flight at once, and only then: an
// agent that serves one request at a time, or reads beside one, never pays
// for it.
func TestHandlingsOverlapping(t *testing.T) {
	t.Parallel()
	hs := newHandlings(time.Hour)
	for i := range 3 {
		hs.Begin(&middleware.Handling{ID: traceN(i) + ".00f067aa0ba902b7", TraceID: traceN(i), Started: time.Now(), Work: true})()
	}
	end := hs.Begin(&middleware.Handling{ID: traceN(3) + ".00f067aa0ba902b7", TraceID: traceN(3), Started: time.Now(), Work: true})
	hs.Begin(&middleware.Handling{ID: traceN(4) + ".00f067aa0ba902b7", TraceID: traceN(4), Started: time.Now()})() // a read beside it
	if hs.overlapping() {
		t.Fatal("one request at a time: overlapping")
	}
	hs.Begin(&middleware.Handling{ID: traceN(5) + ".00f067aa0ba902b7", TraceID: traceN(5), Started: time.Now(), Work: true})()
	end()
	if !hs.overlapping() {
		t.Error("two requests were in flight at once: not overlapping")
	}
}

package middleware

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/handoff/record"
)

// call is one step of a handling's calls to one peer, in a test script.
type call struct {
	body    string      // what the call is (its fingerprint's input)
	outcome CallOutcome // how it ends; 0: still in flight when the next starts
	want    int         // the position it should take
}

func TestHandlingPositions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		calls []call
	}{
		{name: "calls one after another take the next positions",
			calls: []call{{"a", CallAnswered, 1}, {"b", CallAnswered, 2}, {"c", CallAnswered, 3}}},
		{name: "the agent retrying a call in flight shares its position",
			calls: []call{{"a", 0, 1}, {"a", CallAnswered, 1}, {"b", CallAnswered, 2}}},
		{name: "the agent retrying a failed call takes its position again",
			calls: []call{{"a", CallAnswered, 1}, {"b", CallFailed, 2}, {"b", CallAnswered, 2}, {"c", CallAnswered, 3}}},
		{name: "the same call after it was answered is a new call",
			calls: []call{{"a", CallAnswered, 1}, {"a", CallAnswered, 2}}},
		{name: "another call after a failure is a new call",
			calls: []call{{"a", CallFailed, 1}, {"b", CallAnswered, 2}}},
		{name: "a position given up before anything left is the next call's",
			calls: []call{{"a", CallAnswered, 1}, {"b", CallUnsent, 2}, {"c", CallAnswered, 2}}},
		{name: "calls in flight together take one position each",
			calls: []call{{"a", 0, 1}, {"b", 0, 2}, {"c", CallAnswered, 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &Handling{Key: ScopeKey("a", "b", "k")}
			for i, c := range tc.calls {
				pos := h.take("peer", sha256.Sum256([]byte(c.body)))
				if pos != c.want {
					t.Fatalf("call %d (%s) took position %d, want %d", i, c.body, pos, c.want)
				}
				if c.outcome != 0 {
					(&Call{h: h, peer: "peer", pos: pos}).Settle(c.outcome)
				}
			}
		})
	}
}

// TestPositionalKeysAcrossRuns: a handling of the same inbound key (the
// agent re-run when its chain resumed) gives its calls the keys of the
// first run, position by position, whatever their bodies; another inbound
// key, another peer or another position gives other keys.
func TestPositionalKeysAcrossRuns(t *testing.T) {
	t.Parallel()
	keys := func(scope Scope, peer string, bodies ...string) []string {
		h := &Handling{Key: scope}
		var out []string
		for _, b := range bodies {
			pos := h.take(peer, sha256.Sum256([]byte(b)))
			(&Call{h: h, peer: peer, pos: pos}).Settle(CallAnswered)
			out = append(out, positionKey(h.Key, peer, pos))
		}
		return out
	}
	first := keys(ScopeKey("a", "b", "k-1"), "c", "run 1, step 1", "run 1, step 2")
	rerun := keys(ScopeKey("a", "b", "k-1"), "c", "run 2, step 1", "run 2, step 2")
	if first[0] != rerun[0] || first[1] != rerun[1] {
		t.Errorf("a re-run's keys %q differ from the first run's %q", rerun, first)
	}
	if first[0] == first[1] {
		t.Error("two positions share a key")
	}
	seen := map[string]string{}
	for name, k := range map[string]string{
		"first":                 first[0],
		"another inbound key":   keys(ScopeKey("a", "b", "k-2"), "c", "x")[0],
		"another sender":        keys(ScopeKey("z", "b", "k-1"), "c", "x")[0],
		"another peer":          keys(ScopeKey("a", "b", "k-1"), "d", "x")[0],
		"scope fields shifted":  keys(ScopeKey("a", "bk", "-1"), "c", "x")[0],
		"agent key lookalike":   `"` + "k-1" + `"`,
		"content key lookalike": `"bk-` + strings.Repeat("0", 32) + `"`,
	} {
		if other, dup := seen[k]; dup {
			t.Errorf("%s and %s share key %s", name, other, k)
		}
		seen[k] = name
	}
	if k := first[0]; !strings.HasPrefix(k, `"bp-`) || len(k) != len(`"bp-`)+32+1 {
		t.Errorf("positional key %s: want \"bp-\" and 32 hex digits, quoted", k)
	}
}

func TestHandlingStopKeepsTheFirst(t *testing.T) {
	t.Parallel()
	h := &Handling{}
	h.Stop("")
	h.Stop("first")
	h.Stop("second")
	if got := h.StoppedAt(); got != "first" {
		t.Errorf("StoppedAt = %q, want the first dead letter", got)
	}
}

func TestTakeHandlingMember(t *testing.T) {
	t.Parallel()
	const id = "4bf92f3577b34da6a3ce929d0e0e4736.00f067aa0ba902b7"
	tests := []struct {
		name     string
		baggage  []string // nil: no header
		want     string
		wantLeft string // the baggage left ("": none)
	}{
		{name: "no baggage"},
		{name: "others only", baggage: []string{"tenant=acme, user=7"}, wantLeft: "tenant=acme, user=7"},
		{name: "ours alone", baggage: []string{"baton.handling=" + id}, want: id},
		{name: "ours among others, with spaces and properties",
			baggage: []string{"tenant=acme , baton.handling = " + id + ";prop=1,user=7"}, want: id, wantLeft: "tenant=acme,user=7"},
		{name: "over two lines", baggage: []string{"tenant=acme", "baton.handling=" + id}, want: id, wantLeft: "tenant=acme"},
		{name: "the same twice", baggage: []string{"baton.handling=" + id + ",baton.handling=" + id}, want: id},
		{name: "two different: none", baggage: []string{"baton.handling=" + id + ",baton.handling=" + strings.Replace(id, "4bf", "5bf", 1)}},
		{name: "not a record id", baggage: []string{"baton.handling=admin,x=1"}, wantLeft: "x=1"},
		{name: "empty value", baggage: []string{"baton.handling="}},
		{name: "malformed list", baggage: []string{",,;=,baton.handling,=x"}, wantLeft: ";=,baton.handling,=x"},
		{name: "a key that only starts like ours", baggage: []string{"baton.handlings=" + id}, wantLeft: "baton.handlings=" + id},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tc.baggage != nil {
				h[HeaderBaggage] = tc.baggage
			}
			if got := takeHandlingMember(h); got != tc.want {
				t.Errorf("takeHandlingMember = %q, want %q", got, tc.want)
			}
			if left := strings.Join(h.Values(HeaderBaggage), ","); left != tc.wantLeft {
				t.Errorf("baggage left %q, want %q", left, tc.wantLeft)
			}
		})
	}
}

func TestSetHandlingMember(t *testing.T) {
	t.Parallel()
	const id = "4bf92f3577b34da6a3ce929d0e0e4736.00f067aa0ba902b7"
	for name, tc := range map[string]struct {
		baggage []string
		want    string
	}{
		"none":                 {nil, "baton.handling=" + id},
		"others kept":          {[]string{"tenant=acme"}, "tenant=acme,baton.handling=" + id},
		"a sender's replaced":  {[]string{"baton.handling=" + strings.Replace(id, "4bf", "5bf", 1) + ",x=1"}, "x=1,baton.handling=" + id},
		"two lines joined":     {[]string{"a=1", "b=2"}, "a=1,b=2,baton.handling=" + id},
		"at the W3C limit":     {[]string{"big=" + strings.Repeat("x", maxBaggage-4)}, "big=" + strings.Repeat("x", maxBaggage-4)},
		"a forged one removed": {[]string{"baton.handling=forged"}, "baton.handling=" + id},
	} {
		h := http.Header{}
		if tc.baggage != nil {
			h[HeaderBaggage] = tc.baggage
		}
		setHandlingMember(h, id)
		if got := h.Values(HeaderBaggage); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: baggage %q, want [%q]", name, got, tc.want)
		}
	}
}

func FuzzHandlingMember(f *testing.F) {
	f.Add("tenant=acme,baton.handling=4bf92f3577b34da6a3ce929d0e0e4736.00f067aa0ba902b7;p=1", "x=1")
	f.Add(",,;=,baton.handling,=x", "")
	f.Add("baton.handling=a,baton.handling=b", "baton.handling=c")
	f.Fuzz(func(t *testing.T, line1, line2 string) {
		h := http.Header{HeaderBaggage: {line1, line2}}
		id := takeHandlingMember(h)
		if id != "" && record.TraceOf(id) == "" {
			t.Fatalf("takeHandlingMember returned %q, not a record id", id)
		}
		for _, v := range h.Values(HeaderBaggage) {
			for _, m := range strings.Split(v, ",") {
				if _, ours := handlingValue(m); ours {
					t.Fatalf("a baton.handling member is left: %q", v)
				}
			}
		}
		setHandlingMember(h, "4bf92f3577b34da6a3ce929d0e0e4736.00f067aa0ba902b7")
		if got := takeHandlingMember(h); got != "4bf92f3577b34da6a3ce929d0e0e4736.00f067aa0ba902b7" &&
			len(strings.Join(h.Values(HeaderBaggage), ",")) < maxBaggage-100 {
			t.Fatalf("the member set is not read back: %q from %q", got, h.Values(HeaderBaggage))
		}
	})
}

// TestCorrelate: an outbound handoff is tied to the handling its agent is
// in by the most exact signal its request carries, and only to a handling
// of this Baton's; with several candidates and no exact signal it is
// ambiguous, and with none uncorrelated.
func TestCorrelate(t *testing.T) {
	t.Parallel()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const otherTrace = "0af7651916cd43dd8448eb211c80319c"
	id := func(n string) string { return traceID + "." + strings.Repeat(n, 16) }
	span := func(n string) trace.SpanID {
		id, _ := trace.SpanIDFromHex(strings.Repeat(n, 16))
		return id
	}
	tests := []struct {
		name    string
		book    func(b *memBook)
		baggage string
		tp      string // the traceparent the agent sent; "none": none
		wantID  string // "": no handling
		wantHow string
		wantHop int
		// wantTrace is the traceparent sent on when the call continues the
		// handling's trace; "": the agent's own
		wantTrace string
	}{
		{name: "nothing: uncorrelated", book: func(*memBook) {}, wantHop: 1},
		{name: "the one handling of the trace", book: func(b *memBook) { b.begin(traceID, id("a"), span("a"), 2, "k1", false) },
			wantID: id("a"), wantHow: record.CorrelatedByTrace, wantHop: 3},
		{name: "baggage names it among several", book: func(b *memBook) {
			b.begin(traceID, id("a"), span("a"), 1, "k1", false)
			b.begin(traceID, id("b"), span("b"), 1, "k2", false)
		}, baggage: "baton.handling=" + id("a"), wantID: id("a"), wantHow: record.CorrelatedByBaggage, wantHop: 2},
		{name: "traceparent as received names it among several", book: func(b *memBook) {
			b.begin(traceID, id("a"), span("a"), 1, "k1", false)
			b.begin(traceID, id("b"), span("b"), 1, "k2", false)
		}, tp: "00-" + traceID + "-" + span("b").String() + "-01", wantID: id("b"), wantHow: record.CorrelatedByTraceparent, wantHop: 2},
		{name: "a forged baggage member finds nothing, the trace decides", book: func(b *memBook) {
			b.begin(traceID, id("a"), span("a"), 1, "k1", false)
		}, baggage: "baton.handling=" + id("f"), wantID: id("a"), wantHow: record.CorrelatedByTrace, wantHop: 2},
		{name: "the one in flight over those answered", book: func(b *memBook) {
			b.begin(traceID, id("a"), span("a"), 1, "k1", true)
			b.begin(traceID, id("b"), span("b"), 1, "k2", false)
		}, wantID: id("b"), wantHow: record.CorrelatedByTrace, wantHop: 2},
		{name: "a re-run of the same key: the newest", book: func(b *memBook) {
			b.begin(traceID, id("a"), span("a"), 1, "k1", false)
			b.begin(traceID, id("b"), span("b"), 1, "k1", false)
		}, wantID: id("b"), wantHow: record.CorrelatedByTrace, wantHop: 2},
		{name: "the one answered, for an agent that works on", book: func(b *memBook) {
			b.begin(traceID, id("a"), span("a"), 4, "k1", true)
		}, wantID: id("a"), wantHow: record.CorrelatedByTrace, wantHop: 5},
		{name: "several in flight: ambiguous, at the deepest hop", book: func(b *memBook) {
			b.begin(traceID, id("a"), span("a"), 1, "k1", false)
			b.begin(traceID, id("b"), span("b"), 3, "k2", false)
		}, wantHow: record.CorrelationAmbiguous, wantHop: 4},
		{name: "nothing forwarded: the one handling in flight", book: func(b *memBook) {
			b.begin(otherTrace, otherTrace+".aaaaaaaaaaaaaaaa", span("a"), 2, "k1", false)
			b.begin(otherTrace, otherTrace+".cccccccccccccccc", span("c"), 2, "k3", true)
		}, tp: "none", wantID: otherTrace + ".aaaaaaaaaaaaaaaa", wantHow: record.CorrelatedByInFlight, wantHop: 3,
			wantTrace: "00-" + otherTrace + "-" + span("a").String() + "-00"},
		{name: "nothing forwarded: reads beside the one in flight do not count", book: func(b *memBook) {
			b.begin(otherTrace, otherTrace+".aaaaaaaaaaaaaaaa", span("a"), 2, "k1", false)
			b.beginRead(traceID, id("b"), span("b"), 1, "k2")
		}, tp: "none", wantID: otherTrace + ".aaaaaaaaaaaaaaaa", wantHow: record.CorrelatedByInFlight, wantHop: 3},
		{name: "nothing forwarded, two in flight: uncorrelated", book: func(b *memBook) {
			b.begin(otherTrace, otherTrace+".aaaaaaaaaaaaaaaa", span("a"), 2, "k1", false)
			b.begin(traceID, id("b"), span("b"), 1, "k2", false)
		}, tp: "none", wantHop: 1},
		{name: "a trace this Baton handles nothing of: no guess by what is in flight", book: func(b *memBook) {
			b.begin(otherTrace, otherTrace+".aaaaaaaaaaaaaaaa", span("a"), 2, "k1", false)
		}, wantHop: 1},
		{name: "a member of another trace's handling is ignored", book: func(b *memBook) {
			b.begin(otherTrace, otherTrace+".aaaaaaaaaaaaaaaa", span("a"), 2, "k1", false)
		}, baggage: "baton.handling=" + otherTrace + ".aaaaaaaaaaaaaaaa", wantHop: 1},
		{name: "a member without traceparent: its handling's trace continues", book: func(b *memBook) {
			b.begin(otherTrace, otherTrace+".aaaaaaaaaaaaaaaa", span("a"), 2, "k1", false)
			b.begin(traceID, id("b"), span("b"), 1, "k2", false)
		}, tp: "none", baggage: "baton.handling=" + otherTrace + ".aaaaaaaaaaaaaaaa",
			wantID: otherTrace + ".aaaaaaaaaaaaaaaa", wantHow: record.CorrelatedByBaggage, wantHop: 3,
			wantTrace: "00-" + otherTrace + "-" + span("a").String() + "-00"},
		{name: "a garbage member finds nothing", book: func(b *memBook) {
			b.begin(otherTrace, otherTrace+".aaaaaaaaaaaaaaaa", span("a"), 2, "k1", false)
		}, tp: "none", baggage: "baton.handling=%00not-an-id", wantHop: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			book := newMemBook(nil)
			tc.book(book)
			in := &Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer", TraceID: traceID}
			r := withInfo(httptest.NewRequest(http.MethodPost, "http://summarizer/", strings.NewReader(`{"x":1}`)), in)
			switch tc.tp {
			case "": // the agent forwards the trace, with a span of its own
				r.Header.Set(HeaderTraceparent, "00-"+traceID+"-"+strings.Repeat("e", 16)+"-01")
			case "none": // the agent forwards nothing
			default:
				r.Header.Set(HeaderTraceparent, tc.tp)
			}
			if tc.baggage != "" {
				r.Header.Set(HeaderBaggage, "tenant=acme,"+tc.baggage)
			}
			var sent http.Header
			Correlate(book)(Identity(IdempotencyKey(book, 1<<20, false)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sent = r.Header.Clone()
			})))).ServeHTTP(httptest.NewRecorder(), r)
			got := ""
			if in.Handling != nil {
				got = in.Handling.ID
			}
			if got != tc.wantID || in.Correlation != tc.wantHow || in.Hop != tc.wantHop {
				t.Errorf("tied to %q by %q at hop %d; want %q by %q at hop %d", got, in.Correlation, in.Hop,
					tc.wantID, tc.wantHow, tc.wantHop)
			}
			if in.Uncorrelated != (tc.wantHow == "") {
				t.Errorf("Uncorrelated = %v", in.Uncorrelated)
			}
			wantSource := record.KeyFromContent
			if tc.wantID != "" {
				wantSource = record.KeyFromPosition
			}
			if in.KeySource != wantSource || sent.Get(HeaderKeySource) != wantSource {
				t.Errorf("key from %q (Baton-Key-Source %q), want %q", in.KeySource, sent.Get(HeaderKeySource), wantSource)
			}
			if bg := sent.Get(HeaderBaggage); strings.Contains(bg, BaggageHandling) || (tc.baggage != "" && bg != "tenant=acme") {
				t.Errorf("baggage sent on %q: want the agent's without baton.handling", bg)
			}
			if tc.wantTrace != "" && sent.Get(HeaderTraceparent) != tc.wantTrace {
				t.Errorf("traceparent sent on %q, want the handling's %q", sent.Get(HeaderTraceparent), tc.wantTrace)
			}
			if tc.tp == "none" && tc.wantID == "" && sent.Get(HeaderTraceparent) != "" {
				t.Errorf("traceparent %q sent on for a call tied to nothing", sent.Get(HeaderTraceparent))
			}
		})
	}
}

// begin starts a handling of trace for the test, answered already when done.
func (b *memBook) begin(traceID, id string, span trace.SpanID, hop int, key string, done bool) {
	h := &Handling{ID: id, TraceID: traceID, SpanID: span, Hop: hop, Key: ScopeKey("up", "analyst", key), Work: true}
	end := b.Begin(h)
	if done {
		end()
	}
}

// beginRead starts a handling of a read (an agent card, a task poll) for the
// test: one that sets the agent to no work.
func (b *memBook) beginRead(traceID, id string, span trace.SpanID, hop int, key string) {
	b.Begin(&Handling{ID: id, TraceID: traceID, SpanID: span, Hop: hop, Key: ScopeKey("up", "analyst", key)})
}

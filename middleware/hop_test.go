package middleware

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batonproxy/baton/problem"
)

// memBook is an in-memory Handlings.
type memBook struct {
	mu      sync.Mutex
	byID    map[string]*Handling
	byTrace map[string][]*Handling
	byCtx   map[string]*Handling
	// reads counts lookups.
	reads int
}

// inbound is a handling to begin: its hop and receipt.
type inbound struct {
	hop    int
	record string
}

func newMemBook(hops map[string]inbound) *memBook {
	b := &memBook{byID: map[string]*Handling{}, byTrace: map[string][]*Handling{}, byCtx: map[string]*Handling{}}
	for trace, in := range hops {
		b.RememberInbound(trace, in.hop, in.record)
	}
	return b
}

// RememberInbound begins a handling of trace at hop with receipt id.
func (b *memBook) RememberInbound(traceID string, hop int, id string) *Handling {
	h := &Handling{ID: id, TraceID: traceID, Hop: hop, Key: ScopeKey("up", "analyst", id)}
	b.Begin(h)
	return h
}

func (b *memBook) Begin(h *Handling) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byID[h.ID] = h
	b.byTrace[h.TraceID] = append(b.byTrace[h.TraceID], h)
	for _, c := range h.Contexts {
		b.byCtx[c] = h
	}
	return h.Finish
}

func (b *memBook) Handling(id string) *Handling {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	return b.byID[id]
}

func (b *memBook) OfTrace(traceID string, buf []*Handling) []*Handling {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	t := b.byTrace[traceID]
	for i := len(t) - 1; i >= 0; i-- {
		buf = append(buf, t[i])
	}
	return buf
}

func (b *memBook) InFlight() *Handling {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	var one *Handling
	for _, h := range b.byID {
		if h.Work && !h.Done() {
			if one != nil {
				return nil
			}
			one = h
		}
	}
	return one
}

func (b *memBook) Untied(string, string) {}

func (b *memBook) Working(buf []*Handling) []*Handling {
	b.mu.Lock()
	defer b.mu.Unlock()
	var live []*Handling
	for _, h := range b.byID {
		if h.Work && !h.Done() {
			live = append(live, h)
		}
	}
	if len(live) < 2 {
		return buf
	}
	return append(buf, live...)
}

func (b *memBook) OfContext(id string) *Handling {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	return b.byCtx[id]
}

func TestParseHop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string // nil: header absent
		want   int
		ok     bool
	}{
		{name: "absent is hop 1", values: nil, want: 1, ok: true},
		{name: "empty counts as absent", values: []string{""}, want: 1, ok: true},
		{name: "one", values: []string{"1"}, want: 1, ok: true},
		{name: "eight", values: []string{"8"}, want: 8, ok: true},
		{name: "four digits", values: []string{"9999"}, want: 9999, ok: true},
		{name: "surrounding space trimmed", values: []string{" 3\t"}, want: 3, ok: true},
		{name: "leading zero", values: []string{"07"}, want: 7, ok: true},
		{name: "zero", values: []string{"0"}},
		{name: "zeros", values: []string{"0000"}},
		{name: "negative", values: []string{"-1"}},
		{name: "plus sign", values: []string{"+1"}},
		{name: "letters", values: []string{"abc"}},
		{name: "digits then letters", values: []string{"1a"}},
		{name: "five digits", values: []string{"99999"}},
		{name: "leading zeros past four digits", values: []string{"00001"}},
		{name: "decimal", values: []string{"1.0"}},
		{name: "hex", values: []string{"0x1"}},
		{name: "inner space", values: []string{"1 2"}},
		{name: "list in one value", values: []string{"1,2"}},
		{name: "two headers", values: []string{"1", "2"}},
		{name: "two equal headers", values: []string{"1", "1"}},
		{name: "non-ASCII digit", values: []string{"١"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tc.values != nil {
				h[HeaderHop] = tc.values
			}
			got, ok := parseHop(h)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("parseHop(%q) = %d, %v; want %d, %v", tc.values, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestHopGuard(t *testing.T) {
	t.Parallel()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		name      string
		agent     []string // Baton-Agent values; nil: absent
		hop       []string // Baton-Hop values; nil: absent
		want      int
		wantClass problem.Class // for refusals
		wantFrom  string
		wantHop   int
	}{
		{name: "no Baton headers: hop 1 from no one", want: http.StatusOK, wantHop: 1},
		{name: "hop 1", agent: []string{"analyst"}, hop: []string{"1"}, want: http.StatusOK,
			wantFrom: "analyst", wantHop: 1},
		{name: "hop at max", agent: []string{"analyst"}, hop: []string{"8"}, want: http.StatusOK,
			wantFrom: "analyst", wantHop: 8},
		{name: "hop past max", agent: []string{"analyst"}, hop: []string{"9"}, want: http.StatusLoopDetected,
			wantClass: problem.HopLimit, wantHop: 9},
		{name: "largest hop past max", agent: []string{"analyst"}, hop: []string{"9999"},
			want: http.StatusLoopDetected, wantClass: problem.HopLimit, wantHop: 9999},
		{name: "hop 0", agent: []string{"analyst"}, hop: []string{"0"}, want: http.StatusBadRequest,
			wantClass: problem.BadHop},
		{name: "hop -1", agent: []string{"analyst"}, hop: []string{"-1"}, want: http.StatusBadRequest,
			wantClass: problem.BadHop},
		{name: "hop abc", agent: []string{"analyst"}, hop: []string{"abc"}, want: http.StatusBadRequest,
			wantClass: problem.BadHop},
		{name: "hop 99999", agent: []string{"analyst"}, hop: []string{"99999"}, want: http.StatusBadRequest,
			wantClass: problem.BadHop},
		{name: "two hop headers", agent: []string{"analyst"}, hop: []string{"1", "2"},
			want: http.StatusBadRequest, wantClass: problem.BadHop},
		{name: "malformed agent", agent: []string{"Not An Agent"}, hop: []string{"1"},
			want: http.StatusBadRequest, wantClass: problem.BadRequest},
		{name: "two agent headers", agent: []string{"analyst", "planner"}, hop: []string{"1"},
			want: http.StatusBadRequest, wantClass: problem.BadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked []string
			maxHops := func(from string) int {
				asked = append(asked, from)
				return 8
			}
			in := &Info{Side: Ingress, Agent: "summarizer", TraceID: trace}
			r := withInfo(httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}")), in)
			if tc.agent != nil {
				r.Header[HeaderAgent] = tc.agent
			}
			if tc.hop != nil {
				r.Header[HeaderHop] = tc.hop
			}
			served := false
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served = true
				w.WriteHeader(http.StatusOK)
			})
			rec := httptest.NewRecorder()
			HopGuard(maxHops)(next).ServeHTTP(rec, r)

			if rec.Code != tc.want {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tc.want, rec.Body)
			}
			if served != (tc.want == http.StatusOK) {
				t.Errorf("next served = %v with status %d", served, rec.Code)
			}
			if in.To != "summarizer" {
				t.Errorf("Info.To = %q, want this Baton's agent", in.To)
			}
			if tc.want != http.StatusOK {
				doc := readProblem(t, rec, tc.wantClass)
				if tc.wantClass == problem.HopLimit {
					if doc["hop"] != float64(tc.wantHop) || doc["max_hops"] != float64(8) {
						t.Errorf("hop, max_hops = %v, %v; want %d, 8", doc["hop"], doc["max_hops"], tc.wantHop)
					}
				}
				return
			}
			if in.From != tc.wantFrom || in.Hop != tc.wantHop || in.MaxHops != 8 {
				t.Errorf("Info From, Hop, MaxHops = %q, %d, %d; want %q, %d, 8",
					in.From, in.Hop, in.MaxHops, tc.wantFrom, tc.wantHop)
			}
			if len(asked) != 1 || asked[0] != tc.wantFrom {
				t.Errorf("maxHops asked for %q, want [%q]", asked, tc.wantFrom)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	handoff := func() *Info {
		return &Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer", TraceID: trace, MaxHops: 8}
	}
	tests := []struct {
		name    string
		in      *Info
		inbound int // hop of the inbound handoff in the book; 0: none
		want    int
		wantHop int // Baton-Hop sent on, or the refused hop
	}{
		{name: "first handoff of a trace", in: handoff(), want: http.StatusOK, wantHop: 1},
		{name: "continues the inbound hop", in: handoff(), inbound: 3, want: http.StatusOK, wantHop: 4},
		{name: "last hop allowed", in: handoff(), inbound: 7, want: http.StatusOK, wantHop: 8},
		{name: "inbound at max: 508 before anything leaves", in: handoff(), inbound: 8,
			want: http.StatusLoopDetected, wantHop: 9},
		{name: "another trace's hop does not count", in: &Info{Side: Egress, Agent: "analyst", From: "analyst",
			To: "summarizer", TraceID: "0af7651916cd43dd8448eb211c80319c", MaxHops: 8}, inbound: 8,
			want: http.StatusOK, wantHop: 1},
		{name: "no limit without MaxHops", in: &Info{Side: Egress, Agent: "analyst", From: "analyst",
			To: "summarizer", TraceID: trace}, inbound: 100, want: http.StatusOK, wantHop: 101},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const receipt = "receipt-of-the-inbound-handoff"
			book := newMemBook(nil)
			if tc.inbound > 0 {
				book.RememberInbound(trace, tc.inbound, receipt)
			}
			r := withInfo(httptest.NewRequest(http.MethodPost, "http://summarizer/", nil), tc.in)
			r.Header.Set(HeaderAgent, "mallory")
			r.Header.Set(HeaderHop, "1")
			var got http.Header
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Header.Clone()
			})
			if tc.in.TraceID != "" {
				r.Header.Set(HeaderTraceparent, "00-"+tc.in.TraceID+"-00f067aa0ba902b7-01")
			}
			rec := httptest.NewRecorder()
			Correlate(book)(Identity(next)).ServeHTTP(rec, r)

			if rec.Code != tc.want {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tc.want, rec.Body)
			}
			if tc.in.Hop != tc.wantHop {
				t.Errorf("Info.Hop = %d, want %d", tc.in.Hop, tc.wantHop)
			}
			if continues := tc.in.TraceID == trace && tc.inbound > 0; continues != (tc.in.ParentRecord == receipt) {
				t.Errorf("Info.ParentRecord = %q; want the inbound receipt only when the trace came in", tc.in.ParentRecord)
			}
			if tc.want != http.StatusOK {
				if got != nil {
					t.Error("a refused handoff went on down the chain")
				}
				doc := readProblem(t, rec, problem.HopLimit)
				if doc["hop"] != float64(tc.wantHop) || doc["max_hops"] != float64(tc.in.MaxHops) {
					t.Errorf("hop, max_hops = %v, %v; want %d, %d", doc["hop"], doc["max_hops"], tc.wantHop, tc.in.MaxHops)
				}
				return
			}
			if a, h := got.Values(HeaderAgent), got.Values(HeaderHop); len(a) != 1 || a[0] != "analyst" ||
				len(h) != 1 || h[0] != strconv.Itoa(tc.wantHop) {
				t.Errorf("Baton-Agent, Baton-Hop = %q, %q; want [analyst], [%d]", a, h, tc.wantHop)
			}
		})
	}
}

func TestIdentityExternalFetch(t *testing.T) {
	t.Parallel()
	book := newMemBook(nil)
	in := &Info{Side: Egress, Agent: "analyst", From: "analyst", External: "api.example.com:443", MaxHops: 1}
	r := withInfo(httptest.NewRequest(http.MethodGet, "https://api.example.com/", nil), in)
	r.Header.Set(HeaderAgent, "mallory")
	r.Header.Set(HeaderSignature, "sig1=:AAAA:")
	var got http.Header
	Correlate(book)(Identity(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
	}))).ServeHTTP(httptest.NewRecorder(), r)
	if got == nil {
		t.Fatal("external fetch not forwarded")
	}
	for _, k := range []string{HeaderAgent, HeaderHop, HeaderSignature} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %q on an external fetch, want none", k, v)
		}
	}
	if in.Hop != 0 || in.Handling != nil {
		t.Errorf("an external fetch with no handling in flight counted hop %d, tied to %v", in.Hop, in.Handling)
	}
}

func TestStripBatonHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// raw is the header block as an agent sends it; it is parsed the way
		// the server parses it.
		raw      string
		extra    http.Header // set on the parsed header as is, uncanonicalised
		wantGone []string
		wantKept []string
	}{
		{
			name: "canonical names",
			raw: "Baton-Agent: mallory\r\nBaton-Hop: 1\r\nBaton-Trust: trusted\r\nBaton-Grant: e30\r\n" +
				"Signature: sig1=:AAAA:\r\nSignature-Input: sig1=()\r\nContent-Type: application/json\r\n",
			wantGone: []string{"Baton-Agent", "Baton-Hop", "Baton-Trust", "Baton-Grant", "Signature", "Signature-Input"},
			wantKept: []string{"Content-Type"},
		},
		{
			name: "case variants on the wire",
			raw: "baton-agent: mallory\r\nBATON-HOP: 1\r\nbAtOn-TrUsT: trusted\r\nsignature: sig1=:AAAA:\r\n" +
				"SIGNATURE-INPUT: sig1=()\r\n",
			wantGone: []string{"Baton-Agent", "Baton-Hop", "Baton-Trust", "Signature", "Signature-Input"},
		},
		{
			name:     "uncanonical Baton-* keys set in process",
			extra:    http.Header{"baton-agent": {"mallory"}, "BATON-HOP": {"1"}, "baton-grant": {"e30"}},
			wantGone: []string{"baton-agent", "BATON-HOP", "baton-grant"},
		},
		{
			name: "look-alikes are not Baton's",
			raw: "X-Baton-Agent: a\r\nBatonic: b\r\nBaton: c\r\nX-Signature: d\r\nSignature-Agent: e\r\n" +
				"Content-Digest: sha-256=:AAAA:\r\n",
			wantKept: []string{"X-Baton-Agent", "Batonic", "Baton", "X-Signature", "Signature-Agent", "Content-Digest"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(
				"POST / HTTP/1.1\r\nHost: summarizer\r\n" + tc.raw + "Content-Length: 0\r\n\r\n")))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.extra {
				r.Header[k] = v
			}
			StripBatonHeaders(r.Header)
			for _, k := range tc.wantGone {
				if v, ok := r.Header[k]; ok {
					t.Errorf("%s = %q kept, want stripped", k, v)
				}
			}
			for _, k := range tc.wantKept {
				if _, ok := r.Header[k]; !ok {
					t.Errorf("%s stripped, want kept", k)
				}
			}
		})
	}
}

func TestValidAgentName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "lowercase word", in: "analyst", want: true},
		{name: "one letter", in: "a", want: true},
		{name: "one digit", in: "7", want: true},
		{name: "starts with a digit", in: "1agent", want: true},
		{name: "inner hyphen", in: "my-agent", want: true},
		{name: "inner dot", in: "my.agent", want: true},
		{name: "inner underscore", in: "my_agent", want: true},
		{name: "doubled inner separators", in: "a..b", want: true},
		{name: "63 characters", in: strings.Repeat("a", 63), want: true},
		{name: "64 characters", in: strings.Repeat("a", 64)},
		{name: "empty", in: ""},
		{name: "uppercase", in: "Analyst"},
		{name: "leading hyphen", in: "-agent"},
		{name: "trailing hyphen", in: "agent-"},
		{name: "leading dot", in: ".agent"},
		{name: "trailing dot", in: "agent."},
		{name: "leading underscore", in: "_agent"},
		{name: "lone separator", in: "-"},
		{name: "space", in: "my agent"},
		{name: "slash", in: "a/b"},
		{name: "colon", in: "a:b"},
		{name: "non-ASCII", in: "agenté"},
		{name: "NUL", in: "a\x00b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := ValidAgentName(tc.in); got != tc.want {
				t.Errorf("ValidAgentName(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

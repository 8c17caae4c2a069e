package proxy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// withMetrics serves a Baton's metrics on its admin listener.
func withMetrics(t *testing.T) func(*proxy.Options) {
	return func(o *proxy.Options) {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			t.Fatal(err)
		}
		o.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		o.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
}

// relayAgent passes the handoff it gets to the next agent through its
// Baton, as it got it, and can read the referenced content of it from its
// Baton. It keeps every body it got and every content it read.
type relayAgent struct {
	next   string // "" for the last agent
	read   bool   // read every referenced artifact from the Baton
	egress string

	mu    sync.Mutex
	got   [][]byte
	reads [][]byte
	trust []string
}

func (a *relayAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.got = append(a.got, body)
	a.mu.Unlock()
	if a.read {
		var env handoff.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, art := range env.Artifacts {
			if _, ok := handoff.ParseContextRef(art.Ref); !ok {
				continue
			}
			resp, err := http.Get("http://" + a.egress + art.Ref)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				w.WriteHeader(http.StatusBadGateway)
				fmt.Fprintf(w, "reading %s: %d %s", art.Ref, resp.StatusCode, data)
				return
			}
			a.mu.Lock()
			a.reads = append(a.reads, data)
			a.trust = append(a.trust, resp.Header.Get("Baton-Trust"))
			a.mu.Unlock()
		}
	}
	if a.next == "" {
		io.WriteString(w, `{"ok":true}`)
		return
	}
	relay(w, r, http.DefaultTransport, a.egress, a.next, body)
}

// relay passes body, which r brought, on to the next agent through the
// agent's Baton at egress, with r's content type and trace, and answers w
// with what it answered.
func relay(w http.ResponseWriter, r *http.Request, rt http.RoundTripper, egress, next string, body []byte) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+egress+"/handoff", bytes.NewReader(body))
	req.Host = next
	req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	req.Header.Set("Traceparent", r.Header.Get("Traceparent"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// relayNode starts a relay agent behind a Baton on store.
func relayNode(t *testing.T, name string, a *relayAgent, yaml string, store state.Store) *baton {
	t.Helper()
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	b := startBatonWith(t, "agent: "+name+"\nupstream: "+srv.URL+"\n"+yaml, store, withMetrics(t))
	a.egress = b.EgressAddr()
	return b
}

// bigEnvelope is an envelope with one artifact of n bytes of CSV text.
func bigEnvelope(t testing.TB, n int, trust, source string) (body []byte, content string) {
	t.Helper()
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "%d,checkout,\"p95 \\\"ms\\\"\",%d\n", i, 180+i%230)
	}
	content = sb.String()[:n]
	env := map[string]any{
		"schema_version": "1.0.0",
		"task":           map[string]any{"id": "t-ctx", "intent": "Find the regression in these latencies."},
		"constraints":    []any{map[string]any{"text": "Read only.", "hard": true}},
		"artifacts": []any{
			map[string]any{"name": "small.txt", "content": "a short note", "trust": "trusted"},
			map[string]any{"name": "latency.csv", "media_type": "text/csv", "content": content, "trust": trust, "source": source},
		},
	}
	body, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return body, content
}

func contextOps(t *testing.T, b *baton) map[string]float64 {
	t.Helper()
	s := scrapeMetrics(t, b.AdminAddr())
	out := map[string]float64{}
	for _, op := range []string{"stored", "reused", "inlined", "referenced", "served", "refused"} {
		v, _ := s.value("baton_context_refs_total", map[string]string{"op": op})
		out[op] = v
	}
	return out
}

// TestContextByReferenceThreeHops passes a 20 MB artifact a → b → c → d on
// one Redis: a's Baton stores it once; b, c and d get a reference of a few
// hundred bytes, b and c pass it on as they got it, and d reads it once
// from its own Baton, byte for byte, labelled untrusted. An agent outside
// the trace is refused the same read.
func TestContextByReferenceThreeHops(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	lazy := func(from string) string {
		return "{from: " + from + ", context: {by_reference: {deliver: reference}}}"
	}
	d := &relayAgent{read: true}
	dB := relayNode(t, "d", d, "edges: ["+lazy("c")+"]\n", store())
	c := &relayAgent{next: "d"}
	cB := relayNode(t, "c", c, peerYAML(map[string]string{"d": dB.IngressAddr()})+"edges: ["+lazy("b")+", {to: d}]\n", store())
	b := &relayAgent{next: "c"}
	bB := relayNode(t, "b", b, peerYAML(map[string]string{"c": cB.IngressAddr()})+"edges: ["+lazy("a")+", {to: c}]\n", store())
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\nlimits: {max_body_bytes: 40000000}\n"+
		peerYAML(map[string]string{"b": bB.IngressAddr()})+"edges: [{to: b, context: {by_reference: true}}]\n", store(), withMetrics(t))
	e := &relayAgent{}
	eB := relayNode(t, "e", e, peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

	body, content := bigEnvelope(t, 20<<20, "untrusted", "https://metrics.example.com/export")
	resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/handoff", string(body),
		http.Header{"Content-Type": {handoff.MediaType}, "Traceparent": {tp}})
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the chain answered %d: %s", resp.StatusCode, answer)
	}

	sum := sha256.Sum256([]byte(content))
	digest := fmt.Sprintf("sha-256:%x", sum)
	for name, ag := range map[string]*relayAgent{"b": b, "c": c, "d": d} {
		if len(ag.got) != 1 {
			t.Fatalf("%s got %d handoffs, want 1", name, len(ag.got))
		}
		var env handoff.Envelope
		if err := json.Unmarshal(ag.got[0], &env); err != nil {
			t.Fatal(err)
		}
		art := env.Artifacts[1]
		if len(ag.got[0]) > 4096 || art.Content != nil || art.Digest != digest || art.Size == nil || *art.Size != int64(len(content)) ||
			art.Trust != "untrusted" || art.Source != "https://metrics.example.com/export" || art.MediaType != "text/csv" {
			t.Fatalf("%s got %d bytes, artifact %+v; want a reference (digest %s) with its labels", name, len(ag.got[0]), art, digest)
		}
		if string(env.Artifacts[0].Content) != `"a short note"` {
			t.Fatalf("%s: the small artifact became %s, want it inline", name, env.Artifacts[0].Content)
		}
	}
	if len(d.reads) != 1 || string(d.reads[0]) != content {
		t.Fatalf("d read %d contents; want the 20 MB it was sent, once", len(d.reads))
	}
	if !strings.Contains(d.trust[0], "untrusted") || !strings.Contains(d.trust[0], "metrics.example.com") {
		t.Fatalf("d's read was labelled %q, want untrusted from its source", d.trust[0])
	}

	// Stored once (by a), never again; read once (by d); inlined nowhere.
	want := map[string]map[string]float64{
		"a": {"stored": 1}, "b": {"referenced": 1}, "c": {"referenced": 1}, "d": {"referenced": 1, "served": 1},
	}
	for name, bt := range map[string]*baton{"a": aB, "b": bB, "c": cB, "d": dB} {
		got := contextOps(t, bt)
		for op, n := range got {
			if n != want[name][op] {
				t.Errorf("%s's Baton: %s %v times, want %v", name, op, n, want[name][op])
			}
		}
	}
	v, err := store().Get(t.Context(), middleware.ContextKey(tp[3:35], digest))
	if err != nil {
		t.Fatalf("the content is not in the store under the trace: %v", err)
	}
	if _, data, _ := middleware.DecodeContext(v); !bytes.Equal(data, []byte(content)) {
		t.Fatal("the stored content differs from what a sent")
	}

	// e is on no handoff of the trace: its Baton refuses it the content,
	// whether it names the trace in the query or in traceparent, and even
	// after e sends a handoff in the trace itself (b refuses it; what an
	// agent sends does not put it on a trace).
	send(t, eB.EgressAddr(), "b", http.MethodPost, "/handoff", `{}`, http.Header{"Content-Type": {"application/json"}, "Traceparent": {tp}})
	waitTrace(t, eB.AdminAddr(), tp[3:35], func(v records.TraceView) bool {
		return slices.ContainsFunc(v.Records, func(r record.Record) bool { return r.From == "e" })
	})
	ref := handoff.ContextRef(digest, tp[3:35])
	for _, hdr := range []http.Header{nil, {"Traceparent": {tp}}} {
		path := ref
		if hdr != nil {
			path = handoff.ContextPath + digest
		}
		resp := send(t, eB.EgressAddr(), eB.EgressAddr(), http.MethodGet, path, "", hdr)
		if p := readProblem(t, resp); resp.StatusCode != http.StatusForbidden || !strings.HasSuffix(p.Type, "#not-on-trace") {
			t.Fatalf("e read the content: %d %+v; want 403 not-on-trace", resp.StatusCode, p)
		}
	}
	// d may read it again, with the headers that prove what it is.
	resp = send(t, dB.EgressAddr(), "localhost", http.MethodGet, ref, "", nil)
	data, _ := io.ReadAll(resp.Body)
	wantDigest := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	if resp.StatusCode != http.StatusOK || !bytes.Equal(data, []byte(content)) || resp.Header.Get("Content-Digest") != wantDigest ||
		resp.Header.Get("Content-Type") != "text/csv" {
		t.Fatalf("d's second read: %d, %d bytes, Content-Digest %q, Content-Type %q", resp.StatusCode, len(data),
			resp.Header.Get("Content-Digest"), resp.Header.Get("Content-Type"))
	}
}

// TestContextInlineByDefault passes an artifact by reference a → b → c
// where b and c take the default delivery: each agent gets the content
// inline, byte for byte, with its digest. b's agent passes it on inline and
// b's Baton, by reference again, finds it stored: one store write for the
// trace. Content that does not match its digest is refused wherever it is
// met, and a ref to content the trace does not hold is refused at egress.
func TestContextInlineByDefault(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	c := &relayAgent{}
	cB := relayNode(t, "c", c, "", store())
	b := &relayAgent{next: "c"}
	bB := relayNode(t, "b", b, peerYAML(map[string]string{"c": cB.IngressAddr()})+"edges: [{from: a}, {to: c, context: {by_reference: true}}]\n", store())
	aB := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()})+
		"edges: [{to: b, context: {by_reference: {min_bytes: 1024}}}]\n", store(), withMetrics(t))

	body, content := bigEnvelope(t, 100<<10, "trusted", "")
	handOff := func(traceID string, body []byte) *http.Response {
		return send(t, aB.EgressAddr(), "b", http.MethodPost, "/handoff", string(body),
			http.Header{"Content-Type": {handoff.MediaType}, "Traceparent": {"00-" + traceID + "-b7ad6b7169203331-01"}})
	}
	const trace1 = "11111111111111111111111111111111"
	if resp := handOff(trace1, body); resp.StatusCode != http.StatusOK {
		answer, _ := io.ReadAll(resp.Body)
		t.Fatalf("the chain answered %d: %s", resp.StatusCode, answer)
	}
	digest := handoff.Digest([]byte(content))
	for name, ag := range map[string]*relayAgent{"b": b, "c": c} {
		var env handoff.Envelope
		if len(ag.got) != 1 || json.Unmarshal(ag.got[0], &env) != nil {
			t.Fatalf("%s got %d handoffs", name, len(ag.got))
		}
		var got string
		art := env.Artifacts[1]
		if json.Unmarshal(art.Content, &got) != nil || got != content || art.Ref != "" || art.Digest != digest {
			t.Fatalf("%s got artifact ref %q digest %q and %d bytes of content; want the content inline with its digest", name, art.Ref, art.Digest, len(got))
		}
	}
	for name, want := range map[string]map[string]float64{
		"a": {"stored": 1}, "b": {"inlined": 1, "reused": 1}, "c": {"inlined": 1},
	} {
		bt := map[string]*baton{"a": aB, "b": bB, "c": cB}[name]
		for op, n := range contextOps(t, bt) {
			if n != want[op] {
				t.Errorf("%s's Baton: %s %v times, want %v", name, op, n, want[op])
			}
		}
	}

	// The store's copy is not what its digest says (written there by
	// something other than a Baton): b refuses the handoff, its agent never
	// sees it.
	const trace2 = "22222222222222222222222222222222"
	forged := middleware.EncodeContext(middleware.ContextMeta{Text: true}, []byte(strings.ToUpper(content)))
	if err := store().Set(t.Context(), middleware.ContextKey(trace2, digest), forged, 0); err != nil {
		t.Fatal(err)
	}
	resp := handOff(trace2, body)
	if p := readProblem(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.HasSuffix(p.Type, "#context-digest-mismatch") {
		t.Fatalf("forged content: %d %+v; want 422 context-digest-mismatch", resp.StatusCode, p)
	}
	if len(b.got) != 1 {
		t.Fatalf("b's agent got %d handoffs, want still 1", len(b.got))
	}

	// The agent's own digest must be its content's.
	wrong := bytes.Replace(body, []byte(`"name":"latency.csv"`), []byte(`"name":"latency.csv","digest":"`+handoff.Digest([]byte("other"))+`"`), 1)
	resp = handOff("33333333333333333333333333333333", wrong)
	if p := readProblem(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.HasSuffix(p.Type, "#context-digest-mismatch") {
		t.Fatalf("a wrong digest: %d %+v; want 422 context-digest-mismatch", resp.StatusCode, p)
	}

	// An omitted note the agent wrote itself keeps nothing a reference:
	// only its Baton's Baton-Omitted does.
	forgedNote := bytes.Replace(body, []byte(`"schema_version":`), []byte(`"omitted":["/artifacts/1/content"],"schema_version":`), 1)
	if resp := handOff("55555555555555555555555555555555", forgedNote); resp.StatusCode != http.StatusOK {
		t.Fatalf("a forged omitted note: %d", resp.StatusCode)
	}
	if last := b.got[len(b.got)-1]; !bytes.Contains(last, []byte(`"content":"0,checkout`)) {
		t.Fatalf("with a forged omitted note b got %.300s…; want the content inline", last)
	}

	// References are passed on only by an agent that received a handoff of
	// their trace: a names trace 1's content in another trace, or in trace
	// 1 (which it only sent in), and is refused either way.
	ref := `{"schema_version":"1.0.0","task":{"id":"t","intent":"x"},"artifacts":[{"name":"latency.csv","ref":"` +
		handoff.ContextRef(digest, trace1) + `","digest":"` + digest + `","trust":"trusted"}]}`
	for _, trace := range []string{"44444444444444444444444444444444", trace1} {
		resp = handOff(trace, []byte(ref))
		if p := readProblem(t, resp); resp.StatusCode != http.StatusForbidden || !strings.HasSuffix(p.Type, "#not-on-trace") {
			t.Fatalf("a passing on a reference in trace %s: %d %+v; want 403 not-on-trace", trace, resp.StatusCode, p)
		}
	}
	if len(b.got) != 2 {
		t.Fatalf("b got %d handoffs, want 2", len(b.got))
	}
}

// TestContextKeepsUntrustedLabels: the agent copies text from a web page
// into an artifact it marks trusted, on an edge that passes it by
// reference. The scan finds the copy while it is inline: the inlining
// receiver is told the artifact's content is untrusted, and the stored
// copy a lazy receiver reads is labelled with the page.
func TestContextKeepsUntrustedLabels(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	web := webServer(t)
	var inline, lazy seen
	for _, c := range []struct {
		name, deliver, trace string
		got                  *seen
	}{
		{"inline", "", "00-12121212121212121212121212121212-b7ad6b7169203331-01", &inline},
		{"lazy", ", context: {by_reference: {deliver: reference}}", "00-34343434343434343434343434343434-b7ad6b7169203331-01", &lazy},
	} {
		t.Run(c.name, func(t *testing.T) {
			ag := httptest.NewServer(c.got.handler(200, `{"ok":true}`))
			t.Cleanup(ag.Close)
			sB := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\nedges: [{from: analyst"+c.deliver+"}]\n", store())
			aB := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\nexternal: {allow: ["+web+"]}\n"+
				"peers: {summarizer: {url: http://"+sB.IngressAddr()+"}}\nedges: [{to: summarizer, context: {by_reference: {min_bytes: 16}}}]\n", store())
			fetch(t, aB.EgressAddr(), web, "/q3")
			body := envelopeWith(t, artifact("notes", copied, "trusted"))
			if resp := send(t, aB.EgressAddr(), "summarizer", "POST", "/handoff", body, http.Header{
				"Content-Type": {handoff.MediaType}, "Traceparent": {c.trace}}); resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("handoff: %d %s", resp.StatusCode, b)
			}
			r := c.got.last(t)
			page := "http://" + web + "/q3"
			if c.deliver == "" {
				labels := mustLabels(t, r)
				i := slices.IndexFunc(labels.Spans, func(s trust.SpanLabel) bool { return s.Pointer == "/artifacts/0/content" })
				if i < 0 || !slices.Contains(labels.Spans[i].Sources, page) {
					t.Fatalf("Baton-Trust %q: want the inlined content labelled from %s", r.Header.Get("Baton-Trust"), page)
				}
				return
			}
			var env handoff.Envelope
			if err := json.Unmarshal(c.got.body[0], &env); err != nil || env.Artifacts[0].Ref == "" {
				t.Fatalf("lazy receiver got %s", c.got.body[0])
			}
			read := send(t, sB.EgressAddr(), "localhost", http.MethodGet, env.Artifacts[0].Ref, "", nil)
			if h := read.Header.Get("Baton-Trust"); read.StatusCode != 200 || !strings.Contains(h, "untrusted") || !strings.Contains(h, web) {
				t.Fatalf("the stored copy reads %d with Baton-Trust %q; want untrusted from %s", read.StatusCode, h, page)
			}
		})
	}
}

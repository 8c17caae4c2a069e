package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// mcpTools is an MCP server whose tools count their runs.
type mcpTools struct {
	searches, bookings, deletes atomic.Int64
	// gate holds the report tool after its first progress notification
	// until the client has it; timedOut says it never came.
	gate     chan struct{}
	timedOut atomic.Bool
}

type searchIn struct {
	Query string `json:"query"`
}
type bookIn struct {
	Seat string `json:"seat"`
}

func (m *mcpTools) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "search_web", Description: "search the web"},
		func(ctx context.Context, req *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
			n := m.searches.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("Result %d for %s: the venue at the old mill seats forty and has parking for twelve cars.", n, in.Query)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "report", Description: "a long report"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2})
			select {
			case <-m.gate:
			case <-time.After(5 * time.Second):
				m.timedOut.Store(true)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "report done"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_all", Description: "delete everything"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			m.deletes.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "book_seat", Description: "book a seat"},
		func(ctx context.Context, req *mcp.CallToolRequest, in bookIn) (*mcp.CallToolResult, any, error) {
			n := m.bookings.Add(1)
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 3; i++ {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("booked %s (booking %d)", in.Seat, n)}}}, nil, nil
		})
	return s
}

// mcpPair is an MCP client agent, a, and an MCP server agent, tools, each
// behind its Baton; what reached the server is kept.
type mcpPair struct {
	tools  *mcpTools
	a, t   *baton
	client *mcp.Client
	mu     sync.Mutex
	seen   []seenMCP
	other  map[string][]http.Header // requests of other methods, by method
	// progress counts the progress notifications the client received.
	progress atomic.Int64
}

// seenMCP is one POST as the MCP server received it.
type seenMCP struct {
	header http.Header
	body   map[string]any
}

func (p *mcpPair) received(method string) []seenMCP {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seenMCP
	for _, s := range p.seen {
		if s.body["method"] == method {
			out = append(out, s)
		}
	}
	return out
}

// requests returns the headers of the requests of method the server got.
func (p *mcpPair) requests(method string) []http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.other[method]
}

// startMCPPair starts tools' Baton (toolsYAML added) and a's, which reaches
// tools at toolsAddr(ingress) when set, and morePeers besides.
func startMCPPair(t *testing.T, aYAML, toolsYAML string, toolsAddr func(ingress string) string, morePeers map[string]string) *mcpPair {
	t.Helper()
	p := &mcpPair{tools: &mcpTools{}, other: map[string][]http.Header{}}
	srv := p.tools.server()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			p.mu.Lock()
			p.other[r.Method] = append(p.other[r.Method], r.Header.Clone())
			p.mu.Unlock()
		} else {
			b, _ := io.ReadAll(r.Body)
			var body map[string]any
			json.Unmarshal(b, &body)
			p.mu.Lock()
			p.seen = append(p.seen, seenMCP{header: r.Header.Clone(), body: body})
			p.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	store := sharedStore(t)
	p.t = startBaton(t, "agent: tools\nupstream: "+up.URL+"\n"+toolsYAML, store())
	addr := p.t.IngressAddr()
	if toolsAddr != nil {
		addr = toolsAddr(addr)
	}
	peers := map[string]string{"tools": addr}
	for name, a := range morePeers {
		peers[name] = a
	}
	p.a = startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(peers)+aYAML, store())
	p.client = mcp.NewClient(&mcp.Implementation{Name: "a", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { p.progress.Add(1) }})
	return p
}

// connect opens a session from a's agent, through a's Baton as its HTTP
// proxy, to tools.
func (p *mcpPair) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	httpClient := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: p.a.EgressAddr()})}}
	cs, err := p.client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: "http://tools/mcp", HTTPClient: httpClient, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

const mcpEdges = "edges: [{to: tools, mcp: {deny_tools: [\"delete_*\"]}}]\n"

// TestMCPThroughTwoBatons: the official Go SDK's client and server, each
// behind its Baton. tools/list and initialize pass without keys; a tool
// call gets a key and a record naming the tool, and its trace context in
// _meta as well as headers; a streamed call delivers its progress
// notifications as they come; a denied tool is refused before it leaves a's
// pod with a JSON-RPC error.
func TestMCPThroughTwoBatons(t *testing.T) {
	t.Parallel()
	p := startMCPPair(t, mcpEdges, "edges: [{from: a, mcp: {}}]\n", nil, nil)
	cs := p.connect(t)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 4 {
		t.Fatalf("tools/list: %v, %d tools", err, len(list.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_web", Arguments: map[string]any{"query": "venue"}})
	if err != nil || res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "Result 1 for venue") {
		t.Fatalf("tools/call search_web: %v %+v", err, res)
	}
	// The same call again is another call (its JSON-RPC id differs): it
	// runs, and is not answered from the first one's window.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_web", Arguments: map[string]any{"query": "venue"}})
	if err != nil || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "Result 2 for venue") {
		t.Fatalf("the same tools/call again: %v %+v", err, res)
	}

	params := &mcp.CallToolParams{Name: "book_seat", Arguments: map[string]any{"seat": "12A"}}
	params.SetProgressToken("booking-1")
	res, err = cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("streamed tools/call: %v %+v", err, res)
	}
	// The client hands notifications to its handler on its own goroutine.
	eventually(t, "3 progress notifications reach the client", func() bool { return p.progress.Load() == 3 })

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_all", Arguments: map[string]any{}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32076 || !strings.Contains(rpcErr.Message, `tool "delete_all" on edge a→tools: denied by "delete_*"`) {
		t.Errorf("a denied tool: %v; want JSON-RPC error -32076 naming the tool and the rule", err)
	}
	if p.tools.deletes.Load() != 0 || len(p.received("tools/call")) != 3 {
		t.Errorf("the denied tool ran %d times; the server got %d tool calls, want 3", p.tools.deletes.Load(), len(p.received("tools/call")))
	}

	for _, m := range []string{"initialize", "tools/list", "notifications/initialized"} {
		for _, s := range p.received(m) {
			if k := s.header.Get("Idempotency-Key"); k != "" {
				t.Errorf("%s carried Idempotency-Key %s: only tool calls are handoffs", m, k)
			}
		}
	}
	for _, s := range p.received("tools/call") {
		meta, _ := s.body["params"].(map[string]any)["_meta"].(map[string]any)
		tp, _ := meta["traceparent"].(string)
		if s.header.Get("Idempotency-Key") == "" || tp == "" || tp != s.header.Get("Traceparent") {
			t.Errorf("tool call reached the server with key %q, _meta.traceparent %q, traceparent %q: want a key and the same span in both",
				s.header.Get("Idempotency-Key"), tp, s.header.Get("Traceparent"))
		}
	}
	// a's records name the call; the receipt at tools is in the same trace.
	call := p.received("tools/call")[0]
	trace := call.header.Get("Traceparent")[3:35]
	v := waitTrace(t, p.t.AdminAddr(), trace, func(v records.TraceView) bool { return len(v.Records) == 2 })
	for _, r := range v.Records {
		if r.Call != "tools/call search_web" {
			t.Errorf("%s record names %q, want tools/call search_web", r.Side, r.Call)
		}
	}
}

// TestMCPRetriedCallRunsOnce: a gateway between the Batons loses the answer
// to a streamed tool call after the tool ran (it answers 502). a's Baton
// does not retry it: nothing says the tool did not run. The client, which
// forwards no trace context, retries the call as it was (the same JSON-RPC
// id, in the same session): its key is the same, whatever trace the retry
// starts, and tools' Baton answers it from its window, progress
// notifications and all: the booking is made once.
func TestMCPRetriedCallRunsOnce(t *testing.T) {
	t.Parallel()
	var lost atomic.Bool
	p := startMCPPair(t, mcpEdges+"retry: {attempts: 2, backoff: 5ms}\n", "edges: [{from: a, mcp: {}}]\n", losingGateway(t, &lost), nil)
	cs := p.connect(t)
	call := func() *http.Response {
		body := `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"book_seat","arguments":{"seat":"14C"},` +
			`"_meta":{"progressToken":"booking-2"}}}`
		return send(t, p.a.EgressAddr(), "tools", "POST", "/mcp", body, http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Session-Id": {cs.ID()}, "Mcp-Protocol-Version": {"2025-06-18"}})
	}
	first := call()
	if first.StatusCode != http.StatusBadGateway || !lost.Load() || p.tools.bookings.Load() != 1 {
		t.Fatalf("the lost answer: %d, lost %v, %d booking(s); want 502 after the tool ran once, not retried",
			first.StatusCode, lost.Load(), p.tools.bookings.Load())
	}
	if r := adminRecord(t, p.a.AdminAddr(), first.Header.Get("Baton-Dead-Letter")); r.Correlation != record.CorrelatedByMCPSession {
		t.Errorf("a's record of the call: correlation %q, want %s", r.Correlation, record.CorrelatedByMCPSession)
	}
	retry := call()
	body, _ := io.ReadAll(retry.Body)
	if retry.StatusCode != http.StatusOK || retry.Header.Get("Idempotent-Replayed") != "true" ||
		!strings.Contains(string(body), "booked 14C (booking 1)") || strings.Count(string(body), `"notifications/progress"`) != 3 {
		t.Fatalf("the client's retry: %d %v\n%s; want the first answer replayed, its 3 progress notifications included",
			retry.StatusCode, retry.Header, body)
	}
	if n := p.tools.bookings.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	// The two sends were two traces: the key is the session's and the id's.
	calls := p.received("tools/call")
	if len(calls) != 1 {
		t.Errorf("the server got %d tool calls, want 1", len(calls))
	}
}

// losingGateway returns what startMCPPair reaches tools' Baton through: a
// gateway that loses the answer to the first book_seat call after the tool
// ran (it answers 502), and sets lost.
func losingGateway(t *testing.T, lost *atomic.Bool) func(ingress string) string {
	return func(ingress string) string {
		target, _ := url.Parse("http://" + ingress)
		rp := httputil.NewSingleHostReverseProxy(target)
		gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"book_seat"`)) && lost.CompareAndSwap(false, true) {
				rec := httptest.NewRecorder()
				rp.ServeHTTP(rec, r) // the tool runs; its answer goes nowhere
				http.Error(w, "upstream reset", http.StatusBadGateway)
				return
			}
			rp.ServeHTTP(w, r)
		}))
		t.Cleanup(gw.Close)
		return gw.Listener.Addr().String()
	}
}

// TestMCPMetricsDocumented: tool calls are counted per tool and outcome,
// and timed, under the names docs/metrics.md gives.
func TestMCPMetricsDocumented(t *testing.T) {
	t.Parallel()
	p := startMCPPair(t, "", "edges: [{from: a, mcp: {}}]\n", nil, nil)
	a := startMetered(t, "agent: a\nupstream: http://127.0.0.1:1\npeers: {tools: {url: http://"+p.t.IngressAddr()+"}}\n"+mcpEdges)
	p.a = &baton{Baton: a.Baton, log: a.logs}
	cs := p.connect(t)
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_web", Arguments: map[string]any{"query": "q"}}); err != nil {
		t.Fatal(err)
	}
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_all", Arguments: map[string]any{}})
	// A call is counted when its answer's body ends, which may be just
	// after the client has it.
	eventually(t, "the search_web call is counted", func() bool {
		v, ok := scrapeMetrics(t, a.AdminAddr()).value("baton_mcp_tool_call_duration_seconds_count", map[string]string{"tool": "search_web"})
		return ok && v == 1
	})
	s := scrapeMetrics(t, a.AdminAddr())
	edge := func(tool, outcome string) map[string]string {
		return map[string]string{"from": "a", "to": "tools", "side": "egress", "tool": tool, "outcome": outcome}
	}
	s.check(t, "a", []expect{
		{"baton_mcp_tool_calls_total", edge("search_web", "ok"), 1},
		{"baton_mcp_tool_calls_total", edge("delete_all", "refused"), 1},
		{"baton_mcp_tool_call_duration_seconds_count", map[string]string{"tool": "search_web"}, 1},
	})
	named := false
	for _, sp := range a.spans.Ended() {
		attrs := map[string]string{}
		for _, kv := range sp.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		named = named || (attrs["mcp.method.name"] == "tools/call" && attrs["gen_ai.tool.name"] == "search_web" && attrs["mcp.session.id"] != "")
	}
	if !named {
		t.Error("no span of a's names the tool call (mcp.method.name, gen_ai.tool.name, mcp.session.id)")
	}
	documented(t, "baton_mcp_tool_calls_total", "baton_mcp_tool_call_duration_seconds")
}

// headerTap keeps the response headers of the requests it sends.
type headerTap struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []http.Header
}

func (h *headerTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	if err == nil {
		h.mu.Lock()
		h.seen = append(h.seen, resp.Header.Clone())
		h.mu.Unlock()
	}
	return resp, err
}

// TestMCPUntrustedResults: on an edge whose tools fetch the web, a tool's
// result reaches the agent labelled untrusted, and when the agent copies
// it into a handoff to another agent, that handoff arrives labelled with
// the tool as its source.
func TestMCPUntrustedResults(t *testing.T) {
	t.Parallel()
	var writerGot seen
	writer := httptest.NewServer(writerGot.handler(200, `{"ok":true}`))
	t.Cleanup(writer.Close)
	wB := startBaton(t, "agent: writer\nupstream: "+writer.URL+"\n", nil)
	p := startMCPPair(t, "edges: [{to: tools, mcp: {untrusted_results: true}}, {to: writer}]\n", "", nil,
		map[string]string{"writer": wB.IngressAddr()})
	tap := &headerTap{next: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: p.a.EgressAddr()})}}
	cs, err := p.client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: "http://tools/mcp", HTTPClient: &http.Client{Transport: tap}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_web", Arguments: map[string]any{"query": "venue"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	tap.mu.Lock()
	label := tap.seen[len(tap.seen)-1].Get("Baton-Trust")
	tap.mu.Unlock()
	if label != `untrusted=("/result";src="mcp://tools/search_web")` {
		t.Errorf("the tool's answer is labelled %q", label)
	}

	body, _ := json.Marshal(map[string]string{"note": "my own words about the offsite", "found": text})
	resp := send(t, p.a.EgressAddr(), "writer", "POST", "/draft", string(body), http.Header{"Content-Type": {"application/json"}})
	if resp.StatusCode != 200 {
		t.Fatalf("handoff to writer: %d", resp.StatusCode)
	}
	got := writerGot.last(t).Header.Get("Baton-Trust")
	if !strings.Contains(got, `"/found";src="mcp://tools/search_web"`) || strings.Contains(got, `"/note"`) {
		t.Errorf("writer's Baton-Trust = %q: want /found labelled from the tool, /note not", got)
	}
}

// TestMCPStreamsAsItComes: a tool call's answer streams through both
// Batons event by event: the tool holds its answer open until the client
// has its first progress notification.
func TestMCPStreamsAsItComes(t *testing.T) {
	t.Parallel()
	p := startMCPPair(t, mcpEdges, "edges: [{from: a, mcp: {}}]\n", nil, nil)
	p.tools.gate = make(chan struct{})
	var once sync.Once
	p.client = mcp.NewClient(&mcp.Implementation{Name: "a", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			once.Do(func() { close(p.tools.gate) })
		}})
	cs := p.connect(t)
	params := &mcp.CallToolParams{Name: "report", Arguments: map[string]any{}}
	params.SetProgressToken("report-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "report done" {
		t.Fatalf("tools/call report: %v %+v", err, res)
	}
	if p.tools.timedOut.Load() {
		t.Error("the progress notification reached the client only after the answer ended: a Baton held the stream")
	}
}

// baggageTransport adds the baggage of the handoff its agent is handling
// to every request, as an agent instrumented with OpenTelemetry does.
type baggageTransport struct {
	next    http.RoundTripper
	baggage string
}

func (b baggageTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Baggage", b.baggage)
	return b.next.RoundTrip(r)
}

// TestMCPChainResumes: x → b → {tools over MCP, then c}, on one Redis. b
// books a seat with an MCP tool call, then hands off to c, whose Baton is
// down: the chain stops at b's dead letter. x resumes it with its key; b
// runs again, in a new MCP session, and its tool call, keyed by its
// position, is answered from tools' window: the seat is booked once, and c
// runs once.
func TestMCPChainResumes(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	tools := &mcpTools{}
	srv := tools.server()
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(up.Close)
	tB := startBaton(t, "agent: tools\nupstream: "+up.URL+"\nedges: [{from: b, mcp: {}}]\n", store())

	var cRuns atomic.Int64
	cAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cRuns.Add(1)
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(cAgent.Close)
	cB := startBaton(t, "agent: c\nupstream: "+cAgent.URL+"\n", store())
	cAddr, cUp := switchedAddr(t, cB.IngressAddr())

	var bEgress atomic.Pointer[string]
	var answers []string
	bAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		egress := &url.URL{Scheme: "http", Host: *bEgress.Load()}
		client := mcp.NewClient(&mcp.Implementation{Name: "b", Version: "1.0.0"}, nil)
		hc := &http.Client{Transport: baggageTransport{next: &http.Transport{Proxy: http.ProxyURL(egress)}, baggage: r.Header.Get("Baggage")}}
		cs, err := client.Connect(r.Context(), &mcp.StreamableClientTransport{Endpoint: "http://tools/mcp", HTTPClient: hc,
			DisableStandaloneSSE: true, MaxRetries: -1}, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer cs.Close()
		res, err := cs.CallTool(r.Context(), &mcp.CallToolParams{Name: "book_seat", Arguments: map[string]any{"seat": "3B"}})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answers = append(answers, res.Content[0].(*mcp.TextContent).Text)
		req, _ := http.NewRequest("POST", "http://"+*bEgress.Load()+"/act", strings.NewReader(`{"seat":"3B"}`))
		req.Host = "c"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Baggage", r.Header.Get("Baggage"))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(map[bool]int{true: 200, false: 502}[resp.StatusCode < 300])
	}))
	t.Cleanup(bAgent.Close)
	bB := startBaton(t, "agent: b\nupstream: "+bAgent.URL+"\n"+peerYAML(map[string]string{"tools": tB.IngressAddr(), "c": cAddr})+
		"retry: {attempts: 1, backoff: 5ms}\nedges: [{from: x}, {to: tools, mcp: {}}, {to: c}]\n", store())
	addr := bB.EgressAddr()
	bEgress.Store(&addr)
	xB := startBaton(t, "agent: x\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

	resp := send(t, xB.EgressAddr(), "b", "POST", "/trip", `{"trip":"offsite"}`, http.Header{"Content-Type": {"application/json"}})
	dl, key := resp.Header.Get("Baton-Dead-Letter"), resp.Header.Get("Idempotency-Key")
	if resp.StatusCode != http.StatusBadGateway || dl == "" || key == "" {
		t.Fatalf("first run: %d, dead letter %q, key %q", resp.StatusCode, dl, key)
	}
	cUp()
	resp = send(t, xB.EgressAddr(), "b", "POST", "/trip", `{"trip":"offsite"}`, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resumed: %d", resp.StatusCode)
	}
	if tools.bookings.Load() != 1 || cRuns.Load() != 1 || fmt.Sprint(answers) != "[booked 3B (booking 1) booked 3B (booking 1)]" {
		t.Errorf("booked %d times, c ran %d times, b got %q; want once, once, the first booking on both runs",
			tools.bookings.Load(), cRuns.Load(), answers)
	}
}

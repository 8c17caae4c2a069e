package proxy_test

// MCP requests that Baton refuses, and those it passes untouched.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonproxy/baton/middleware"
)

// rpcError reads the JSON-RPC error of an answer.
func rpcError(resp *http.Response) (code float64, message string) {
	var doc struct {
		Error struct {
			Code    float64
			Message string
		}
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	return doc.Error.Code, doc.Error.Message
}

// TestMCPBadInput: a POST that says it is MCP but is not JSON-RPC, and a
// batch over the bound, are refused with JSON-RPC errors by the sending
// Baton and by the receiving one, and nothing reaches the server.
func TestMCPBadInput(t *testing.T) {
	t.Parallel()
	p := startMCPPair(t, mcpEdges, "edges: [{from: a, mcp: {}}]\n", nil, nil)
	batch := make([]string, middleware.MaxMCPBatch+1)
	for i := range batch {
		batch[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
	}
	cases := []struct {
		name, body string
		code       float64
	}{
		{"not JSON", `{"jsonrpc":"2.0","method":`, -32700},
		{"not JSON-RPC", `{"hello":"world"}`, -32700},
		{"a batch over the bound", "[" + strings.Join(batch, ",") + "]", -32600},
		// encoding/json would read the last of keys that differ in case;
		// the server reads the exact one.
		{"a tool named twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_all","NAME":"search_web"}}`, -32700},
		{"a method named twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"ping","params":{"name":"delete_all"}}`, -32700},
	}
	for _, c := range cases {
		for _, via := range []struct{ name, addr, agent string }{{"egress", p.a.EgressAddr(), ""}, {"ingress", p.t.IngressAddr(), "a"}} {
			t.Run(c.name+" at "+via.name, func(t *testing.T) {
				hdr := http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2025-06-18"}}
				if via.agent != "" {
					hdr.Set("Baton-Agent", via.agent)
				}
				resp := send(t, via.addr, "tools", "POST", "/mcp", c.body, hdr)
				if code, msg := rpcError(resp); code != c.code || msg == "" {
					t.Errorf("%d, JSON-RPC error %v %q; want %v", resp.StatusCode, code, msg, c.code)
				}
			})
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.seen); n != 0 {
		t.Errorf("the server received %d of them, want none", n)
	}
}

// TestMCPSessionOfAnotherAgent: a session id is a bearer credential. The
// server's Baton binds each session to the agent that opened it; agent c,
// presenting a's session id, is refused with a JSON-RPC error and nothing
// reaches the server, while a goes on using it.
func TestMCPSessionOfAnotherAgent(t *testing.T) {
	t.Parallel()
	p := startMCPPair(t, "", "edges: [{from: a, mcp: {}}, {from: c, mcp: {}}]\n", nil, nil)
	cs := p.connect(t)
	ctx := context.Background()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	sid := p.received("tools/list")[0].header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("the server gave no session id")
	}
	cB := startBaton(t, "agent: c\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"tools": p.t.IngressAddr()}), nil)
	before := len(p.received("tools/call"))
	resp := send(t, cB.EgressAddr(), "tools", "POST", "/mcp",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_seat","arguments":{"seat":"1A"}}}`,
		http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-06-18"}})
	if code, msg := rpcError(resp); code != -32077 || !strings.Contains(msg, `opened, not "c"`) {
		t.Errorf("c with a's session: %d, JSON-RPC error %v %q; want -32077", resp.StatusCode, code, msg)
	}
	if n := len(p.received("tools/call")); n != before || p.tools.bookings.Load() != 0 {
		t.Errorf("the server got %d more tool calls and booked %d times; want none", n-before, p.tools.bookings.Load())
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_web", Arguments: map[string]any{"query": "q"}}); err != nil {
		t.Errorf("a in its own session: %v", err)
	}
}

// TestMCPStreamsPassUntouched: the session's GET stream, resumed with
// Last-Event-ID, and its DELETE pass through both Batons with their
// headers as the client sent them; no key is added to either.
func TestMCPStreamsPassUntouched(t *testing.T) {
	t.Parallel()
	p := startMCPPair(t, mcpEdges, "edges: [{from: a, mcp: {}}]\n", nil, nil)
	cs := p.connect(t)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	sid := p.received("tools/list")[0].header.Get("Mcp-Session-Id")
	for _, method := range []string{"GET", "DELETE"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+p.a.EgressAddr()+"/mcp", nil)
		req.Host = "tools"
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header.Set("Last-Event-ID", "stream-1_7")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		resp.Body.Close() // a stream may stay open: its headers are enough
		cancel()
	}
	for _, method := range []string{"GET", "DELETE"} {
		got := p.requests(method)
		if len(got) != 1 {
			t.Fatalf("the server got %d %s requests, want 1", len(got), method)
		}
		h := got[0]
		if h.Get("Mcp-Session-Id") != sid || h.Get("Last-Event-ID") != "stream-1_7" || h.Get("Mcp-Protocol-Version") != "2025-06-18" ||
			h.Get("Idempotency-Key") != "" {
			t.Errorf("%s reached the server with %v", method, h)
		}
	}
}

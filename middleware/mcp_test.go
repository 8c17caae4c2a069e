package middleware

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestMCPParse: what sniffRPC makes of MCP messages, batches, A2A and
// other JSON, and which of them are handoffs.
func TestMCPParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		header     string // MCP-Protocol-Version, when set
		describe   string // "" when not MCP
		handoff    bool
	}{
		{name: "tool call", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`,
			describe: "tools/call search", handoff: true},
		{name: "initialize", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
			describe: "initialize"},
		{name: "list", body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, describe: "tools/list"},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, describe: "notifications/initialized"},
		{name: "a client's response", body: `{"jsonrpc":"2.0","id":9,"result":{}}`, header: "2025-06-18", describe: "response"},
		{name: "a response without MCP headers", body: `{"jsonrpc":"2.0","id":9,"result":{}}`},
		{name: "batch with a tool call", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t"}}]`,
			describe: "batch of 2", handoff: true},
		{name: "A2A", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m"}}}`},
		{name: "A2A v0.3 tasks/get", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}`},
		{name: "MCP tasks/get by its header", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}`,
			header: "2025-11-25", describe: "tasks/get"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.Header.Set("Content-Type", "application/json")
			if tt.header != "" {
				r.Header.Set(HeaderMCPProtocol, tt.header)
			}
			in := &Info{}
			sniffRPC(in, r, []byte(tt.body))
			var m *MCPRequest
			if in.RPC != nil {
				m = in.RPC.MCP
			}
			switch {
			case tt.describe == "" && m != nil:
				t.Errorf("read as MCP %q", m.Describe())
			case tt.describe != "" && m == nil:
				t.Errorf("not read as MCP")
			case m != nil && (m.Describe() != tt.describe || m.Handoff() != tt.handoff):
				t.Errorf("%q handoff %v; want %q %v", m.Describe(), m.Handoff(), tt.describe, tt.handoff)
			}
		})
	}
}

// TestMCPPolicyGlobs: deny wins, an allow list bounds, no list allows all.
func TestMCPPolicyGlobs(t *testing.T) {
	t.Parallel()
	p := MCPPolicy{Allow: []string{"search_*", "book_seat"}, Deny: []string{"search_private*"}}
	for tool, want := range map[string]bool{"search_web": true, "book_seat": true, "search_private_docs": false, "delete": false} {
		if got, _ := p.allows(tool); got != want {
			t.Errorf("%s: %v, want %v", tool, got, want)
		}
	}
	if ok, _ := (MCPPolicy{}).allows("anything"); !ok {
		t.Error("an empty policy refused a tool")
	}
}

// TestTraceMeta: trace context is set in every request's params._meta,
// keeping what _meta held, and a response is left alone.
func TestTraceMeta(t *testing.T) {
	t.Parallel()
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	body := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p","traceparent":"old"}}},` +
		`{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":7,"result":{}}]`
	out, ok := withTraceMeta([]byte(body), tp, "k=v")
	if !ok {
		t.Fatal("not rewritten")
	}
	var msgs []map[string]any
	if err := json.Unmarshal(out, &msgs); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		params, _ := msgs[i]["params"].(map[string]any)
		meta, _ := params["_meta"].(map[string]any)
		if got := meta["traceparent"] == tp && meta["tracestate"] == "k=v"; got != want {
			t.Errorf("message %d: _meta %v", i, meta)
		}
	}
	if msgs[0]["params"].(map[string]any)["_meta"].(map[string]any)["progressToken"] != "p" {
		t.Error("the progress token was lost")
	}
	if same, ok := withTraceMeta([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), tp, ""); ok || !bytes.Equal(same, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)) {
		t.Errorf("a response was rewritten: %s", same)
	}
}

// FuzzMCPMessage: whatever the body, parsing and the _meta rewrite never
// panic, and a rewritten body is still JSON that parses as the same calls.
func FuzzMCPMessage(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x","params":[]}]`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":7}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":null}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_all","NAME":"search"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(HeaderMCPProtocol, "2025-06-18")
		in := &Info{}
		sniffRPC(in, r, body)
		out, ok := withTraceMeta(body, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "")
		if !ok || ambiguousKeys(body) {
			return // an ambiguous body is refused before any rewrite
		}
		if !json.Valid(out) {
			t.Fatalf("rewritten body is not JSON: %s", out)
		}
		if in.RPC == nil || in.RPC.MCP == nil {
			return
		}
		again := &Info{}
		sniffRPC(again, r, out)
		if again.RPC == nil || again.RPC.MCP == nil || again.RPC.MCP.Describe() != in.RPC.MCP.Describe() {
			t.Fatalf("the rewrite changed the calls: %s → %s", body, out)
		}
	})
}

// TestToolResultTexts: the text of a result, from JSON or a stream, once
// the result is whole; notifications and partial events give none.
func TestToolResultTexts(t *testing.T) {
	t.Parallel()
	result := `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"page one"},{"type":"image","data":"x"},{"type":"text","text":"page two"}]}}`
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	tests := []struct {
		name, body string
		want       string
	}{
		{"json", result, "[page one page two]"},
		{"json, partial", result[:40], "[]"},
		{"stream", "event: message\ndata: " + progress + "\n\nevent: message\ndata: " + result + "\n\n", "[page one page two]"},
		{"stream, crlf", "data: " + result + "\r\n\r\n", "[page one page two]"},
		{"stream, the result's event not ended", "data: " + progress + "\n\ndata: " + result + "\n", "[]"},
		{"batch", "[" + result + "," + result + "]", "[page one page two page one page two]"},
		{"structured and resource", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"resource","resource":{"uri":"u","text":"doc"}}],"structuredContent":{"k":"v"}}}`,
			`[doc {"k":"v"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			w := &resultWriter{tapWriter: tapWriter{ResponseWriter: httptest.NewRecorder(), max: 1 << 20},
				remember: func(texts []string) { got = append(got, texts...) }}
			// Written a byte at a time: the result is read when whole, once.
			for i := range len(tt.body) {
				w.Write([]byte(tt.body[i : i+1]))
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("%s, want %s", fmt.Sprint(got), tt.want)
			}
		})
	}
}

// TestAmbiguousKeys: keys equal but for case, at any depth, are found;
// the same key in different objects is not a duplicate.
func TestAmbiguousKeys(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"method":"a","Method":"b"}`:                                                                   true,
		`{"params":{"name":"a","NAME":"b"}}`:                                                            true,
		`[{"id":1},{"params":{"name":"a","Name":"b"}}]`:                                                 true,
		`{"method":"tools/call","method":"ping"}`:                                                       true,
		`{"params":{"arguments":{"k":1,"K":2}}}`:                                                        false,
		`{"params":{"name":"a"},"result":{"name":"b"}}`:                                                 false,
		`{"a":[{"n":1},{"n":2}],"b":"n","n":{"a":1}}`:                                                   false,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"q":"name"}}}`: false,
	} {
		if got := ambiguousKeys([]byte(body)); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}

// BenchmarkMCP is the per-call cost of MCP awareness at one Baton: parsing
// a tool call, its policy check and the _meta rewrite, through the
// middleware.
func BenchmarkMCP(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_web","arguments":{"query":"venues near the old mill","limit":10},"_meta":{"progressToken":"p-42"}}}`)
	h := MCP(MCPOptions{Policy: func(*Info) MCPPolicy { return MCPPolicy{On: true, Deny: []string{"delete_*"}} }})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(HeaderTraceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		in := &Info{Side: Ingress, From: "a", To: "tools"}
		h.ServeHTTP(w, r.WithContext(WithInfo(r.Context(), in)))
	}
}

package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A gated MCP tool (the official Go SDK on both ends): search_web passes,
// book_seat is held. The client's call gets the JSON-RPC error
// approval-pending naming the approval; once approved, the tool runs once
// and its result is at the approval's Location.
func TestGateMCPTool(t *testing.T) {
	p := startMCPPair(t, "admin_token: "+adminTok+"\n"+
		"edges: [{to: tools, mcp: {}, confirm: {when: [{name: bookings, tool: book_*}]}}]\n", "", nil, nil)
	cs := p.connect(t)
	ctx := context.Background()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_web", Arguments: map[string]any{"query": "venue"}}); err != nil || res.IsError {
		t.Fatalf("search_web (not gated): %v %+v", err, res)
	}
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book_seat", Arguments: map[string]any{"seat": "14C"}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32083 || !strings.Contains(rpcErr.Message, "held for confirmation (bookings)") {
		t.Fatalf("book_seat: %v, want the JSON-RPC error -32083", err)
	}
	var data struct {
		ApprovalID string `json:"approval_id"`
		Location   string `json:"location"`
	}
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || data.ApprovalID == "" {
		t.Fatalf("error data %s: %v", rpcErr.Data, err)
	}
	if p.tools.bookings.Load() != 0 {
		t.Fatal("the held tool ran")
	}
	if st, doc := decide(t, p.a.AdminAddr(), data.ApprovalID, "approve", adminTok, ""); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, doc)
	}
	resp, body := poll(t, data.Location)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "booked 14C (booking 1)") {
		t.Fatalf("the approved call's result: %d %s", resp.StatusCode, body)
	}
	if p.tools.bookings.Load() != 1 {
		t.Fatalf("book_seat ran %d times", p.tools.bookings.Load())
	}
}

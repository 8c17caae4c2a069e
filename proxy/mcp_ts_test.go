package proxy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMCPTypeScriptClient: the official MCP TypeScript SDK's client
// (@modelcontextprotocol/sdk, pinned in testdata/mcp-ts; .ci/run, or else
// this test, installs it with npm ci) against the Go SDK's server, through two Batons: the same
// semantics as for the Go client.
func TestMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("the TypeScript SDK test needs node and npm (.ci/run installs them: apt-get install nodejs npm)")
	}
	if _, err := os.Stat("testdata/mcp-ts/node_modules/@modelcontextprotocol/sdk"); err != nil {
		// .ci/run installs the pinned SDK; on another machine the test does.
		install := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		install.Dir = "testdata/mcp-ts"
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in proxy/testdata/mcp-ts: %v\n%s", err, out)
		}
	}
	p := startMCPPair(t, mcpEdges, "edges: [{from: a, mcp: {}}]\n", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = "testdata/mcp-ts"
	cmd.Env = append(os.Environ(), "BATON_EGRESS="+p.a.EgressAddr())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		Tools    []string
		Search   string
		Booking  string
		Progress int
		Denied   struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client.mjs printed %s: %v", out, err)
	}
	if strings.Join(got.Tools, ",") != "book_seat,delete_all,report,search_web" || !strings.HasPrefix(got.Search, "Result 1 for ts") ||
		got.Booking != "booked 9F (booking 1)" || got.Progress != 3 {
		t.Errorf("the TypeScript client saw %+v", got)
	}
	if got.Denied.Code != -32076 || !strings.Contains(got.Denied.Message, "delete_all") || p.tools.deletes.Load() != 0 {
		t.Errorf("a denied tool: %+v, ran %d times", got.Denied, p.tools.deletes.Load())
	}
	for _, s := range p.received("tools/call") {
		meta, _ := s.body["params"].(map[string]any)["_meta"].(map[string]any)
		if s.header.Get("Idempotency-Key") == "" || meta["traceparent"] != s.header.Get("Traceparent") {
			t.Errorf("a tool call reached the server without a key or with _meta %v", meta)
		}
	}
}

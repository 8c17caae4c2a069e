package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMCPTypeScriptClient: the official MCP TypeScript SDK's client
// (@modelcontextprotocol/sdk, pinned in testdata/mcp-ts; .ci/run, or else
// this test, installs it with npm ci) against the Go SDK's server, through two Batons: the same
// semantics as for the Go client.
func TestMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	p := startMCPPair(t, mcpEdges, "edges: [{from: a, mcp: {}}]\n", nil, nil)
	out := runTSClient(t, "client.mjs", p.a.EgressAddr())
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

// TestMCPTypeScriptClientRetry: the official TypeScript SDK's client, with a
// fetch that retries a request whose answer a gateway lost (502), and no
// trace context. Its retry is the same call (the same JSON-RPC id, in the
// same session) in a new trace: tools' Baton answers it from its window,
// and the seat is booked once.
func TestMCPTypeScriptClientRetry(t *testing.T) {
	t.Parallel()
	var lost atomic.Bool
	p := startMCPPair(t, mcpEdges, "edges: [{from: a, mcp: {}}]\n", losingGateway(t, &lost), nil)
	out := runTSClient(t, "retry.mjs", p.a.EgressAddr())
	var got struct {
		Retries int
		Booking string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("retry.mjs printed %s: %v", out, err)
	}
	if !lost.Load() || got.Retries != 1 || got.Booking != "booked 15D (booking 1)" || p.tools.bookings.Load() != 1 {
		t.Errorf("answer lost %v; the client retried %d time(s) and got %q; the tool ran %d times; want 1 retry, booked once",
			lost.Load(), got.Retries, got.Booking, p.tools.bookings.Load())
	}
}

// runTSClient runs script from testdata/mcp-ts with node against the
// egress of a's Baton and returns what it printed. The pinned SDK is
// installed by .ci/run, or here when it is missing.
func runTSClient(t *testing.T, script, egress string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("the TypeScript SDK test needs node and npm (.ci/run installs them: apt-get install nodejs npm)")
	}
	tsInstall.Do(func() {
		if _, err := os.Stat("testdata/mcp-ts/node_modules/@modelcontextprotocol/sdk"); err == nil {
			return
		}
		install := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		install.Dir = "testdata/mcp-ts"
		if out, err := install.CombinedOutput(); err != nil {
			tsInstallErr = fmt.Errorf("npm ci in proxy/testdata/mcp-ts: %w\n%s", err, out)
		}
	})
	if tsInstallErr != nil {
		t.Fatal(tsInstallErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = "testdata/mcp-ts"
	cmd.Env = append(os.Environ(), "BATON_EGRESS="+egress)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	return out
}

// tsInstall installs the pinned SDK once for the tests that need it.
var (
	tsInstall    sync.Once
	tsInstallErr error
)

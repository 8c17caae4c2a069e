package middleware

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// receipts keeps the receipts written.
type receipts struct {
	mu   sync.Mutex
	recs []*record.Record
}

func (b *receipts) WriteLater(rec *record.Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs = append(b.recs, rec)
}

// TestReceiptSaysHowTheAgentAnswered: the receipt is delivered when the
// agent answered, and failed when it answered a failure: a 5xx, or, to an
// A2A message, a failed task or an internal error inside a 200, whole or
// streamed (read by the dedupe window as it keeps the answer), or as the
// ingress proxy noted it (AgentFailed). A failed task answered to a read
// (GetTask) is the task's state, not a failure of the request.
func TestReceiptSaysHowTheAgentAnswered(t *testing.T) {
	t.Parallel()
	const (
		completed = `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","status":{"state":"TASK_STATE_COMPLETED"}}}}`
		failed    = `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","status":{"state":"TASK_STATE_FAILED"}}}}`
		internal  = `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`
		stream    = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"status\":{\"state\":\"TASK_STATE_FAILED\"}}}}\n\n"
	)
	tests := []struct {
		name        string
		rpc         string // the JSON-RPC method, "" for plain HTTP
		status      int
		contentType string
		body        string
		noted       bool // the ingress proxy noted the failure (AgentFailed)
		state       record.State
		outcome     string
	}{
		{name: "plain 200", status: 200, contentType: "application/json", body: `{"ok":true}`,
			state: record.Delivered, outcome: "delivered to the agent"},
		{name: "plain 503", status: 503, contentType: "application/json", body: `{}`,
			state: record.Failed, outcome: "the agent answered 503"},
		{name: "a2a completed", rpc: "SendMessage", status: 200, contentType: "application/json", body: completed,
			state: record.Delivered, outcome: "delivered to the agent"},
		{name: "a2a failed task", rpc: "SendMessage", status: 200, contentType: "application/json", body: failed,
			state: record.Failed, outcome: "the agent answered 200 with a failed A2A task"},
		{name: "a2a v0.3 internal error", rpc: "message/send", status: 200, contentType: "application/json", body: internal,
			state: record.Failed, outcome: "the agent answered 200 with a failed A2A task"},
		{name: "a2a failed stream", rpc: "SendStreamingMessage", status: 200, contentType: "text/event-stream", body: stream,
			state: record.Failed, outcome: "the agent answered 200 with a failed A2A task"},
		{name: "noted by the ingress proxy", rpc: "SendMessage", status: 200, contentType: "application/json", body: failed, noted: true,
			state: record.Failed, outcome: "the agent answered 200 with a failed A2A task"},
		{name: "a2a poll of a failed task", rpc: "GetTask", status: 200, contentType: "application/json", body: failed,
			state: record.Delivered, outcome: "delivered to the agent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := state.NewMemory(config.Memory{})
			defer store.Close()
			pol := &DedupePolicy{Methods: []string{"POST"}, Window: time.Minute, Lease: time.Minute, MaxResponseBytes: 1 << 20}
			book := &receipts{}
			agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				in := InfoFromContext(r.Context())
				in.Delivered, in.AgentFailed = true, tc.noted
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			fill := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					in := InfoFromContext(r.Context())
					in.From, in.To, in.Key, in.TraceID = "a", "b", "k1", "4bf92f3577b34da6a3ce929d0e0e4736"
					if tc.rpc != "" {
						in.RPC = &RPC{ID: []byte("1"), Method: tc.rpc}
					}
					next.ServeHTTP(w, r)
				})
			}
			h := AccessLogTo(nil, slog.New(slog.DiscardHandler), Ingress, "b")(fill(Receipt(book, nil)(
				Dedupe(store, nil, func(string) *DedupePolicy { return pol }, slog.New(slog.DiscardHandler))(agent))))
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"jsonrpc":"2.0"}`))
			r.Header.Set("Idempotency-Key", `"k1"`)
			h.ServeHTTP(httptest.NewRecorder(), r)
			if len(book.recs) != 1 {
				t.Fatalf("%d receipts written, want 1", len(book.recs))
			}
			got := book.recs[0]
			if got.Side != record.Ingress || got.State != tc.state || got.Status != tc.status || got.Outcome != tc.outcome {
				t.Errorf("receipt %s %s %d (%s); want ingress %s %d (%s)", got.Side, got.State, got.Status, got.Outcome,
					tc.state, tc.status, tc.outcome)
			}
		})
	}
}

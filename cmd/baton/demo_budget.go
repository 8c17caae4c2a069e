//go:build !sidecar

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/modelcall"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/sidecar"
)

// demoBudgetTrace is the trace of the demo's act on chain budgets.
const demoBudgetTrace = "9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a"

// demoBudgetToken is the scout Baton's admin token: the approver who
// raises the budget presents it.
const demoBudgetToken = "demo-budget-approver-2026"

// demoBudget is the demo's act on model spend: scout's model asks for one
// more search eight times before it answers, each call billing 450 tokens,
// and the chain entered with a budget of 2000 tokens. Scout's Baton answers
// its sixth call itself, in OpenAI's error shape; an approver raises the
// budget by 2000 and the request is re-sent with its key: the five calls
// made are answered from the journal, three more go out, and the model is
// paid for eight calls in all.
func demoBudget(ctx context.Context, p func(string, ...any), start func(string) (*sidecar.Baton, func(), error), loop string) error {
	var calls atomic.Int64
	model, err := startDemoAgent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Messages []json.RawMessage }
		_ = json.NewDecoder(r.Body).Decode(&req)
		calls.Add(1)
		step, finish := len(req.Messages)/2+1, "tool_calls"
		if step >= 8 {
			finish = "stop"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"search step %d"},"finish_reason":%q}],`+
			`"usage":{"prompt_tokens":400,"completion_tokens":50,"total_tokens":450}}`, step, step, finish)
	}))
	if err != nil {
		return err
	}
	defer model.Close()
	var egress atomic.Pointer[string]
	var lastErr atomic.Pointer[string]
	scout, err := startDemoAgent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task, _ := io.ReadAll(r.Body)
		msgs := []map[string]string{{"role": "user", "content": string(task)}}
		for range 20 {
			b, _ := json.Marshal(map[string]any{"model": "gpt-4.1-mini", "messages": msgs})
			resp, err := http.Post("http://"+*egress.Load()+"/llm/v1/chat/completions", "application/json", bytes.NewReader(b))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				e := fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(answer))
				lastErr.Store(&e)
				http.Error(w, "the model call failed", http.StatusInternalServerError)
				return
			}
			msgs = append(msgs, map[string]string{"role": "assistant", "content": string(answer)}, map[string]string{"role": "tool", "content": "results"})
			if strings.Contains(string(answer), `"finish_reason":"stop"`) {
				io.WriteString(w, `{"venue":"the lakeside lodge"}`)
				return
			}
		}
		http.Error(w, "too many steps", http.StatusInternalServerError)
	}))
	if err != nil {
		return err
	}
	defer scout.Close()
	sB, stopS, err := start("agent: scout\nupstream: http://" + scout.Addr + "\n" + loop + "admin_token: " + demoBudgetToken + "\n" +
		"external: {routes: [{name: llm, url: \"http://" + model.Addr + "/v1/\", api: openai}]}\n" +
		"journal: {hosts: [\"" + model.Addr + "\"]}\n" +
		"edges: [{from: web, callers: {networks: [127.0.0.1/32], anonymous: true}, chain_budget: {tokens: 2000}}]\n")
	if err != nil {
		return fmt.Errorf("demo: scout's Baton: %w", err)
	}
	defer stopS()
	e := sB.EgressAddr()
	egress.Store(&e)

	p("\n11. a runaway agent stopped by its chain's budget (edges[].chain_budget, docs/model-calls.md).\n")
	p("   scout's model asks for one more search eight times, 450 tokens a call; the chain entered with\n")
	p("   a budget of 2000 tokens:\n")
	send := func() (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+sB.IngressAddr()+"/find", strings.NewReader("find a venue for forty"))
		req.Header.Set("Traceparent", "00-"+demoBudgetTrace+"-4444444444444444-01")
		req.Header.Set("Idempotency-Key", `"venue-1"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	status, err := send()
	if err != nil {
		return err
	}
	msg := ""
	if e := lastErr.Load(); e != nil {
		msg = *e
	}
	p("     scout answered %d after %d model calls; its sixth got, from its Baton, as its SDK would raise it:\n", status, calls.Load())
	p("     %s\n", msg)
	admin := newAdminClient(sB.AdminAddr(), func(string) string { return "" })
	admin.token = demoBudgetToken
	spent := func(n int) (*record.ModelSummary, error) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			var view records.TraceView
			err := admin.do("GET", "/v1/traces/"+demoBudgetTrace, &view)
			if err != nil && !isNotFound(err) {
				return nil, err // the receipt is written in the background: until then, no records
			}
			_, chain := records.Spend(view.Records)
			k := 0
			for _, r := range view.Records {
				if r.Side == record.Ingress && r.State != record.Sent {
					k++
				}
			}
			if (k == n && chain != nil) || time.Now().After(deadline) {
				return chain, nil
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	chain, err := spent(1)
	if err != nil || chain == nil {
		return fmt.Errorf("demo: the runaway's receipt: %v", err)
	}
	p("   its receipt: %s\n", describeSpend(chain))
	if chain.Budget == nil || chain.Budget.Chain == "" {
		return fmt.Errorf("demo: the runaway's receipt names no chain budget")
	}
	body, _ := json.Marshal(modelcall.Raise{Tokens: 2000})
	var v modelcall.SpendView
	if err := admin.send("POST", "/v1/chains/"+chain.Budget.Chain+"/budget", body, nil, &v); err != nil {
		return fmt.Errorf("demo: raising the budget: %w", err)
	}
	p("   an approver raises it by %d tokens (baton budget raise %s --tokens 2000), and the request is\n", v.Raised.Tokens, chain.Budget.Chain)
	p("   re-sent with its key:\n")
	if status, err = send(); err != nil {
		return err
	}
	chain, err = spent(2)
	if err != nil || chain == nil {
		return fmt.Errorf("demo: the resumed receipts: %v", err)
	}
	p("     scout answered %d; the model was called %d time(s) in all: the first five calls were answered\n", status, calls.Load())
	p("     from the journal. The chain: %s\n", describeSpend(chain))
	return nil
}

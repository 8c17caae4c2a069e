package intercept_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// The researcher's agent and Baton, in the peer namespace.
const (
	researcherPort   = "8084"
	researcherAdmin  = "127.0.0.1:15400"
	researcherEgress = "127.0.0.1:15401"
	researcherIn     = "127.0.0.1:15406"
	// chainTokens is the chain budget of the researcher's inbound edges.
	chainTokens = 1000
)

// budgetTopo is the researcher (researcher.mjs, an OpenAI Agents SDK agent
// with one tool) behind its Baton, whose inbound edges are callers edges
// with a chain budget: web (bearer, takes a budget header), ops (bearer,
// does not) and anyone (anonymous, whose header cannot count: it has no
// credential). Its model is a runaway: it asks for the tool forever.
type budgetTopo struct {
	tp     *agentsTopo
	llm    *llmServer
	agent  *nodeAgent
	ch     *chain // reads the researcher's records
	client *http.Client
	tokens map[string]string // web, ops, alice (an approver)
}

// TestAgentsJSChainBudget runs a runaway agent as written (an OpenAI
// Agents SDK agent whose model asks for a tool call forever) in a chain
// that enters through a callers edge with a budget of chainTokens tokens,
// its model an HTTPS server reached through its Baton's base-URL route,
// on the shipped defaults but for the topology, the budgets, the model's
// journaling and an approver (alice, by a bearer token).
//
// The promise: the chain's budget stops the run within one call of its
// limit, the SDK raising its usual error (RateLimitError, 429
// chain_budget_exceeded: it does not retry, as x-should-retry says), and
// the receipt records the refusal; an approver raises the budget with
// baton budget raise, and the request re-sent with its Idempotency-Key
// resumes the run, the calls made before answered from the journal, the
// model paid for each call once. A budget header counts only from a caller
// whose edge takes it and whose credential checked out; from others it is
// ignored, and the receipt says so; malformed where it counts, it is 400.
func TestAgentsJSChainBudget(t *testing.T) {
	t.Parallel()
	tp := startAgentsTopo(t)
	bt := &budgetTopo{tp: tp, llm: tp.startLLM(t, &llm{runaway: true}), client: tp.peer.client(),
		tokens: map[string]string{"web": "web-" + randHex(16), "ops": "ops-" + randHex(16), "alice": "alice-" + randHex(16)}}
	bt.client.Timeout = 2 * time.Minute
	bt.ch = &chain{tp: tp, a: tp.peer.client(), admin: researcherAdmin}
	bt.agent = tp.startAgent(t, tp.peer, "researcher", researcherPort, []string{tp.node, "researcher.mjs"},
		"OPENAI_BASE_URL=http://"+researcherEgress+"/llm/v1", "OPENAI_API_KEY=sk-researcher-"+randHex(8),
		"OPENAI_DEFAULT_MODEL=gpt-4.1-mini", "OPENAI_AGENTS_DISABLE_TRACING=1")
	budget := fmt.Sprintf("chain_budget: {tokens: %d", chainTokens)
	tp.startBatonAt(t, tp.peer, "researcher", researcherAdmin, "agent: researcher\nupstream: http://127.0.0.1:"+researcherPort+"\n"+
		"listen: {egress: "+researcherEgress+", ingress: "+researcherIn+", admin: "+researcherAdmin+"}\n"+
		fmt.Sprintf("store: {redis: {url: \"redis://127.0.0.1:%s/0\", prefix: %q}}\n", agentsRedisPort, "budget-"+randHex(6)+":")+
		"external: {ca_file: "+bt.llm.caFile+", routes: [{name: llm, url: \"https://"+bt.llm.host+"/v1/\", api: openai}]}\n"+
		"journal: {hosts: [\""+bt.llm.host+"\"]}\n"+
		"approvals: {approvers: [{name: alice, token_env: ALICE_TOKEN}]}\n"+
		"edges:\n"+
		"  - {from: web, callers: {bearer: {tokens_env: WEB_TOKENS}}, "+budget+", from_header: true}}\n"+
		"  - {from: ops, callers: {bearer: {tokens_env: OPS_TOKENS}}, "+budget+"}}\n"+
		"  - {from: anyone, callers: {anonymous: true}, "+budget+", from_header: true}}\n",
		"WEB_TOKENS="+bt.tokens["web"], "OPS_TOKENS="+bt.tokens["ops"], "ALICE_TOKEN="+bt.tokens["alice"])

	t.Run("runaway stopped, raised, resumed", bt.runaway)
	t.Run("budget headers", bt.headers)
}

// researcherAnswer is the researcher's answer: its final output, or the
// error its run raised.
type researcherAnswer struct {
	status int
	header http.Header
	Answer string `json:"answer"`
	// The SDK's error: its class, message, HTTP status and code.
	Error   string `json:"error"`
	Message string `json:"message"`
	Status  int    `json:"status"`
	Code    string `json:"code"`
	raw     string
}

// ask sends the researcher a task as a caller that runs no Baton: with
// token (none: anonymous), a Baton-Chain-Budget header when budget is
// set, the key and the trace.
func (bt *budgetTopo) ask(t *testing.T, token, budget, key, trace, task string) researcherAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"task": task})
	req, _ := http.NewRequest(http.MethodPost, "http://"+researcherIn+"/work", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Traceparent", "00-"+trace+"-"+randHex(8)+"-01")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if budget != "" {
		req.Header.Set("Baton-Chain-Budget", budget)
	}
	resp, err := bt.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := researcherAnswer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	json.Unmarshal(b, &a)
	return a
}

// receipts waits for the trace's n final receipts and returns them, oldest
// first. A receipt of a failed run is final too ("failed"), which
// chain.settled would wait out.
func (bt *budgetTopo) receipts(t *testing.T, trace string, n int) []record.Record {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		recs, err := bt.ch.records(trace)
		if err != nil {
			t.Fatal(err)
		}
		got := ingress(recs)
		if len(got) == n {
			sort.Slice(got, func(i, j int) bool { return got[i].Created.Before(got[j].Created) })
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s has %d final receipts, want %d:\n%s", trace, len(got), n, describe(recs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ingress(recs []record.Record) []record.Record {
	var out []record.Record
	for _, r := range recs {
		if r.Side == record.Ingress && r.State != record.Sent {
			out = append(out, r)
		}
	}
	return out
}

// sums are the running totals of the tokens of calls.
func sums(calls []llmCall) []int64 {
	out := make([]int64, len(calls))
	var s int64
	for i, c := range calls {
		s += c.in + c.out
		out[i] = s
	}
	return out
}

// runaway: the budget stops the run within one call of its limit, and the
// SDK raises its usual error; an approver raises the budget with baton
// budget raise; the same request re-sent resumes the run, the calls made
// before answered from the journal, until the raised budget stops it in
// turn. The model server is paid for each call once.
func (bt *budgetTopo) runaway(t *testing.T) {
	key := "research-" + randHex(6)
	trace := randHex(16)
	const task = "find the offsite budget"
	first := bt.ask(t, bt.tokens["web"], "", key, trace, task)
	t.Logf("the first run answered %d %s", first.status, first.raw)
	billed := bt.llm.billed(mustKey(t, bt.llm))
	paid := sums(billed)
	k := len(billed)
	if k < 3 || k >= 10 {
		t.Fatalf("the model was paid for %d calls (%v tokens): want the budget to stop the run after a few, before the SDK's 10 turns", k, paid)
	}
	// Within one call: the last call that went out started under the
	// budget, and the one after it was refused.
	if paid[k-2] >= chainTokens || paid[k-1] < chainTokens {
		t.Errorf("the chain's tokens after each call: %v; want the last under %d before it, at or over after", paid, chainTokens)
	}
	if first.status != 500 || first.Error != "RateLimitError" || first.Status != 429 || first.Code != "chain_budget_exceeded" ||
		!strings.Contains(first.Message, fmt.Sprintf("%d of its %d model tokens", paid[k-1], chainTokens)) || !strings.Contains(first.Message, trace) {
		t.Errorf("the agent answered %d %s; want its SDK's RateLimitError (429 chain_budget_exceeded) naming the budget and the trace", first.status, first.raw)
	}
	if c := bt.agent.mustCounts(t); c.Runs != 1 || c.Failed != 1 {
		t.Errorf("the agent ran %d times, failed %d: want once, failed", c.Runs, c.Failed)
	}
	rec := bt.receipts(t, trace, 1)[0]
	s := rec.Models
	if s == nil || s.Calls != k+1 || s.Refused != 1 || s.JournalHits != 0 || s.InputTokens+s.OutputTokens != paid[k-1] ||
		s.Budget == nil || s.Budget.Tokens != chainTokens || s.BudgetNote != "" || rec.Status != 500 ||
		s.List[k].Refused != "chain budget" || s.List[k].Status != 429 {
		t.Fatalf("the receipt: %d %+v; want %d calls, the last refused (one refusal: the SDK obeyed x-should-retry), %d tokens, the budget %d",
			rec.Status, s, k+1, paid[k-1], chainTokens)
	}

	// The spend as the store counts it, then raised by an approver; the
	// chain is named by the receipt's budget.
	chainID := s.Budget.Chain
	if len(chainID) != 32 {
		t.Fatalf("the receipt's budget names chain %q", chainID)
	}
	if out, err := bt.tp.peer.baton("budget", "show", chainID, "--admin", researcherAdmin); err != nil ||
		!strings.Contains(out, fmt.Sprintf("chain %s: %d tokens", chainID, paid[k-1])) || !strings.Contains(out, fmt.Sprintf("in %d model calls", k)) {
		t.Errorf("baton budget show: %v\n%s", err, out)
	}
	raise := 2 * (billed[k-1].in + billed[k-1].out) // about two calls more
	args := []string{"budget", "raise", chainID, "--tokens", fmt.Sprint(raise), "--admin", researcherAdmin}
	if out, err := bt.tp.peer.run(append([]string{"env", "-u", "BATON_APPROVER_TOKEN", "-u", "BATON_ADMIN_TOKEN", bin}, args...)...); err == nil ||
		!strings.Contains(err.Error(), "raising a chain's budget takes an approver") {
		t.Errorf("baton budget raise with no approver's token: %v\n%s; want it refused", err, out)
	} else {
		t.Logf("baton budget raise with no approver's token: %v", err)
	}
	if out, err := bt.tp.peer.run(append([]string{"env", "BATON_APPROVER_TOKEN=" + bt.tokens["alice"], bin}, args...)...); err != nil ||
		!strings.Contains(out, "raised the budget of chain "+chainID) {
		t.Fatalf("baton budget raise as alice: %v\n%s", err, out)
	}

	// Resume: the same request, with its key, in a trace of its own (as a
	// client without tracing re-sends): the same chain, its budget and count.
	trace2 := randHex(16)
	again := bt.ask(t, bt.tokens["web"], "", key, trace2, task)
	t.Logf("the resumed run answered %d %s", again.status, again.raw)
	billed = bt.llm.billed(mustKey(t, bt.llm))
	paid = sums(billed)
	n := len(billed)
	limit := chainTokens + raise
	if n <= k || paid[n-2] >= limit || paid[n-1] < limit {
		t.Errorf("after the resume the model was paid for %d calls in all (%d before), the chain's tokens %v: want more calls, the last under %d before it, at or over after",
			n, k, paid, limit)
	}
	if again.status != 500 || again.Code != "chain_budget_exceeded" ||
		!strings.Contains(again.Message, fmt.Sprintf("%d of its %d model tokens", paid[n-1], limit)) {
		t.Errorf("the resumed run answered %d %s; want the raised budget to stop it in turn", again.status, again.raw)
	}
	rs := append(bt.receipts(t, trace, 1), bt.receipts(t, trace2, 1)...)
	s = rs[1].Models
	if s == nil || s.Calls != n+1 || s.JournalHits != k || s.Refused != 1 || s.InputTokens+s.OutputTokens != paid[n-1]-paid[k-1] {
		t.Errorf("the resumed handling's receipt %+v; want %d calls: %d from the journal, %d paid (%d tokens), 1 refused",
			s, n+1, k, n-k, paid[n-1]-paid[k-1])
	}
	for i := 0; s != nil && i < k && i < len(s.List); i++ {
		if !s.List[i].Journal || s.List[i].InputTokens != 0 {
			t.Errorf("the resumed handling's call %d: %+v; want it answered from the journal, nothing paid", i+1, s.List[i])
		}
	}
	// The chain, over its receipts: what the model server was paid, once.
	_, chain := records.Spend(rs)
	if chain == nil || chain.InputTokens+chain.OutputTokens != paid[n-1] || chain.Refused != 2 || chain.JournalHits != k {
		t.Errorf("the chain's spend over its receipts %+v; want the %d tokens the model was paid, 2 refusals, %d journal hits", chain, paid[n-1], k)
	}
	if out, err := bt.tp.peer.baton("budget", "show", chainID, "--admin", researcherAdmin); err != nil ||
		!strings.Contains(out, fmt.Sprintf("chain %s: %d tokens", chainID, paid[n-1])) || !strings.Contains(out, fmt.Sprintf("raised by %d tokens", raise)) {
		t.Errorf("baton budget show after the resume: %v\n%s", err, out)
	}
	if c := bt.agent.mustCounts(t); c.Runs != 2 {
		t.Errorf("the agent ran %d times, want 2", c.Runs)
	}
}

// mustKey is the one API key the model server billed.
func mustKey(t *testing.T, s *llmServer) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		t.Fatal("the model server was never called")
	}
	return s.calls[0].key
}

// headers: a budget header is taken from a caller whose edge takes it and
// whose credential checked out (the tighter of it and the edge's wins),
// and refused there when malformed (400); it is ignored from a caller
// whose edge does not take it, and from an anonymous one, the receipt
// saying so, the edge's own budget bounding the chain.
func (bt *budgetTopo) headers(t *testing.T) {
	for _, tc := range []struct {
		name, token, header string
		wantBudget          int64
		note                string
	}{
		{"a caller whose edge takes it", bt.tokens["web"], "tokens=1", 1, ""},
		{"a caller whose edge does not take it", bt.tokens["ops"], "tokens=1", chainTokens,
			"Baton-Chain-Budget ignored: the edge from ops takes no budget from its callers"},
		{"an anonymous caller", "", "tokens=1", chainTokens,
			"Baton-Chain-Budget ignored: a caller with no credential sets no budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace := randHex(16)
			before := bt.llm.billOf("").calls
			a := bt.ask(t, tc.token, tc.header, "headers-"+randHex(6), trace, "find who booked the lodge")
			paid := bt.llm.billOf("").calls - before
			rec := bt.receipts(t, trace, 1)[0]
			s := rec.Models
			if s == nil || s.Budget == nil || s.Budget.Tokens != tc.wantBudget || s.BudgetNote != tc.note || s.Refused != 1 || a.Code != "chain_budget_exceeded" {
				t.Fatalf("the receipt's model summary %+v (the agent answered %d %s); want the budget %d, note %q, the runaway refused once",
					s, a.status, a.raw, tc.wantBudget, tc.note)
			}
			// A budget of one token lets one call out; the edge's, several.
			if tc.wantBudget == 1 && paid != 1 || tc.wantBudget == chainTokens && paid < 3 {
				t.Errorf("the model was paid for %d calls under a budget of %d tokens", paid, tc.wantBudget)
			}
			if rec.Caller == "" {
				t.Errorf("the receipt names no caller")
			}
		})
	}
	t.Run("malformed, from a caller whose edge takes it", func(t *testing.T) {
		runs := bt.agent.mustCounts(t).Runs
		a := bt.ask(t, bt.tokens["web"], "tokens=lots", "headers-"+randHex(6), randHex(16), "find who booked the lodge")
		if a.status != http.StatusBadRequest || a.header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(a.raw, "Baton-Chain-Budget: tokens must be an integer") {
			t.Errorf("a malformed budget header: %d %s %s; want 400 problem+json naming it", a.status, a.header.Get("Content-Type"), a.raw)
		}
		if n := bt.agent.mustCounts(t).Runs; n != runs {
			t.Errorf("the agent ran %d times for a request refused before it", n-runs)
		}
	})
}

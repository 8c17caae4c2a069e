package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
)

// chatModel is an OpenAI-compatible model server (POST
// /v1/chat/completions): every answer bills input tokens and output tokens,
// reports them in its usage (a streamed one in its final chunk, when asked
// with stream_options.include_usage), and asks for a tool call until the
// conversation holds `rounds` answers, then stops. The same conversation
// always gets the same answer. It counts the calls it answered and the
// tokens it billed.
type chatModel struct {
	in, out int
	rounds  int
	calls   atomic.Int64
	billed  atomic.Int64
}

func (m *chatModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model         string            `json:"model"`
		Stream        bool              `json:"stream"`
		Messages      []json.RawMessage `json:"messages"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	n := m.calls.Add(1)
	m.billed.Add(int64(m.in + m.out))
	answers := 0
	for _, msg := range req.Messages {
		if bytes.Contains(msg, []byte(`"assistant"`)) {
			answers++
		}
	}
	finish, content := "tool_calls", fmt.Sprintf("step %d: call the tool again", answers+1)
	if answers+1 >= m.rounds {
		finish, content = "stop", "done"
	}
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, m.in, m.out, m.in+m.out)
	model := req.Model + "-2025-04-14"
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":%q}],"usage":%s}`,
			n, model, content, finish, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		w.(http.Flusher).Flush()
	}
	chunk(fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion.chunk","model":%q,"choices":[{"index":0,"delta":{"role":"assistant","content":%q}}]}`, n, model, content))
	chunk(fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion.chunk","model":%q,"choices":[{"index":0,"delta":{},"finish_reason":%q}]}`, n, model, finish))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		chunk(fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion.chunk","model":%q,"choices":[],"usage":%s}`, n, model, usage))
	}
	chunk("[DONE]")
}

// loopAgent is an agent as written: for each request it asks the model
// through its Baton's route, appends each answer to the conversation and
// asks again while the model asks for a tool, then answers; a model error
// fails the request with a 500. It forwards no trace context.
type loopAgent struct {
	egress atomic.Pointer[string]
	stream bool

	mu     sync.Mutex
	errors []string // the model errors it met, as its SDK would raise them
}

func (a *loopAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	task, _ := io.ReadAll(r.Body)
	msgs := []map[string]string{{"role": "user", "content": string(task)}}
	for range 50 {
		body := map[string]any{"model": "gpt-4.1-mini", "messages": msgs}
		if a.stream {
			body["stream"], body["stream_options"] = true, map[string]bool{"include_usage": true}
		}
		b, _ := json.Marshal(body)
		resp, err := http.Post("http://"+*a.egress.Load()+"/llm/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			a.mu.Lock()
			a.errors = append(a.errors, fmt.Sprintf("%d %s x-should-retry=%s", resp.StatusCode, answer, resp.Header.Get("X-Should-Retry")))
			a.mu.Unlock()
			http.Error(w, "the model call failed: "+string(answer), http.StatusInternalServerError)
			return
		}
		text := string(answer)
		msgs = append(msgs, map[string]string{"role": "assistant", "content": text})
		if strings.Contains(text, `"finish_reason":"stop"`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"answer":"done"}`)
			return
		}
	}
	http.Error(w, "too many steps", http.StatusInternalServerError)
}

func (a *loopAgent) lastError() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.errors) == 0 {
		return ""
	}
	return a.errors[len(a.errors)-1]
}

// modelCallBaton starts a Baton in front of a loopAgent whose model is
// served by m on route llm (api openai), its calls journaled; extra adds to
// the configuration.
func modelCallBaton(t *testing.T, m *chatModel, stream bool, extra string) (*meteredBaton, *loopAgent) {
	t.Helper()
	model := httptest.NewServer(m)
	t.Cleanup(model.Close)
	agent := &loopAgent{stream: stream}
	ag := httptest.NewServer(agent)
	t.Cleanup(ag.Close)
	host := strings.TrimPrefix(model.URL, "http://")
	b := startMetered(t, "agent: planner\nupstream: "+ag.URL+"\n"+
		"external: {routes: [{name: llm, url: \""+model.URL+"/\", api: openai}]}\n"+
		"journal: {hosts: [\""+host+"\"]}\n"+extra)
	egress := b.EgressAddr()
	agent.egress.Store(&egress)
	return b, agent
}

// listening is a Baton's listeners, as a test reaches them.
type listening interface {
	IngressAddr() string
	AdminAddr() string
}

// sendTask sends a task to b's ingress as a caller that runs no Baton, in
// trace, with key.
func sendTask(t *testing.T, b listening, tp, key, extraHeader string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+b.IngressAddr()+"/task", strings.NewReader("plan the offsite"))
	req.Header.Set("Traceparent", tp)
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	if k, v, ok := strings.Cut(extraHeader, ": "); ok {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// receipts returns the trace's final receipts at b, oldest first, once
// there are n; token is the admin token, if b has one.
func receipts(t *testing.T, b listening, trace string, n int, token ...string) []record.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var v records.TraceView
		var st int
		if len(token) > 0 {
			st = adminGetAuth(t, b.AdminAddr(), "/v1/traces/"+trace, token[0], &v)
		} else {
			st = adminGet(t, b.AdminAddr(), "/v1/traces/"+trace, &v)
		}
		var out []record.Record
		final := 0
		for _, r := range v.Records {
			if r.Side == record.Ingress {
				out = append(out, r)
				if r.State != record.Sent {
					final++
				}
			}
		}
		if st == http.StatusOK && final == n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: %d, %d final receipts, want %d", trace, st, final, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestModelCallsUnderstood: an agent's model calls through a route, whole
// and streamed, are understood: the receipt counts every call with its
// model, tokens (exactly the model server's), time to first token and cost
// by the shipped price table; each call's span is a CLIENT span "chat
// gpt-4.1-mini" with the GenAI attributes, in the handling's trace; the
// metrics count tokens and cost.
func TestModelCallsUnderstood(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			m := &chatModel{in: 120, out: 30, rounds: 3}
			b, _ := modelCallBaton(t, m, stream, "")
			tp, trace := newTraceparent(t)
			if resp := sendTask(t, b, tp, "offsite-1", ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("the task: %d", resp.StatusCode)
			}
			rec := receipts(t, b, trace, 1)[0]
			s := rec.Models
			if s == nil || s.Calls != 3 || s.InputTokens+s.OutputTokens != m.billed.Load() || s.InputTokens != 360 ||
				s.OutputTokens != 90 || s.UnknownUsage != 0 || s.Unpriced != 0 || s.CostUSD <= 0 || len(s.List) != 3 {
				t.Fatalf("the receipt's model summary %+v; the model billed %d tokens", s, m.billed.Load())
			}
			for _, c := range s.List {
				if c.Model != "gpt-4.1-mini-2025-04-14" || c.API != "llm" || c.Provider != "openai" || c.Operation != "chat" ||
					!c.UsageKnown || !c.Priced || (stream && c.TTFTMs <= 0) || c.Journal {
					t.Errorf("call %+v", c)
				}
			}
			if s.List[2].Finish != "stop" || s.List[0].Finish != "tool_calls" {
				t.Errorf("finish reasons %q, %q", s.List[0].Finish, s.List[2].Finish)
			}
			var spans int
			for _, sp := range b.spans.Ended() {
				if sp.Name() != "chat gpt-4.1-mini" {
					continue
				}
				spans++
				attrs := map[string]string{}
				for _, kv := range sp.Attributes() {
					attrs[string(kv.Key)] = kv.Value.String()
				}
				if sp.SpanContext().TraceID().String() != trace || attrs["gen_ai.operation.name"] != "chat" ||
					attrs["gen_ai.provider.name"] != "openai" || attrs["gen_ai.request.model"] != "gpt-4.1-mini" ||
					attrs["gen_ai.response.model"] != "gpt-4.1-mini-2025-04-14" || attrs["gen_ai.usage.input_tokens"] != "120" ||
					attrs["gen_ai.usage.output_tokens"] != "30" || attrs["gen_ai.agent.name"] != "" || attrs["server.address"] != "127.0.0.1" {
					t.Errorf("span %s in trace %s: %v", sp.Name(), sp.SpanContext().TraceID(), attrs)
				}
			}
			if spans != 3 {
				t.Errorf("%d model call spans, want 3", spans)
			}
			sc := scrapeMetrics(t, b.AdminAddr())
			series := map[string]string{"from": "planner", "to": "llm", "gen_ai_provider_name": "openai", "model": "gpt-4.1-mini-2025-04-14"}
			with := func(k, v string) map[string]string {
				l := map[string]string{k: v}
				for k, v := range series {
					l[k] = v
				}
				return l
			}
			for _, c := range []struct {
				name   string
				labels map[string]string
				want   float64
			}{
				{"baton_genai_tokens_total", with("type", "input"), 360},
				{"baton_genai_tokens_total", with("type", "output"), 90},
				{"baton_genai_calls_total", with("type", "live"), 3},
				{"gen_ai_client_token_usage_count", map[string]string{"gen_ai_operation_name": "chat", "gen_ai_token_type": "input"}, 3},
				{"gen_ai_client_operation_duration_seconds_count", map[string]string{"gen_ai_operation_name": "chat"}, 3},
			} {
				if v, ok := sc.value(c.name, c.labels); !ok || v != c.want {
					t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, v, ok, c.want)
				}
			}
			if v, ok := sc.value("baton_genai_cost_usd_total", series); !ok || v <= 0 {
				t.Errorf("baton_genai_cost_usd_total = %v (found %v)", v, ok)
			}
		})
	}
}

// TestModelCallsChainBudget: a runaway agent (its model asks for a tool
// call again and again) in a chain whose budget is 1000 tokens is stopped
// within one call of it: the call after the count reaches the budget is
// answered by Baton with OpenAI's error shape (429, x-should-retry: false,
// naming the budget), recorded, and the handling fails. An approver raises
// the budget; the chain re-sent with its key resumes: the calls made before
// are answered from the journal, and nothing is paid twice.
func TestModelCallsChainBudget(t *testing.T) {
	t.Parallel()
	m := &chatModel{in: 250, out: 50, rounds: 8}
	b, agent := modelCallBaton(t, m, true, "admin_token: budget-admin-token-0123456789\n"+
		"edges: [{from: web, callers: {anonymous: true}, chain_budget: {tokens: 1000}}]\n")
	tp, trace := newTraceparent(t)
	if resp := sendTask(t, b, tp, "runaway-1", ""); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("the runaway task: %d, want the agent's 500", resp.StatusCode)
	}
	if n := m.calls.Load(); n != 4 {
		t.Fatalf("the model answered %d calls, want 4 (the fifth is over the budget: 4 × 300 tokens ≥ 1000)", n)
	}
	e := agent.lastError()
	if !strings.HasPrefix(e, "429 ") || !strings.Contains(e, `"code":"chain_budget_exceeded"`) ||
		!strings.Contains(e, "1200 of its 1000 model tokens") || !strings.HasSuffix(e, "x-should-retry=false") {
		t.Fatalf("the agent's error: %s", e)
	}
	const admin = "budget-admin-token-0123456789"
	rec := receipts(t, b, trace, 1, admin)[0]
	if s := rec.Models; s == nil || s.Calls != 5 || s.Refused != 1 || s.InputTokens+s.OutputTokens != 1200 ||
		s.Budget == nil || s.Budget.Tokens != 1000 || s.List[4].Refused != "chain budget" || rec.Status != 500 {
		t.Fatalf("receipt %d %+v", rec.Status, rec.Models)
	}

	// Raising takes an approver. The chain is named by the receipt's budget.
	chain := rec.Models.Budget.Chain
	raise := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+b.AdminAddr()+"/v1/chains/"+chain+"/budget", strings.NewReader(`{"tokens":2000}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := raise("not-an-approver"); st != http.StatusUnauthorized {
		t.Fatalf("a raise by no one: %d", st)
	}
	if st := raise(admin); st != http.StatusOK {
		t.Fatalf("the admin's raise: %d", st)
	}
	// Resumed in a trace of its own, as a client that traces nothing
	// re-sends: the same chain, its count and its raised budget.
	tp2, trace2 := newTraceparent(t)
	before, began := storeOps(t, b.AdminAddr()), time.Now()
	if resp := sendTask(t, b, tp2, "runaway-1", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("the resumed task: %d (%s)", resp.StatusCode, agent.lastError())
	}
	after, took := storeOps(t, b.AdminAddr()), time.Since(began)
	if n, billed := m.calls.Load(), m.billed.Load(); n != 8 || billed != 8*300 {
		t.Fatalf("the model answered %d calls (%d tokens), want 8: the first four answered from the journal", n, billed)
	}
	rs := receipts(t, b, trace2, 1, admin)
	if s := rs[0].Models; s == nil || s.Calls != 8 || s.JournalHits != 4 || s.Refused != 0 || s.InputTokens+s.OutputTokens != 1200 ||
		s.Budget.Chain != chain {
		t.Fatalf("the resumed handling's model summary %+v", rs[0].Models)
	}
	var v struct{ Tokens, Calls int64 }
	if st := adminGet(t, b.AdminAddr(), "/v1/chains/"+chain+"/spend", &v); st != http.StatusUnauthorized {
		t.Fatalf("the spend without the admin token: %d", st)
	}
	if st := adminGetAuth(t, b.AdminAddr(), "/v1/chains/"+chain+"/spend", admin, &v); st != http.StatusOK || v.Tokens != 2400 || v.Calls != 8 {
		t.Fatalf("the chain's spend: %d %+v, want 2400 tokens in 8 calls", st, v)
	}
	// The store's work for the budget in the resumed run: each of the four
	// calls that went out read the chain's count once, and its spend rode
	// on the journal's append of its answer; no counter write of its own
	// (the one index_incr at most is the hour's index of costly chains,
	// written once the handling has ended). Beside the run, the abandon
	// loop reads its list of pending traces every half second: one
	// index_range each time, however slow the machine.
	ticks := float64(took/(500*time.Millisecond) + 1)
	if r, a, i := after("index_range")-before("index_range"), after("append_counting")-before("append_counting"),
		after("index_incr")-before("index_incr"); r < 4 || r > 4+ticks || a != 4 || i > 1 {
		t.Fatalf("store calls of the resumed run (%v): %v index_range, %v append_counting, %v index_incr; want 4 (and %v of the abandon loop's at most), 4 and at most 1",
			took, r, a, i, ticks)
	}
}

// storeOps returns the count of each store operation a Baton made so far.
func storeOps(t *testing.T, admin string) func(op string) float64 {
	sc := scrapeMetrics(t, admin)
	return func(op string) float64 {
		n, _ := sc.value("baton_store_duration_seconds_count", map[string]string{"op": op})
		return n
	}
}

// TestModelCallsBadAnswers: answers that are not what their API says pass
// to the agent byte for byte, and the receipt says what Baton could tell:
// usage missing, negative, fractional or garbage is unknown (never zero),
// a non-JSON body and a truncated stream likewise, an error answer names
// its type.
func TestModelCallsBadAnswers(t *testing.T) {
	t.Parallel()
	answers := []struct {
		name, ctype, body string
		status            int
		known             bool
		errType           string
		model             string // recorded: the answer's, else the request's
	}{
		{"good", "application/json", `{"model":"m","choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`, 200, true, "", "m"},
		// Priced by the model the request asked for, read only then.
		{"an unpriced model", "application/json", `{"model":"zz-unpriced","choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`, 200, true, "", "zz-unpriced"},
		{"no usage", "application/json", `{"model":"m","choices":[{"finish_reason":"stop"}]}`, 200, false, "", "m"},
		{"negative usage", "application/json", `{"model":"m","usage":{"prompt_tokens":-5,"completion_tokens":2}}`, 200, false, "", "m"},
		{"fractional usage", "application/json", `{"model":"m","usage":{"prompt_tokens":5.5,"completion_tokens":2}}`, 200, false, "", "m"},
		{"garbage usage", "application/json", `{"model":"m","usage":"lots"}`, 200, false, "", "m"},
		{"not JSON", "application/json", `<html>502 Bad Gateway</html>`, 200, false, "", "m"},
		{"truncated stream", "text/event-stream", "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"model\":\"m\",\"choi", 200, false, "", "m"},
		{"error answer", "application/json", `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, 429, false, "rate_limit_exceeded", "m"},
	}
	// With spans that record, the request is read at once, for the span; on
	// the shipped defaults (spans with ids only), only when the answer does
	// not tell (its model, or its model's price).
	for name, tracing := range map[string]func(*proxy.Options){
		"trace=sdk": func(*proxy.Options) {},
		"trace=ids": func(o *proxy.Options) { o.TracerProvider = &middleware.IDTracerProvider{} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var next atomic.Int64
			model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				a := answers[next.Add(1)-1]
				w.Header().Set("Content-Type", a.ctype)
				w.WriteHeader(a.status)
				io.WriteString(w, a.body)
			}))
			t.Cleanup(model.Close)
			var got []string
			var egress atomic.Pointer[string]
			ag := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for range answers {
					resp, err := http.Post("http://"+*egress.Load()+"/llm/v1/chat/completions", "application/json",
						strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
					if err != nil {
						got = append(got, err.Error())
						continue
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					got = append(got, string(b))
				}
				io.WriteString(w, "ok")
			}))
			t.Cleanup(ag.Close)
			b := startMetered(t, "agent: planner\nupstream: "+ag.URL+"\nexternal: {routes: [{name: llm, url: \""+model.URL+"/\", api: openai}]}\n"+
				"models: {prices: {m: {input: 1, output: 2}}}\n", tracing)
			e := b.EgressAddr()
			egress.Store(&e)
			tp, trace := newTraceparent(t)
			if resp := sendTask(t, b, tp, "bad-1", ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("the task: %d", resp.StatusCode)
			}
			s := receipts(t, b, trace, 1)[0].Models
			if s == nil || len(s.List) != len(answers) || s.UnknownUsage != len(answers)-2 || s.InputTokens != 10 || s.OutputTokens != 4 {
				t.Fatalf("model summary %+v", s)
			}
			for i, a := range answers {
				c := s.List[i]
				if got[i] != a.body || c.UsageKnown != a.known || c.Error != a.errType || (!a.known && c.InputTokens+c.OutputTokens != 0) ||
					c.Model != a.model || c.Priced != a.known || (a.known && c.CostUSD != 9e-6) {
					t.Errorf("%s: the agent got %q; recorded %+v", a.name, got[i], c)
				}
			}
		})
	}
}

package intercept_test

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// TestAgentsJSModelCalls runs the chain A → B → {C, then D} with agents as
// they are written, each calling a model over HTTPS: B (b.mjs, an OpenAI
// Agents SDK run on the Responses API) by the server's IP, in its pod
// intercepted transparently, its Baton terminating that TLS; C and D
// (leaf.mjs, the openai SDK's chat completions) through their Batons'
// base-URL route (OPENAI_BASE_URL pointing at the egress, the route's
// upstream the HTTPS server). The Batons run on the shipped defaults and
// export their spans over OTLP to a receiver in the test. Once with whole
// answers, once streamed: B's Responses streamed, C asking for usage
// (stream_options.include_usage), D not (the SDK's default: the server
// reports none); and streamed again with no exporter, as `baton serve`
// runs by default (spans that record nothing: a call's request is then
// read for its model only when its answer does not say enough).
//
// The promise: the tokens the receipts' model summaries report add up
// exactly to what the model server billed and reported, per agent (its API
// key) and for the chain, and a call whose usage went unreported is counted
// unknown, never zero; baton trace prints each agent's and the chain's
// spend; every model call is a CLIENT span "chat gpt-4.1-mini" with the
// GenAI attributes, in the chain's trace, a child of the ingress span of
// the handling it served, though no agent forwards trace context.
func TestAgentsJSModelCalls(t *testing.T) {
	t.Parallel()
	tp := startAgentsTopo(t)
	server := tp.startLLM(t, &llm{})
	rcv, otelEnv := tp.startOTLP(t)
	for _, run := range []struct {
		name           string
		stream, export bool
	}{{"whole", false, true}, {"streamed", true, true}, {"streamed, no exporter", true, false}} {
		t.Run(run.name, func(t *testing.T) {
			env := otelEnv
			if !run.export {
				env = nil
			}
			stream := run.stream
			mc := tp.startModelChain(t, server, env, stream)
			trace := randHex(16)
			task := "dinner for four on Friday (" + randHex(3) + ")"
			ans, err := mc.send("msg-"+randHex(8), task, trace)
			if err != nil {
				t.Fatal(err)
			}
			if !ans.ok() || !strings.Contains(ans.text, "done: "+task) {
				t.Fatalf("the chain answered %v", ans)
			}
			recs, err := mc.settled(trace, settle, func(recs []record.Record) bool {
				n := 0
				for _, r := range recs {
					if r.Side == record.Ingress && r.Models != nil && r.Models.Calls > 0 {
						n++
					}
				}
				return n == 3
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("trace %s:\n%s", trace, describe(recs))
			mc.checkSpend(t, recs, stream)
			mc.checkTraceCommand(t, trace, recs)
			if run.export {
				mc.checkSpans(t, rcv, trace, recs)
			}
		})
	}
}

// modelChain is a chain whose agents call the model server, each with an
// API key of its own, by which the server bills them.
type modelChain struct {
	*chain
	llm  *llmServer
	keys map[string]string // by agent
}

// startModelChain starts C, D and their Batons, B's Baton then its agent
// (which trusts the bundle its Baton publishes), and A's Baton. Only the
// shipped defaults are used but for what the topology needs: listeners,
// the store, peers, edges, B's interception of the model's TLS and the
// model's API (models.hosts: a self-hosted server is known only so), the
// routes of C and D, the model's CA, the OTLP exporter's environment, and
// a chain budget where the chain enters B (never reached: it is carried to
// C and D, and the chain's count kept in the store by all three).
func (tp *agentsTopo) startModelChain(t *testing.T, s *llmServer, otelEnv []string, stream bool) *modelChain {
	t.Helper()
	peerURL := func(port string) string { return "http://" + hostPort(agentsPeerIP4, port) }
	mc := &modelChain{chain: &chain{tp: tp, a: tp.peer.client(), admin: aAdmin}, llm: s, keys: map[string]string{}}
	mc.a.Timeout = 2 * time.Minute
	for _, a := range []string{"b", "c", "d"} {
		mc.keys[a] = "sk-" + a + "-" + randHex(8)
	}
	prefix := "models-" + randHex(6) + ":"
	store := func(host string) string {
		return fmt.Sprintf("store: {redis: {url: \"redis://%s/0\", prefix: %q}}\n", hostPort(host, agentsRedisPort), prefix)
	}
	leafMode := map[string]string{"c": "", "d": ""}
	if stream {
		leafMode = map[string]string{"c": "usage", "d": "1"}
	}
	for _, l := range []struct{ name, port, base string }{{"c", agentsCPort, "1510"}, {"d", agentsDPort, "1520"}} {
		env := []string{"AGENT_NAME=" + l.name, "PUBLIC_URL=" + peerURL(l.port) + "/",
			"OPENAI_BASE_URL=http://127.0.0.1:" + l.base + "1/llm/v1", "OPENAI_API_KEY=" + mc.keys[l.name]}
		if m := leafMode[l.name]; m != "" {
			env = append(env, "MODEL_STREAM="+m)
		}
		agent := tp.startAgent(t, tp.peer, l.name, l.port, []string{tp.node, "leaf.mjs"}, env...)
		if l.name == "c" {
			mc.c = agent
		} else {
			mc.d = agent
		}
		tp.startBatonAt(t, tp.peer, l.name, "127.0.0.1:"+l.base+"0", "agent: "+l.name+"\nupstream: http://127.0.0.1:"+l.port+"\n"+
			"listen: {egress: 127.0.0.1:"+l.base+"1, ingress: \"0.0.0.0:"+l.base+"6\", admin: 127.0.0.1:"+l.base+"0}\n"+
			store("127.0.0.1")+
			"external: {ca_file: "+s.caFile+", routes: [{name: llm, url: \"https://"+s.host+"/v1/\", api: openai}]}\n"+
			"edges: [{from: b}]\n", otelEnv...)
	}

	bundle := filepath.Join(s.dir, "b-"+randHex(4), "bundle.pem")
	tp.startBatonAt(t, tp.agent, "b", bAdmin, "agent: b\nupstream: http://127.0.0.1:"+agentsBPort+"\n"+
		"listen: {egress: 127.0.0.1:15001, ingress: \"[::]:15006\", admin: "+bAdmin+"}\n"+
		"intercept: {mode: transparent, tls: {hosts: [\""+s.host+"\"], bundle: "+bundle+"}}\n"+store(agentsPeerIP4)+
		"peers:\n"+
		"  c: {url: \""+peerURL("15106")+"\", ports: ["+agentsCPort+"]}\n"+
		"  d: {url: \""+peerURL("15206")+"\", ports: ["+agentsDPort+"]}\n"+
		"external: {allow: [\""+s.host+"\"], ca_file: "+s.caFile+"}\n"+
		"models: {hosts: {\""+s.host+"\": openai}}\n"+
		fmt.Sprintf("edges: [{from: a, chain_budget: {tokens: %d}}, {to: c}, {to: d}]\n", modelChainBudget), otelEnv...)
	env := []string{
		"PUBLIC_URL=http://" + hostPort(agentsAgentIP4, agentsBPort) + "/",
		"C_URL=" + peerURL(agentsCPort), "D_URL=" + peerURL(agentsDPort),
		"OPENAI_BASE_URL=https://" + s.host + "/v1", "OPENAI_API_KEY=" + mc.keys["b"],
		"OPENAI_DEFAULT_MODEL=gpt-4.1-mini", "OPENAI_AGENTS_DISABLE_TRACING=1", "NODE_EXTRA_CA_CERTS=" + bundle,
	}
	if stream {
		env = append(env, "STREAM=1")
	}
	mc.b = tp.startAgent(t, tp.agent, "b", agentsBPort, []string{tp.node, "b.mjs"}, env...)
	tp.startBatonAt(t, tp.peer, "a", aAdmin, "agent: a\nupstream: http://127.0.0.1:9\n"+
		"listen: {egress: "+aEgress+", ingress: 127.0.0.1:15306, admin: "+aAdmin+"}\n"+store("127.0.0.1")+
		"peers:\n  b: {url: \"http://"+hostPort(agentsAgentIP4, agentsBPort)+"\"}\n"+
		"edges: [{to: b}]\n", otelEnv...)
	return mc
}

// modelChainBudget is the budget of chains entering B from A.
const modelChainBudget = 1_000_000

// gpt41mini is the shipped price of gpt-4.1-mini, in USD per million
// tokens, which its dated snapshot (the model the server answers as) costs.
const gpt41miniIn, gpt41miniOut = 0.40, 1.60

// checkSpend checks what the receipts say each agent and the chain spent
// against what the model server billed.
func (mc *modelChain) checkSpend(t *testing.T, recs []record.Record, stream bool) {
	t.Helper()
	agents, chain := records.Spend(recs)
	byAgent := map[string]record.ModelSummary{}
	for _, a := range agents {
		byAgent[a.Agent] = a.ModelSummary
	}
	var want record.ModelSummary
	for _, a := range []string{"b", "c", "d"} {
		bl, got := mc.llm.billOf(mc.keys[a]), byAgent[a]
		cost := (float64(bl.reportedIn)*gpt41miniIn + float64(bl.reportedOut)*gpt41miniOut) / 1e6
		t.Logf("%s: the server billed %d call(s), %d in + %d out tokens (%d call(s) unreported); the receipts say %d call(s), %d in + %d out, $%.9f, %d unknown",
			a, bl.calls, bl.in, bl.out, bl.unreported, got.Calls, got.InputTokens, got.OutputTokens, got.CostUSD, got.UnknownUsage)
		if got.Calls != bl.calls || got.InputTokens != bl.reportedIn || got.OutputTokens != bl.reportedOut ||
			got.UnknownUsage != bl.unreported || got.JournalHits != 0 || got.Refused != 0 || got.Unpriced != 0 ||
			math.Abs(got.CostUSD-cost) > 1e-12 {
			t.Errorf("%s's receipts say %+v; want %d call(s), %d in + %d out tokens as billed and reported, %d unknown, $%.9f",
				a, got, bl.calls, bl.reportedIn, bl.reportedOut, bl.unreported, cost)
		}
		want.Calls += bl.calls
		want.InputTokens += bl.reportedIn
		want.OutputTokens += bl.reportedOut
		want.UnknownUsage += bl.unreported
		want.CostUSD += cost
	}
	if chain == nil || chain.Calls != want.Calls || chain.InputTokens != want.InputTokens || chain.OutputTokens != want.OutputTokens ||
		chain.UnknownUsage != want.UnknownUsage || math.Abs(chain.CostUSD-want.CostUSD) > 1e-12 {
		t.Errorf("the chain's spend %+v; want %+v", chain, want)
	}
	// What the agents made of it: B three calls (book, notify, the
	// answer), C and D one each; D's streamed call unreported.
	wantCalls := map[string]int{"b": 3, "c": 1, "d": 1}
	for a, n := range wantCalls {
		if bl := mc.llm.billOf(mc.keys[a]); bl.calls != n {
			t.Errorf("the server billed %s %d call(s), want %d", a, bl.calls, n)
		}
	}
	if d := mc.llm.billOf(mc.keys["d"]); stream && (d.unreported != 1 || d.in == 0) || !stream && d.unreported != 0 {
		t.Errorf("D's calls: %+v; want its streamed call billed and unreported", d)
	}
	for _, a := range []string{"b", "c", "d"} {
		for i, c := range mc.llm.billed(mc.keys[a]) {
			if c.stream != stream {
				t.Errorf("%s's call %d to %s streamed: %v, want %v", a, i+1, c.path, c.stream, stream)
			}
		}
	}
	for _, r := range recs {
		if r.Side != record.Ingress || r.Models == nil {
			continue
		}
		if b := r.Models.Budget; b == nil || b.Tokens != modelChainBudget {
			t.Errorf("%s's receipt: the chain's budget %+v; want the %d tokens set where it entered B, carried on", r.To, b, modelChainBudget)
		}
		for _, c := range r.Models.List {
			unreported := stream && r.To == "d"
			if c.UsageKnown == unreported || c.Model != "gpt-4.1-mini-2025-04-14" || c.Provider != "openai" || c.Operation != "chat" ||
				c.Status != 200 || c.Finish == "" || (c.Priced == unreported) {
				t.Errorf("%s's receipt lists the call %+v", r.To, c)
			}
		}
	}
}

// checkTraceCommand runs baton trace for the trace and checks the lines
// that say what each agent and the chain spent.
func (mc *modelChain) checkTraceCommand(t *testing.T, trace string, recs []record.Record) {
	t.Helper()
	out, err := mc.tp.peer.baton("trace", trace, "--admin", mc.admin)
	if err != nil {
		t.Fatalf("baton trace %s: %v\n%s", trace, err, out)
	}
	t.Logf("baton trace %s:\n%s", trace, out)
	agents, chain := records.Spend(recs)
	if chain == nil {
		t.Fatal("no spend in the trace")
	}
	// Each line whole: its cost unknown only when every call's usage was.
	line := func(who string, s record.ModelSummary) string {
		l := fmt.Sprintf("\n  %-16s %d call(s), %d in + %d out tokens", who, s.Calls, s.InputTokens, s.OutputTokens)
		switch {
		case s.UnknownUsage == s.Calls:
			l += fmt.Sprintf(", cost unknown (%d with usage unknown)", s.UnknownUsage)
		case s.UnknownUsage > 0:
			l += fmt.Sprintf(", $%.6f (%d with usage unknown)", s.CostUSD, s.UnknownUsage)
		default:
			l += fmt.Sprintf(", $%.6f", s.CostUSD)
		}
		return l + "\n"
	}
	_, after, ok := strings.Cut(out, "\nmodel calls\n")
	if !ok {
		t.Fatalf("baton trace prints no model calls:\n%s", out)
	}
	after = "\n" + after
	for _, a := range agents {
		if !strings.Contains(after, line(a.Agent, a.ModelSummary)) {
			t.Errorf("baton trace: no line %q", line(a.Agent, a.ModelSummary))
		}
	}
	if !strings.Contains(after, line("chain", *chain)) {
		t.Errorf("baton trace: no line %q", line("chain", *chain))
	}
	if want := fmt.Sprintf("\n  budget           %d tokens (", modelChainBudget); !strings.Contains(after, want) {
		t.Errorf("baton trace: no line %q", want)
	}
	// The chain's count in the store, which B's, C's and D's Batons added
	// to: every call that went out, and the tokens their answers reported
	// (a call whose usage went unreported adds none: its tokens are not
	// known).
	if chain.Budget == nil || len(chain.Budget.Chain) != 32 {
		t.Fatalf("the chain's budget %+v names no chain", chain.Budget)
	}
	show, err := mc.tp.peer.baton("budget", "show", chain.Budget.Chain, "--admin", mc.admin)
	want := fmt.Sprintf("chain %s: %d tokens, $%.4f in %d model calls that went out\n", chain.Budget.Chain,
		chain.InputTokens+chain.OutputTokens, chain.CostUSD, chain.Calls)
	if err != nil || show != want {
		t.Errorf("baton budget show: %v\n%s; want %q", err, show, want)
	}
}

// checkSpans checks the model calls' spans the Batons exported: one per
// call the server billed, each a CLIENT span with the GenAI attributes of
// its call, in the trace, the child of its handling's ingress span.
func (mc *modelChain) checkSpans(t *testing.T, rcv *otlpReceiver, trace string, recs []record.Record) {
	t.Helper()
	const name = "chat gpt-4.1-mini"
	total := 0
	for _, a := range []string{"b", "c", "d"} {
		total += mc.llm.billOf(mc.keys[a]).calls
	}
	// The receipts' server spans end when their handlings do, after the
	// model calls' spans: wait for both.
	servers := map[string]bool{}
	for _, r := range recs {
		if r.Side == record.Ingress {
			servers[r.SpanID] = true
		}
	}
	spans := rcv.await(trace, 15*time.Second, func(spans []otlpSpan) bool {
		n, found := 0, 0
		for _, s := range spans {
			if s.GetName() == name {
				n++
			}
			if servers[s.id()] {
				found++
			}
		}
		return n >= total && found >= len(servers)
	})
	byID := map[string]otlpSpan{}
	byAgent := map[string][]otlpSpan{}
	for _, s := range spans {
		byID[s.id()] = s
		if s.GetName() == name {
			byAgent[s.agent] = append(byAgent[s.agent], s)
		}
	}
	receipts := map[string]record.Record{}
	for _, r := range recs {
		if r.Side == record.Ingress {
			receipts[r.To] = r
		}
	}
	for _, a := range []string{"b", "c", "d"} {
		billed, got := mc.llm.billed(mc.keys[a]), byAgent[a]
		if len(got) != len(billed) {
			t.Errorf("%s's Baton exported %d %q span(s) in the trace; the server billed %d call(s)", a, len(got), name, len(billed))
			continue
		}
		sort.Slice(got, func(i, j int) bool { return got[i].GetStartTimeUnixNano() < got[j].GetStartTimeUnixNano() })
		rc := receipts[a]
		server, ok := byID[rc.SpanID]
		if !ok || server.GetKind().String() != "SPAN_KIND_SERVER" || server.agent != a {
			t.Errorf("%s's receipt names span %s; exported: %v", a, rc.SpanID, ok && server.GetKind().String() == "SPAN_KIND_SERVER")
		}
		for i, s := range got {
			b := billed[i]
			want := map[string]string{
				"gen_ai.operation.name":          "chat",
				"gen_ai.provider.name":           "openai",
				"gen_ai.request.model":           "gpt-4.1-mini",
				"gen_ai.response.model":          "gpt-4.1-mini-2025-04-14",
				"gen_ai.response.finish_reasons": "stop",
				"server.address":                 agentsPeerIP4,
				"server.port":                    llmPort,
			}
			if b.reported {
				want["gen_ai.usage.input_tokens"] = fmt.Sprint(b.in)
				want["gen_ai.usage.output_tokens"] = fmt.Sprint(b.out)
				want["baton.genai.usage"] = "reported"
			} else {
				want["baton.genai.usage"] = "unknown"
			}
			for k, v := range want {
				if got := s.attr(k); got != v {
					t.Errorf("%s's call %d: span %q has %s = %q, want %q", a, i+1, s.GetName(), k, got, v)
				}
			}
			if !b.reported && (s.hasAttr("gen_ai.usage.input_tokens") || s.hasAttr("gen_ai.usage.output_tokens")) {
				t.Errorf("%s's call %d reported no usage, but its span says %s in + %s out tokens", a, i+1,
					s.attr("gen_ai.usage.input_tokens"), s.attr("gen_ai.usage.output_tokens"))
			}
			if b.stream && s.attr("baton.genai.time_to_first_token_ms") == "" {
				t.Errorf("%s's streamed call %d has no time to first token", a, i+1)
			}
			if s.GetKind().String() != "SPAN_KIND_CLIENT" || s.parent() != rc.SpanID {
				t.Errorf("%s's call %d: a %s span, parent %s; want a CLIENT span, child of its handling's ingress span %s",
					a, i+1, s.GetKind(), s.parent(), rc.SpanID)
			}
		}
	}
}

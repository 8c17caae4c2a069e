package intercept_test

import (
	"bufio"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
)

// TestAgentsJSLineage runs the chain A → B → {C, then D} with agents as
// they are written, B serving several requests at once and forwarding no
// trace context (docs/resume.md#lineage): b.mjs, an OpenAI Agents SDK run
// whose tools call C and D with the A2A JS SDK's client, its model
// through a base-URL route on its Baton, the model journaled; C and D
// leaf.mjs, D failing the first time it is asked each thing. B's pod is
// intercepted transparently; the Batons run on the shipped defaults but
// for the topology. A sends every request at once, then re-sends every one
// with the Idempotency-Key its answer gave back.
//
// With requests that differ (in many words, or in one: an account number),
// blocking or streamed (SendStreamingMessage from A, the model's answers
// streamed to B), the promise holds as for one request at a time: after
// the failed round and the re-send, C ran once per request, D completed
// once per request, and the model server answered no call twice. Every
// answer A got, every event of a stream, is its own request's. B's
// handoffs are tied to the handling they served by lineage, each record
// saying why.
//
// Where lineage cannot tell (identical requests; an agent whose
// instructions list every request it was given), nothing is tied wrongly:
// identical requests are tied to none, and each gets a right answer; the
// agent with a shared memory gets its own answers, C and D book each
// request's own text, and a handoff is never recorded under another
// request's handling.
func TestAgentsJSLineage(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tp := startAgentsTopo(t)
	server := tp.startLLM(t, &llm{})
	t.Logf("namespaces, Redis and the model up in %v", time.Since(start).Round(time.Millisecond))
	distinct := func(n int) []string {
		venues := []string{"lakeside lodge", "harbour hall", "mountain inn", "city loft"}
		tasks := make([]string, n)
		for i := range tasks {
			tasks[i] = fmt.Sprintf("reserve the %s for team %s on day %d [%s]", venues[i%len(venues)], teamName(i), 100+i, randHex(3))
		}
		return tasks
	}
	accounts := func(n int) []string {
		tasks := make([]string, n)
		for i := range tasks {
			tasks[i] = fmt.Sprintf("pay the March invoice of Acme Corp from account DE44%04d and tell finance", 5000+i)
		}
		return tasks
	}
	for _, tc := range []lineageCase{
		{name: "4 at once", tasks: distinct(4), exact: true},
		{name: "16 at once", tasks: distinct(16), exact: true},
		{name: "4 at once, streamed", tasks: distinct(4), stream: true, exact: true},
		{name: "16 at once, streamed", tasks: distinct(16), stream: true, exact: true},
		{name: "one token apart", tasks: accounts(6), exact: true},
		{name: "identical", tasks: slices.Repeat([]string{"reserve the lakeside lodge for the offsite [" + randHex(3) + "]"}, 4)},
		{name: "shared memory", tasks: distinct(4), memory: true},
	} {
		t.Run(tc.name, func(t *testing.T) { tp.lineageRun(t, server, tc) })
	}
	t.Logf("TestAgentsJSLineage took %v", time.Since(start).Round(time.Millisecond))
}

func teamName(i int) string {
	names := []string{"aurora", "basalt", "cedar", "delta", "ember", "fjord", "granite", "heron",
		"indigo", "juniper", "kestrel", "lumen", "meadow", "nimbus", "onyx", "pine"}
	return names[i%len(names)]
}

// lineageCase is one run: the tasks A sends at once; stream sends them as
// SendStreamingMessage and has B's model stream; memory gives B a memory
// of every task across requests; exact says every request differs enough
// that every call must be tied (and nothing run or paid twice).
type lineageCase struct {
	name                  string
	tasks                 []string
	stream, memory, exact bool
}

// gather holds the model's answers to the first two steps of every run
// until all n runs have reached the step: every request is in flight at
// once when B calls C, and when it calls the model after C answered.
type gather struct {
	n     int
	mu    sync.Mutex
	steps map[int]*gatherStep
}

type gatherStep struct {
	k   int
	all chan struct{}
}

func (g *gather) hold(_ string, step int) {
	if step > 1 {
		return
	}
	g.mu.Lock()
	s := g.steps[step]
	if s == nil {
		s = &gatherStep{all: make(chan struct{})}
		g.steps[step] = s
	}
	if s.k++; s.k == g.n {
		close(s.all)
	}
	g.mu.Unlock()
	select {
	case <-s.all:
	case <-time.After(30 * time.Second): // the test fails on what it sees then
	}
}

// startLineageChain starts C and D, B's Baton (the model on a base-URL
// route, journaled) and B's agent, and A's Baton, on the shipped defaults
// but for the topology; B's agent bills the model with key.
func (tp *agentsTopo) startLineageChain(t *testing.T, s *llmServer, tc lineageCase, key string) *chain {
	t.Helper()
	peerURL := func(port string) string { return "http://" + hostPort(agentsPeerIP4, port) }
	ch := &chain{tp: tp, a: tp.peer.client(), admin: aAdmin}
	ch.a.Timeout = 2 * time.Minute
	ch.c = tp.startAgent(t, tp.peer, "c", agentsCPort, []string{tp.node, "leaf.mjs"},
		"AGENT_NAME=c", "PUBLIC_URL="+peerURL(agentsCPort)+"/")
	ch.d = tp.startAgent(t, tp.peer, "d", agentsDPort, []string{tp.node, "leaf.mjs"},
		"AGENT_NAME=d", "PUBLIC_URL="+peerURL(agentsDPort)+"/", "FAIL_ONCE=1")

	prefix := "lineage-" + randHex(6) + ":"
	store := func(host string) string {
		return fmt.Sprintf("store: {redis: {url: \"redis://%s/0\", prefix: %q}}\n", hostPort(host, agentsRedisPort), prefix)
	}
	leaf := func(name, port, base string) string {
		return "agent: " + name + "\nupstream: http://127.0.0.1:" + port + "\n" +
			"listen: {egress: 127.0.0.1:" + base + "1, ingress: \"0.0.0.0:" + base + "6\", admin: 127.0.0.1:" + base + "0}\n" +
			store("127.0.0.1") + "edges: [{from: b}]\n"
	}
	tp.startBatonAt(t, tp.peer, "c", "127.0.0.1:15100", leaf("c", agentsCPort, "1510"))
	tp.startBatonAt(t, tp.peer, "d", "127.0.0.1:15200", leaf("d", agentsDPort, "1520"))
	tp.startBatonAt(t, tp.agent, "b", bAdmin, "agent: b\nupstream: http://127.0.0.1:"+agentsBPort+"\n"+
		"listen: {egress: 127.0.0.1:15001, ingress: \"[::]:15006\", admin: "+bAdmin+"}\n"+
		"intercept: {mode: transparent}\n"+store(agentsPeerIP4)+
		"peers:\n"+
		"  c: {url: \""+peerURL("15106")+"\", ports: ["+agentsCPort+"]}\n"+
		"  d: {url: \""+peerURL("15206")+"\", ports: ["+agentsDPort+"]}\n"+
		"external: {ca_file: "+s.caFile+", routes: [{name: llm, url: \"https://"+s.host+"/v1/\", api: openai}]}\n"+
		"journal: {hosts: [\""+s.host+"\"]}\n"+
		"edges: [{from: a}, {to: c}, {to: d}]\n")
	env := []string{
		"PUBLIC_URL=http://" + hostPort(agentsAgentIP4, agentsBPort) + "/",
		"C_URL=" + peerURL(agentsCPort), "D_URL=" + peerURL(agentsDPort),
		"OPENAI_BASE_URL=http://127.0.0.1:15001/llm/v1", "OPENAI_API_KEY=" + key,
		"OPENAI_DEFAULT_MODEL=gpt-4.1-mini", "OPENAI_AGENTS_DISABLE_TRACING=1",
	}
	if tc.stream {
		env = append(env, "STREAM=1", "A2A_STREAMING=1")
	}
	if tc.memory {
		env = append(env, "SHARED_MEMORY=1")
	}
	ch.b = tp.startAgent(t, tp.agent, "b", agentsBPort, []string{tp.node, "b.mjs"}, env...)
	tp.startBatonAt(t, tp.peer, "a", aAdmin, "agent: a\nupstream: http://127.0.0.1:9\n"+
		"listen: {egress: "+aEgress+", ingress: 127.0.0.1:15306, admin: "+aAdmin+"}\n"+store("127.0.0.1")+
		"peers:\n  b: {url: \"http://"+hostPort(agentsAgentIP4, agentsBPort)+"\"}\n"+
		"edges: [{to: b}]\n")
	return ch
}

// lineageRun sends tc's tasks at once, then re-sends each with the key it
// got back, and checks the promise.
func (tp *agentsTopo) lineageRun(t *testing.T, s *llmServer, tc lineageCase) {
	start := time.Now()
	key := "sk-b-" + randHex(8)
	ch := tp.startLineageChain(t, s, tc, key)
	t.Logf("agents and Batons up in %v", time.Since(start).Round(time.Millisecond))
	n := len(tc.tasks)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "msg-" + randHex(8)
	}
	// round sends every task at once, with the keys given, and returns the
	// answers and the traces they were sent in.
	round := func(keys []string) ([]a2aAnswer, []string) {
		answers, traces := make([]a2aAnswer, n), make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			traces[i] = randHex(16)
			wg.Go(func() {
				m := a2aSend{msgID: ids[i], task: tc.tasks[i], trace: traces[i], stream: tc.stream}
				if keys != nil {
					m.key = keys[i]
				}
				ans, err := ch.sendA2A(m)
				if err != nil {
					t.Errorf("request %d: %v", i+1, err)
				}
				answers[i] = ans
			})
		}
		wg.Wait()
		return answers, traces
	}

	// The first round: every request in flight at once when B calls C and
	// the model after it.
	s.holdWith((&gather{n: n, steps: map[int]*gatherStep{}}).hold)
	roundStart := time.Now()
	first, traces1 := round(nil)
	s.holdWith(nil)
	t.Logf("the first round took %v", time.Since(roundStart).Round(time.Millisecond))
	keys := make([]string, n)
	failed := 0
	for i, ans := range first {
		t.Logf("request %d, first send: %v", i+1, ans)
		tc.checkOwn(t, "the first send", i, ans)
		if keys[i] = ans.header.Get("Idempotency-Key"); keys[i] == "" {
			t.Errorf("request %d: the answer gave back no Idempotency-Key: %v", i+1, ans)
		}
		if !ans.ok() {
			failed++
		}
		if !ans.ok() && !strings.Contains(ans.text, "could not do") {
			t.Errorf("request %d failed, not by D's failure: %v", i+1, ans)
		}
	}
	wantFailed := n // D fails the first time it is asked each thing
	if !tc.exact && !tc.memory {
		wantFailed = 1 // identical requests ask D one thing
	}
	if failed != wantFailed {
		t.Errorf("the first round: %d of %d requests failed; want %d (D's first task)", failed, n, wantFailed)
	}
	b, c, d := ch.b.mustCounts(t), ch.c.mustCounts(t), ch.d.mustCounts(t)
	if b.Runs != n || c.Runs != n || d.Runs != n {
		t.Errorf("after the first round B ran %d times, C %d, D %d: want %d each (a retry re-ran an agent)", b.Runs, c.Runs, d.Runs, n)
	}
	paid1 := len(s.billed(key))

	// The re-send: every request, with the key its answer gave back.
	roundStart = time.Now()
	again, traces2 := round(keys)
	t.Logf("the re-send took %v", time.Since(roundStart).Round(time.Millisecond))
	for i, ans := range again {
		t.Logf("request %d, re-send: %v", i+1, ans)
		tc.checkOwn(t, "the re-send", i, ans)
		if !ans.ok() || ans.text != "done: "+tc.tasks[i] {
			t.Errorf("request %d, re-sent: %v; want its own done", i+1, ans)
		}
	}
	b, c, d = ch.b.mustCounts(t), ch.c.mustCounts(t), ch.d.mustCounts(t)
	calls := s.billed(key)
	twice := 0
	paid := map[string]int{}
	for _, call := range calls {
		k := fmt.Sprintf("step %d of %q", call.step, call.task)
		if paid[k]++; paid[k] == 2 {
			twice++
		}
	}
	t.Logf("B ran %d times, C %d, D %d (%d completed); the model was called %d times (%d in the first round), %d call(s) twice",
		b.Runs, c.Runs, d.Runs, d.Completed, len(calls), paid1, twice)
	for i, task := range tc.tasks {
		ct, dt := c.ByText["book #1: "+task], d.ByText["notify #2: "+task]
		switch {
		case tc.exact && (ct.Runs != 1 || dt.Completed != 1):
			t.Errorf("request %d: C ran %d times for it and D completed it %d times; want once each", i+1, ct.Runs, dt.Completed)
		case tc.memory && (ct.Runs < 1 || dt.Completed != 1):
			t.Errorf("request %d: C ran %d times for it and D completed it %d times; want its own booking, and D once", i+1, ct.Runs, dt.Completed)
		}
	}
	for text := range c.ByText {
		if !slices.ContainsFunc(tc.tasks, func(task string) bool { return text == "book #1: "+task }) {
			t.Errorf("C booked what no request asked for: %q", text)
		}
	}
	switch {
	case tc.exact:
		if c.Runs != n || d.Completed != n || len(calls) != 3*n || twice != 0 {
			t.Errorf("C ran %d times, D completed %d tasks, the model answered %d calls (%d twice), for %d requests; want %d, %d, %d and none",
				c.Runs, d.Completed, len(calls), twice, n, n, n, 3*n)
		}
	case tc.memory:
		if d.Completed != n {
			t.Errorf("D completed %d tasks for %d requests", d.Completed, n)
		}
	default:
		// Identical requests tie nothing: the failed one's re-run gets
		// new keys, and runs C again; D completes each request once.
		if c.Runs > n+1 || d.Completed != n {
			t.Errorf("C ran %d times and D completed %d tasks for %d identical requests; want at most %d and %d", c.Runs, d.Completed, n, n+1, n)
		}
	}
	checkStart := time.Now()
	tp.checkLineageRecords(t, ch, tc, traces1, traces2)
	t.Logf("the records checked in %v", time.Since(checkStart).Round(time.Millisecond))
}

// checkOwn checks that an answer, and every event of a stream, names its
// own request's task and no other's.
func (tc lineageCase) checkOwn(t *testing.T, what string, i int, ans a2aAnswer) {
	t.Helper()
	if tc.stream && len(ans.events) == 0 {
		t.Errorf("%s of request %d: not a stream of events: %v", what, i+1, ans)
	}
	texts := append([]string{ans.text}, ans.events...)
	if !strings.Contains(ans.text, tc.tasks[i]) {
		t.Errorf("%s of request %d: the answer does not name its task %q: %v", what, i+1, tc.tasks[i], ans)
	}
	for _, text := range texts {
		for j, other := range tc.tasks {
			if other != tc.tasks[i] && strings.Contains(text, other) {
				t.Errorf("%s of request %d (%q) was answered with request %d's: %q", what, i+1, tc.tasks[i], j+1, text)
			}
		}
	}
}

// lineageEvidence is what a record of a handoff tied by lineage says.
var lineageEvidence = regexp.MustCompile(`^(\d+) phrase\(s\) only handling (\S+) read, most from (its task|the answer of \S+)$`)

// checkLineageRecords checks B's handoffs in the requests' traces: each is
// its own request's (the handoff quotes the task of the handling it is
// recorded under), tied by lineage (with evidence naming that handling)
// or as the one in flight, and keyed by its position; B's metrics agree.
func (tp *agentsTopo) checkLineageRecords(t *testing.T, ch *chain, tc lineageCase, traces1, traces2 []string) {
	t.Helper()
	tied := map[string]int{}
	for round, traces := range [][]string{traces1, traces2} {
		for i, trace := range traces {
			// The records are written in the background: wait (at most
			// settle) for A's handoff to B and, where B's calls must be
			// tied, B's receipt and handoffs to C and D, none of them
			// still being sent.
			var recs []record.Record
			for deadline := time.Now().Add(settle); ; time.Sleep(20 * time.Millisecond) {
				var err error
				if recs, err = ch.records(trace); err != nil {
					t.Fatal(err)
				}
				_, ok := receipt(recs)
				done := !tc.exact || ok && len(sends(recs, "c")) > 0 && len(sends(recs, "d")) > 0
				sent := false // A's handoff to B is recorded
				for _, r := range recs {
					done = done && r.State != record.Sent
					sent = sent || r.Side == record.Egress && r.To == "b"
				}
				done = done && sent
				if done || time.Now().After(deadline) {
					break
				}
			}
			rc, ok := receipt(recs)
			if !ok {
				if round == 0 || !tc.exact {
					continue // answered from B's dedupe window: not handled again
				}
				t.Errorf("round %d, request %d: no receipt of B in its trace:\n%s", round+1, i+1, describe(recs))
				continue
			}
			if rc.Models != nil && tc.exact && round == 1 && (rc.Models.Calls != 3 || rc.Models.JournalHits != 2) {
				t.Errorf("request %d, re-sent: B's receipt lists %d model call(s), %d from the journal; want 3 and 2", i+1, rc.Models.Calls, rc.Models.JournalHits)
			}
			for _, peer := range []string{"c", "d"} {
				if tc.exact && len(sends(recs, peer)) != 1 {
					t.Errorf("round %d, request %d: %d handoff(s) of B to %s in its trace; want 1:\n%s", round+1, i+1, len(sends(recs, peer)), peer, describe(recs))
				}
				for _, r := range sends(recs, peer) {
					tied[r.Correlation]++
					full, err := ch.record(r.ID, settle, record.Delivered, record.Dead)
					if err != nil {
						t.Fatal(err)
					}
					if body := requestBody(full); !strings.Contains(body, tc.tasks[i]) || r.ParentID != rc.ID {
						t.Errorf("round %d, request %d (%q): B→%s %s, under handling %s (the receipt is %s), sent %s",
							round+1, i+1, tc.tasks[i], peer, r.ID, r.ParentID, rc.ID, body)
					}
					switch r.Correlation {
					case record.CorrelatedByLineage:
						m := lineageEvidence.FindStringSubmatch(r.CorrelationEvidence)
						if m == nil || m[2] != rc.ID {
							t.Errorf("round %d, request %d: B→%s %s tied by lineage says %q; want the phrases of handling %s",
								round+1, i+1, peer, r.ID, r.CorrelationEvidence, rc.ID)
						}
					case record.CorrelatedByInFlight:
					default:
						t.Errorf("round %d, request %d: B→%s %s has correlation %q", round+1, i+1, peer, r.ID, r.Correlation)
					}
					if r.KeySource != record.KeyFromPosition {
						t.Errorf("round %d, request %d: B→%s %s has key_source %q", round+1, i+1, peer, r.ID, r.KeySource)
					}
					if round == 0 && peer == "c" && tc.exact && r.Correlation != record.CorrelatedByLineage {
						t.Errorf("request %d: B→c %s, made with every request in flight, has correlation %q; want lineage", i+1, r.ID, r.Correlation)
					}
					if r.Correlation == record.CorrelatedByLineage && i == 0 && peer == "c" {
						t.Logf("round %d: B→c %s: correlation %q, correlation_evidence %q", round+1, r.ID, r.Correlation, r.CorrelationEvidence)
					}
				}
			}
		}
	}
	lineage := tp.correlationCount(t, record.CorrelatedByLineage)
	t.Logf("B's handoffs in the requests' traces, by correlation: %v; B's baton_handoff_correlation_total{correlation=\"lineage\"} %d", tied, lineage)
	switch {
	case !tc.exact && !tc.memory:
		if lineage != 0 || tied[record.CorrelatedByLineage] != 0 {
			t.Errorf("identical requests: %d handoff(s) tied by lineage (%d counted); want none", tied[record.CorrelatedByLineage], lineage)
		}
	case lineage < len(tc.tasks) || tied[record.CorrelatedByLineage] < len(tc.tasks):
		t.Errorf("%d handoff(s) of B recorded as tied by lineage (%d counted); want at least %d", tied[record.CorrelatedByLineage], lineage, len(tc.tasks))
	}
}

// correlationCount is B's baton_handoff_correlation_total for how, over
// its edges.
func (tp *agentsTopo) correlationCount(t *testing.T, how string) int {
	t.Helper()
	resp, err := tp.agent.client().Get("http://" + bAdmin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "baton_handoff_correlation_total{") || !strings.Contains(line, `correlation="`+how+`"`) ||
			!strings.Contains(line, `side="egress"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			total += int(v)
		}
	}
	return total
}

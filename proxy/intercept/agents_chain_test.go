package intercept_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
)

// chain is one run's A → B → {C, then D}: fresh agents and Batons on a
// fresh key prefix of the shared Redis.
type chain struct {
	tp      *agentsTopo
	b, c, d *nodeAgent
	// a is A's agent (the test): a client in the peer namespace that calls
	// A's egress. admin is A's admin listener, where records are read (the
	// Batons share one store, so any of them shows the whole chain).
	a     *http.Client
	admin string
}

// How B's agent runs.
type bRuntime int

const (
	bPlain bRuntime = iota // node b.mjs
	bOTel                  // zero-code OpenTelemetry by environment only
)

// otelEnv instruments a Node agent with no change to its code, as the
// OpenTelemetry Operator does: the auto-instrumentations registered by a
// preloaded module, W3C trace context and baggage propagated, nothing
// exported. `baton exec --instrument nodejs` sets the same, and is used
// instead when the baton binary has it.
var otelEnv = []string{
	"NODE_OPTIONS=--require @opentelemetry/auto-instrumentations-node/register",
	"OTEL_PROPAGATORS=tracecontext,baggage",
	"OTEL_TRACES_EXPORTER=none",
	"OTEL_METRICS_EXPORTER=none",
	"OTEL_LOGS_EXPORTER=none",
}

const (
	aEgress = "127.0.0.1:15301"
	aAdmin  = "127.0.0.1:15300"
	bAdmin  = "127.0.0.1:15000"
)

// startChain starts C, D and B's agents and the four Batons. Only the
// shipped defaults are used but for what the topology needs: listeners,
// the store, peers, edges, B's interception, and the model allowed and
// journaled at B's Baton.
func (tp *agentsTopo) startChain(t *testing.T, rt bRuntime) *chain {
	t.Helper()
	peerURL := func(port string) string { return "http://" + hostPort(agentsPeerIP4, port) }
	ch := &chain{tp: tp, a: tp.peer.client(), admin: aAdmin}
	ch.a.Timeout = 2 * time.Minute

	ch.c = tp.startAgent(t, tp.peer, "c", agentsCPort, []string{tp.node, "leaf.mjs"},
		"AGENT_NAME=c", "PUBLIC_URL="+peerURL(agentsCPort)+"/")
	ch.d = tp.startAgent(t, tp.peer, "d", agentsDPort, []string{tp.node, "leaf.mjs"},
		"AGENT_NAME=d", "PUBLIC_URL="+peerURL(agentsDPort)+"/", "FAIL_ONCE=1")
	env := []string{
		"PUBLIC_URL=http://" + hostPort(agentsAgentIP4, agentsBPort) + "/",
		"C_URL=" + peerURL(agentsCPort), "D_URL=" + peerURL(agentsDPort),
		"OPENAI_BASE_URL=" + peerURL(agentsModelPort) + "/v1", "OPENAI_API_KEY=sk-agents-test",
		"OPENAI_DEFAULT_MODEL=gpt-4.1-mini", "OPENAI_AGENTS_DISABLE_TRACING=1",
	}
	argv := []string{tp.node, "b.mjs"}
	if rt == bOTel {
		if out, err := run(bin, "exec", "--help"); err == nil && strings.Contains(out, "--instrument") {
			// As a user would: baton exec sets what otelEnv does.
			argv = append([]string{bin, "exec", "--agent", "b", "--instrument", "nodejs", "--"}, argv...)
			t.Logf("B's agent runs as baton exec --agent b --instrument nodejs -- node b.mjs")
		} else {
			env = append(env, otelEnv...)
			t.Logf("B's agent runs as node b.mjs with %s", strings.Join(otelEnv, " "))
		}
	}
	ch.b = tp.startAgent(t, tp.agent, "b", agentsBPort, argv, env...)

	prefix := "agents-" + randHex(6) + ":"
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
	model := hostPort(agentsPeerIP4, agentsModelPort)
	tp.startBatonAt(t, tp.agent, "b", bAdmin, "agent: b\nupstream: http://127.0.0.1:"+agentsBPort+"\n"+
		"listen: {egress: 127.0.0.1:15001, ingress: \"[::]:15006\", admin: "+bAdmin+"}\n"+
		"intercept: {mode: transparent}\n"+store(agentsPeerIP4)+
		"peers:\n"+
		"  c: {url: \""+peerURL("15106")+"\", ports: ["+agentsCPort+"]}\n"+
		"  d: {url: \""+peerURL("15206")+"\", ports: ["+agentsDPort+"]}\n"+
		"external: {allow: [\""+model+"\"]}\n"+
		"journal: {hosts: [\""+model+"\"]}\n"+
		"edges: [{from: a}, {to: c}, {to: d}]\n")
	tp.startBatonAt(t, tp.peer, "a", aAdmin, "agent: a\nupstream: http://127.0.0.1:9\n"+
		"listen: {egress: "+aEgress+", ingress: 127.0.0.1:15306, admin: "+aAdmin+"}\n"+store("127.0.0.1")+
		"peers:\n  b: {url: \"http://"+hostPort(agentsAgentIP4, agentsBPort)+"\"}\n"+
		"edges: [{to: b}]\n")
	return ch
}

// a2aAnswer is an answer to A's SendMessage, as A's agent got it.
type a2aAnswer struct {
	status int
	header http.Header
	body   string
	// kind is "message", "task" or "error"; state the task's state
	// (TASK_STATE_COMPLETED, TASK_STATE_FAILED, …); text what it says.
	kind, state, text string
	// events are what each event of a stream said.
	events []string
}

// ok says whether the chain succeeded: a message, or a completed task.
func (a a2aAnswer) ok() bool {
	return a.status == 200 && (a.kind == "message" || a.state == "TASK_STATE_COMPLETED")
}

func (a a2aAnswer) String() string {
	s := fmt.Sprintf("%d %s", a.status, a.kind)
	if a.state != "" {
		s += " " + a.state
	}
	if dl := a.header.Get("Baton-Dead-Letter"); dl != "" {
		s += " (Baton-Dead-Letter: " + dl + ")"
	}
	return s + ": " + a.text
}

// send is A's agent sending task as an A2A v1.0 SendMessage (JSON-RPC, as
// @a2a-js/sdk 1.3.0 speaks it) with message id msgID, to B by name through
// A's egress, in the trace given (A's agent is instrumented: it starts a
// trace per send).
func (ch *chain) send(msgID, task, trace string) (a2aAnswer, error) {
	return ch.sendA2A(a2aSend{msgID: msgID, task: task, trace: trace})
}

// a2aSend is one message A's agent sends B: its id and task, in trace;
// with key, it carries that Idempotency-Key (the one an earlier answer
// gave back); stream sends it as SendStreamingMessage.
type a2aSend struct {
	msgID, task, trace, key string
	stream                  bool
}

// sendA2A sends m to B through A's egress and reads the answer: for a
// stream, every event, the answer being what its last one says.
func (ch *chain) sendA2A(m a2aSend) (a2aAnswer, error) {
	method, accept := "SendMessage", "application/json"
	if m.stream {
		method, accept = "SendStreamingMessage", "text/event-stream"
	}
	rpc := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": map[string]any{
		"message": map[string]any{"messageId": m.msgID, "role": "ROLE_USER", "metadata": map[string]any{},
			"parts": []map[string]any{{"text": m.task, "mediaType": "text/plain"}}},
		"configuration": map[string]any{}, // the SDK's blocking default: nothing to say
		"metadata":      map[string]any{},
	}}
	body, _ := json.Marshal(rpc)
	req, _ := http.NewRequest(http.MethodPost, "http://"+aEgress+"/", bytes.NewReader(body))
	req.Host = "b"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Traceparent", "00-"+m.trace+"-"+randHex(8)+"-01")
	if m.key != "" {
		req.Header.Set("Idempotency-Key", m.key)
	}
	resp, err := ch.a.Do(req)
	if err != nil {
		return a2aAnswer{}, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return a2aAnswer{}, err
	}
	ans := a2aAnswer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		ans.kind, ans.state, ans.text = a2aResult(b)
		return ans, nil
	}
	for line := range strings.Lines(string(b)) {
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok {
			ans.kind, ans.state, ans.text = a2aResult([]byte(data))
			ans.events = append(ans.events, ans.text)
		}
	}
	if len(ans.events) == 0 {
		ans.kind, ans.text = "empty stream", tail(string(b), 5)
	}
	return ans, nil
}

// a2aResult reads one JSON-RPC answer of A2A v1.0 (or one event of a
// stream): its kind ("message", "task", "status", "error"), the task's
// state, and what it says.
func a2aResult(b []byte) (kind, state, text string) {
	type parts []struct {
		Text string `json:"text"`
	}
	join := func(p parts) string {
		var s []string
		for _, x := range p {
			s = append(s, x.Text)
		}
		return strings.Join(s, "\n")
	}
	type status struct {
		State   string `json:"state"`
		Message struct {
			Parts parts `json:"parts"`
		} `json:"message"`
	}
	var got struct {
		Result struct {
			Message *struct {
				Parts parts `json:"parts"`
			} `json:"message"`
			Task *struct {
				Status status `json:"status"`
			} `json:"task"`
			StatusUpdate *struct {
				Status status `json:"status"`
			} `json:"statusUpdate"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &got) != nil {
		return "not JSON-RPC", "", tail(string(b), 5)
	}
	switch r := got.Result; {
	case got.Error != nil:
		return "error", "", fmt.Sprintf("%d %s", got.Error.Code, got.Error.Message)
	case r.Message != nil:
		return "message", "", join(r.Message.Parts)
	case r.Task != nil:
		return "task", r.Task.Status.State, join(r.Task.Status.Message.Parts)
	case r.StatusUpdate != nil:
		return "task", r.StatusUpdate.Status.State, join(r.StatusUpdate.Status.Message.Parts)
	}
	return "unknown", "", tail(string(b), 5)
}

// records reads the records of a trace; none when the trace has none.
func (ch *chain) records(trace string) ([]record.Record, error) {
	var v struct {
		Records []record.Record `json:"records"`
	}
	err := getJSON(ch.a, "http://"+ch.admin+"/v1/traces/"+trace, &v)
	if err != nil && strings.Contains(err.Error(), "404") {
		return nil, nil
	}
	return v.Records, err
}

// settled reads the records of a trace once they are settled: the Batons
// write records in the background, so a record may lag the answer a
// little. It waits (at most wait) until no record is still being sent and
// done holds, and returns what there is then.
func (ch *chain) settled(trace string, wait time.Duration, done func([]record.Record) bool) ([]record.Record, error) {
	deadline := time.Now().Add(wait)
	for {
		recs, err := ch.records(trace)
		if err != nil || time.Now().After(deadline) {
			return recs, err
		}
		final := done(recs)
		for _, r := range recs {
			final = final && r.State != record.Sent && r.State != record.Failed && r.State != record.Replayed
		}
		if final {
			return recs, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// whole says a trace holds the whole chain: A's handoff to B, B's receipt,
// and B's SendMessage handoffs to C and D.
func whole(recs []record.Record) bool {
	_, got := receipt(recs)
	return got && len(sends(recs, "c")) > 0 && len(sends(recs, "d")) > 0
}

// record reads one record once it is settled in one of the states given
// (or, after wait, as it is).
func (ch *chain) record(id string, wait time.Duration, states ...record.State) (record.Record, error) {
	deadline := time.Now().Add(wait)
	for {
		var r record.Record
		err := getJSON(ch.a, "http://"+ch.admin+"/v1/records/"+id, &r)
		if err != nil || slices.Contains(states, r.State) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sends are B's egress records of its A2A SendMessage handoffs to peer,
// in the order they were made.
func sends(recs []record.Record, peer string) []record.Record {
	var out []record.Record
	for _, r := range recs {
		if r.Side == record.Egress && r.From == "b" && r.To == peer && strings.HasPrefix(r.Call, "SendMessage") {
			out = append(out, r)
		}
	}
	return out
}

// receipt is B's receipt of A's handoff in the trace, if there is one.
func receipt(recs []record.Record) (record.Record, bool) {
	for _, r := range recs {
		if r.Side == record.Ingress && r.To == "b" {
			return r, true
		}
	}
	return record.Record{}, false
}

// describe lists records one a line, for a failure message or a log.
func describe(recs []record.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  %s %s→%s %s %s %s %d attempts=%d key_source=%s position=%d correlation=%s",
			r.ID, r.From, r.To, r.Side, r.Call, r.State, r.Status, r.Attempts, r.KeySource, r.Position, r.Correlation)
		if r.StoppedAt != "" {
			b.WriteString(" stopped_at=" + r.StoppedAt)
		}
		if r.ResolvedBy != "" {
			b.WriteString(" resolved_by=" + r.ResolvedBy)
		}
		if j := r.Journal; j != nil {
			fmt.Fprintf(&b, " journal=%d hit(s)/%d miss(es)", j.Hits, j.Misses)
		}
		b.WriteString("\n")
	}
	return b.String()
}

package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// plannerModel is an OpenAI-compatible model for an LLM agent's plan: to a
// conversation that holds only the task it answers a call of the book
// tool with the task's words; to one that holds the booking, a call of the
// notify tool; its answers are the same for the same conversation. It
// counts the calls it answered.
type plannerModel struct{ calls atomic.Int64 }

func (m *plannerModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	m.calls.Add(1)
	task, booking := "", ""
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			task = msg.Content
		case "tool":
			booking = msg.Content
		}
	}
	args := map[string]string{"request": "book: " + task}
	name := "book"
	if booking != "" {
		name, args = "notify", map[string]string{"request": "notify the team: " + task + " is booked as " + booking}
	}
	a, _ := json.Marshal(args)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-x", "object": "chat.completion", "model": "gpt-4.1-mini",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{"role": "assistant",
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": string(a)}}}}}},
		"usage": map[string]int{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
}

// llmAgent is B as an LLM agent is written: for each task it asks the
// model, calls the tool the model chose (a handoff to c, then to d) with
// the arguments the model wrote, and hands the tool's answer back to the
// model. It forwards no trace context, and stamps every handoff's body with
// the time (a re-run's bodies differ); its prompts are the same each run. before and after, when set, are called as a
// run starts and once its calls are made.
type llmAgent struct {
	egress        atomic.Pointer[string]
	runs          atomic.Int64
	before, after func()
	// memory, when set, is what the agent remembers across requests: its
	// prompts quote every task it was given before this one's model call.
	memory *sharedMemory
}

// sharedMemory is an agent's memory across the requests it serves.
type sharedMemory struct {
	mu    sync.Mutex
	tasks []string
}

func (m *sharedMemory) note(task string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks = append(m.tasks, task)
	return strings.Join(m.tasks, "; ")
}

func (a *llmAgent) useEgress(addr string) { a.egress.Store(&addr) }

func (a *llmAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct{ Task string }
	json.NewDecoder(r.Body).Decode(&in)
	a.runs.Add(1)
	system := "You plan what a task needs."
	if a.memory != nil {
		a.memory.note(in.Task)
	}
	if a.before != nil {
		a.before()
	}
	if a.memory != nil {
		system += " Requests so far: " + a.memory.note("")
	}
	if a.after != nil {
		defer a.after()
	}
	post := func(host, path string, body any) (int, []byte) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+*a.egress.Load()+path, strings.NewReader(string(b)))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	msgs := []map[string]string{{"role": "system", "content": system},
		{"role": "user", "content": in.Task}}
	var answers []string
	for _, peer := range []string{"c", "d"} {
		st, answer := post("127.0.0.1", "/llm/v1/chat/completions", map[string]any{"model": "gpt-4.1-mini", "messages": msgs})
		var m struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
				}
			}
		}
		if st != 200 || json.Unmarshal(answer, &m) != nil || len(m.Choices) == 0 || len(m.Choices[0].Message.ToolCalls) == 0 {
			http.Error(w, fmt.Sprintf("the model: %d %s", st, answer), http.StatusBadGateway)
			return
		}
		var args struct{ Request string }
		json.Unmarshal([]byte(m.Choices[0].Message.ToolCalls[0].Function.Arguments), &args)
		st, result := post(peer, "/tool", map[string]any{"request": args.Request, "sent_at": time.Now().UnixNano()})
		if st != 200 {
			http.Error(w, fmt.Sprintf("%s answered %d: %s", peer, st, result), http.StatusBadGateway)
			return
		}
		answers = append(answers, string(result))
		msgs = append(msgs, map[string]string{"role": "tool", "content": string(result)})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"task": in.Task, "answers": answers})
}

// toolAgent is C or D: it books what it is asked (a side effect, counted
// per request text) and says what it booked; fail, when set, makes its
// first run answer 500.
type toolAgent struct {
	name  string
	fail  bool
	mu    sync.Mutex
	runs  int
	byReq map[string]int
}

func (a *toolAgent) useEgress(string) {}

func (a *toolAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct{ Request string }
	json.NewDecoder(r.Body).Decode(&in)
	a.mu.Lock()
	a.runs++
	first := a.runs == 1
	if a.byReq == nil {
		a.byReq = map[string]int{}
	}
	a.mu.Unlock()
	if a.fail && first {
		http.Error(w, "down for a moment", http.StatusInternalServerError)
		return
	}
	a.mu.Lock()
	a.byReq[in.Request]++
	n := a.runs
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"%s":"%s-%d","for":%q}`, a.name, strings.ToUpper(a.name), n, in.Request)
}

func (a *toolAgent) counts() (runs int, byReq map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.byReq {
		out[k] = v
	}
	return a.runs, out
}

// lineageChain is A → B → {C, then D} on one Redis: B an LLM agent serving
// n requests at once, forwarding no trace context, its model on a journaled
// route; D failing its first task.
func lineageChain(t *testing.T, tasks []string, memory bool) {
	t.Helper()
	n := len(tasks)
	store := sharedStore(t)
	model := &plannerModel{}
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)
	host := strings.TrimPrefix(ms.URL, "http://")
	c, d := &toolAgent{name: "c"}, &toolAgent{name: "d", fail: true}
	cB, dB := node(t, "c", c, "", store()), node(t, "d", d, "", store())
	// Every run of the first round is in flight from before its first call
	// until after its last.
	var arrived, finished atomic.Int64
	arrivedAll, finishedAll := make(chan struct{}), make(chan struct{})
	round1 := true
	var mu sync.Mutex
	barrier := func(k *atomic.Int64, all chan struct{}) func() {
		return func() {
			mu.Lock()
			wait := round1
			mu.Unlock()
			if !wait {
				return
			}
			if k.Add(1) == int64(n) {
				close(all)
			}
			select {
			case <-all:
			case <-time.After(20 * time.Second):
			}
		}
	}
	b := &llmAgent{before: barrier(&arrived, arrivedAll), after: barrier(&finished, finishedAll)}
	if memory {
		b.memory = &sharedMemory{}
	}
	// Ties are exact, or missed: with identical requests, or prompts that
	// quote every request, some calls are tied to none and run again.
	exact := !memory && !duplicateTask(tasks, tasks[0])
	bB := node(t, "b", b, peerYAML(map[string]string{"c": cB.IngressAddr(), "d": dB.IngressAddr()})+
		"external: {routes: [{name: llm, url: \""+ms.URL+"/v1/\", api: openai}]}\njournal: {hosts: [\""+host+"\"]}\n", store())
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\n"+peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

	var deadLetter atomic.Pointer[string]
	sendAll := func(keys []string) ([]int, []string, []string) {
		statuses, answers, gotKeys := make([]int, n), make([]string, n), make([]string, n)
		var wg sync.WaitGroup
		for i, task := range tasks {
			wg.Go(func() {
				h := http.Header{"Content-Type": {"application/json"}}
				if keys != nil {
					h.Set("Idempotency-Key", keys[i])
				}
				body, _ := json.Marshal(map[string]string{"task": task})
				resp := send(t, aB.EgressAddr(), "b", "POST", "/work", string(body), h)
				out, _ := io.ReadAll(resp.Body)
				statuses[i], answers[i], gotKeys[i] = resp.StatusCode, string(out), resp.Header.Get("Idempotency-Key")
				if dl := resp.Header.Get("Baton-Dead-Letter"); dl != "" {
					deadLetter.Store(&dl)
				}
			})
		}
		wg.Wait()
		return statuses, answers, gotKeys
	}
	statuses, _, keys := sendAll(nil)
	failed := 0
	for _, st := range statuses {
		if st != http.StatusOK {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("first round: %v; want one failure (D's first task)", statuses)
	}
	if m := model.calls.Load(); m != int64(2*n) {
		t.Fatalf("the model answered %d calls in the first round, want %d", m, 2*n)
	}
	round1Calls := model.calls.Load()
	mu.Lock()
	round1 = false
	mu.Unlock()
	dl := deadLetter.Load()
	if dl == nil {
		t.Fatal("the failed request's answer names no dead letter")
	}
	failedTrace, _, _ := strings.Cut(*dl, ".")

	statuses, answers, _ := sendAll(keys)
	for i, st := range statuses {
		if st != http.StatusOK {
			t.Fatalf("re-sent %d: %d %s", i, st, answers[i])
		}
		// Every answer is its own request's, and names no other's.
		for j, other := range tasks {
			if j != i && other != tasks[i] && strings.Contains(answers[i], other) {
				t.Errorf("request %d (%q) was answered with request %d's: %s", i, tasks[i], j, answers[i])
			}
		}
		if !strings.Contains(answers[i], "book: "+tasks[i]) {
			t.Errorf("request %d (%q) got %s", i, tasks[i], answers[i])
		}
	}
	cRuns, cByReq := c.counts()
	_, dByReq := d.counts()
	completed := 0
	for _, k := range dByReq {
		completed += k
	}
	for req := range cByReq {
		if !slices.ContainsFunc(tasks, func(task string) bool { return req == "book: "+task }) {
			t.Errorf("C booked something no request asked for: %q", req)
		}
	}
	if exact {
		if cRuns != n {
			t.Errorf("C ran %d times for %d requests; want once each: %v", cRuns, n, cByReq)
		}
		for _, task := range tasks {
			if k := cByReq["book: "+task]; k != 1 {
				t.Errorf("C booked %q %d times", task, k)
			}
		}
		if completed != n {
			t.Errorf("D completed %d tasks for %d requests: %v", completed, n, dByReq)
		}
		if m := model.calls.Load(); m != int64(2*n) {
			t.Errorf("the model answered %d calls in all, want %d: none paid twice", m, 2*n)
		}
	} else if cRuns > n+1 || completed > n+1 || model.calls.Load() > round1Calls+2 {
		// A missed tie costs the failed request's re-run, no more.
		t.Errorf("C ran %d times, D completed %d, the model answered %d calls, for %d requests", cRuns, completed, model.calls.Load(), n)
	}
	// B's handoffs of the first round were tied by lineage, with evidence,
	// where their requests differed (the records are written in the
	// background).
	if !duplicateTask(tasks, tasks[0]) {
		eventually(t, "a handoff of b's records correlation lineage with its evidence", func() bool {
			var v records.TraceView
			adminGet(t, bB.AdminAddr(), "/v1/traces/"+failedTrace, &v)
			for _, r := range v.Records {
				if r.Side == record.Egress && r.Correlation == record.CorrelatedByLineage && strings.Contains(r.CorrelationEvidence, "phrase(s)") {
					return true
				}
			}
			return false
		})
	}
}

func duplicateTask(tasks []string, task string) bool {
	n := 0
	for _, t := range tasks {
		if t == task {
			n++
		}
	}
	return n > 1
}

// TestLineageConcurrentAgents: B, an LLM agent that forwards no trace
// context, serves 4 and 16 requests at once; D fails its first task. After
// the failed round and the re-send of every request with its key, C ran
// once per request, D completed once per request, and no model call was
// paid twice: B's calls were tied to the request they served by what they
// quoted of what B read within it (its task, the model's tool call).
func TestLineageConcurrentAgents(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			tasks := make([]string, n)
			venues := []string{"lakeside lodge", "harbour hall", "mountain inn", "city loft"}
			for i := range tasks {
				tasks[i] = fmt.Sprintf("reserve the %s for team %d on day %d", venues[i%4], i, 100+i)
			}
			lineageChain(t, tasks, false)
		})
	}
}

// TestLineageOneTokenApart: concurrent requests that differ in one token
// (an account number) each get only their own answers.
func TestLineageOneTokenApart(t *testing.T) {
	t.Parallel()
	tasks := make([]string, 6)
	for i := range tasks {
		tasks[i] = fmt.Sprintf("pay the March invoice of Acme Corp from account DE44%04d and tell finance", 5000+i)
	}
	lineageChain(t, tasks, false)
}

// TestLineageIdenticalRequests: identical concurrent requests are left
// untied, and each gets a right answer.
func TestLineageIdenticalRequests(t *testing.T) {
	t.Parallel()
	lineageChain(t, []string{"reserve the lakeside lodge for the offsite", "reserve the lakeside lodge for the offsite",
		"reserve the lakeside lodge for the offsite", "reserve the lakeside lodge for the offsite"}, false)
}

// TestLineageSharedMemory: an agent whose prompts quote the requests it
// served before (shared memory across requests) is never tied wrongly:
// its model calls, which quote every request, are tied to none, and its
// handoffs, which quote the model's arguments for its own, are its own.
func TestLineageSharedMemory(t *testing.T) {
	t.Parallel()
	tasks := make([]string, 4)
	for i := range tasks {
		tasks[i] = fmt.Sprintf("reserve room %d of the north wing for the board on day %d", i+1, 200+i)
	}
	lineageChain(t, tasks, true)
}

package intercept_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/tlsintercept"
)

// llmPort is where the HTTPS model server of the model-call tests listens,
// in the peer namespace, with a certificate for the peer's IP from a CA
// that only Baton trusts (external.ca_file).
const llmPort = "9445"

// llm is an OpenAI-compatible model server that bills as a provider does:
// by API key, every call's input and output tokens, whether or not its
// answer reports them. It serves the Responses API (POST /v1/responses,
// whole or streamed), which the OpenAI Agents SDK calls, and chat
// completions (POST /v1/chat/completions, whole or streamed; a stream
// reports usage only when asked with stream_options.include_usage).
//
// Its answers are scripted from the conversation, so that the same
// conversation always gets the same answer. A Responses call asks for the
// request's tools in order, one per answer (the k-th answer calls the k-th
// tool), then answers text; with runaway set it asks for the first tool
// forever. A chat completion answers one line. Tokens are counted as a
// tokenizer might: input a quarter of the request's bytes, output a
// quarter of the answer's text, so that every call bills a different
// number.
type llm struct {
	runaway bool

	mu    sync.Mutex
	calls []llmCall
	// hold, when set, is called before a Responses call is answered, with
	// the call's task and step (the tool outputs it carries).
	hold func(task string, step int)
}

// llmCall is one call the server answered and billed.
type llmCall struct {
	key      string // the API key it was billed to
	path     string
	task     string // a Responses call's task (its first user text), and its step
	step     int
	stream   bool
	reported bool // its answer reported its usage
	in, out  int64
}

// bill is what the server billed a key: calls, tokens, and the calls whose
// answers did not report their usage.
type bill struct {
	calls, unreported int
	in, out           int64 // all billed
	reportedIn        int64 // billed and reported
	reportedOut       int64
}

// billOf sums the calls billed to key; "" sums them all.
func (m *llm) billOf(key string) bill {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b bill
	for _, c := range m.calls {
		if key != "" && c.key != key {
			continue
		}
		b.calls++
		b.in += c.in
		b.out += c.out
		if c.reported {
			b.reportedIn += c.in
			b.reportedOut += c.out
		} else {
			b.unreported++
		}
	}
	return b
}

// billed returns the calls billed to key, in order.
func (m *llm) billed(key string) []llmCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []llmCall
	for _, c := range m.calls {
		if c.key == key {
			out = append(out, c)
		}
	}
	return out
}

// holdWith sets (or, with nil, clears) the hold.
func (m *llm) holdWith(f func(task string, step int)) {
	m.mu.Lock()
	m.hold = f
	m.mu.Unlock()
}

func tokensOf(s string) int64 { return int64(len(s)+3) / 4 }

func (m *llm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case r.Method != http.MethodPost:
		http.Error(w, `{"error":{"message":"POST only"}}`, http.StatusMethodNotAllowed)
	case strings.HasSuffix(r.URL.Path, "/v1/responses"):
		m.responses(w, r.URL.Path, key, body)
	case strings.HasSuffix(r.URL.Path, "/v1/chat/completions"):
		m.chat(w, r.URL.Path, key, body)
	default:
		http.Error(w, `{"error":{"message":"not served here"}}`, http.StatusNotFound)
	}
}

func (m *llm) bill(c llmCall) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, c)
	return len(m.calls)
}

func (m *llm) responses(w http.ResponseWriter, path, key string, body []byte) {
	var req struct {
		Model  string          `json:"model"`
		Input  json.RawMessage `json:"input"`
		Stream bool            `json:"stream"`
		Tools  []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"not JSON"}}`, http.StatusBadRequest)
		return
	}
	var items []responsesItem
	if json.Unmarshal(req.Input, &items) != nil {
		items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
	}
	task, outputs := "", 0
	for _, it := range items {
		switch {
		case it.Type == "function_call_output":
			outputs++
		case it.Role == "user" && task == "":
			task = it.text()
		}
	}
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if hold != nil {
		hold(task, outputs)
	}
	var item map[string]any
	var said string
	if len(req.Tools) > 0 && (m.runaway || outputs < len(req.Tools)) {
		tool := req.Tools[0].Name
		if !m.runaway {
			tool = req.Tools[outputs].Name
		}
		args, _ := json.Marshal(map[string]string{"request": fmt.Sprintf("%s #%d: %s", tool, outputs+1, task)})
		said = string(args)
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", outputs+1),
			"call_id": fmt.Sprintf("call_%d", outputs+1), "name": tool, "arguments": said, "status": "completed"}
	} else {
		said = "done: " + task
		item = map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": said, "annotations": []any{}}}}
	}
	in, out := tokensOf(string(body)), 8+tokensOf(said)
	n := m.bill(llmCall{key: key, path: path, task: task, step: outputs, stream: req.Stream, reported: true, in: in, out: out})
	resp := map[string]any{
		"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1767225600, "status": "completed",
		"model": req.Model + "-2025-04-14", "output": []any{item},
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
			"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}},
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	event := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	created := map[string]any{"id": resp["id"], "object": "response", "created_at": 1767225600, "status": "in_progress",
		"model": resp["model"], "output": []any{}}
	event("response.created", map[string]any{"response": created})
	// The item as it begins, its text or arguments as deltas, the item
	// done, then the whole response with its usage.
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	id := item["id"]
	if item["type"] == "message" {
		added["content"], added["status"] = []any{}, "in_progress"
		event("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		event("response.output_text.delta", map[string]any{"item_id": id, "output_index": 0, "content_index": 0, "delta": said})
	} else {
		added["arguments"], added["status"] = "", "in_progress"
		event("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		event("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": 0, "delta": said})
	}
	event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	event("response.completed", map[string]any{"response": resp})
}

func (m *llm) chat(w http.ResponseWriter, path, key string, body []byte) {
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"not JSON"}}`, http.StatusBadRequest)
		return
	}
	task := ""
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			task = msg.Content
		}
	}
	said := "done: " + task
	in, out := tokensOf(string(body)), 4+tokensOf(said)
	reported := !req.Stream || (req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	n := m.bill(llmCall{key: key, path: path, stream: req.Stream, reported: reported, in: in, out: out})
	id, model := fmt.Sprintf("chatcmpl-%d", n), req.Model+"-2025-04-14"
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, in, out, in+out)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"chat.completion","created":1767225600,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":%s}`,
			id, model, said, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		w.(http.Flusher).Flush()
	}
	head := fmt.Sprintf(`"id":%q,"object":"chat.completion.chunk","created":1767225600,"model":%q`, id, model)
	chunk(fmt.Sprintf(`{%s,"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, head))
	chunk(fmt.Sprintf(`{%s,"choices":[{"index":0,"delta":{"content":%q}}]}`, head, said))
	chunk(fmt.Sprintf(`{%s,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, head))
	if reported {
		chunk(fmt.Sprintf(`{%s,"choices":[],"usage":%s}`, head, usage))
	}
	chunk("[DONE]")
}

// llmServer is an llm serving HTTPS in the peer namespace, and what a
// Baton needs to reach it.
type llmServer struct {
	*llm
	host   string // ip:port
	caFile string // the CA its certificate chains to, for external.ca_file
	dir    string // a directory every UID may write to (a Baton publishes its bundle there)
}

// startLLM serves m over HTTPS on llmPort in the peer namespace.
func (tp *agentsTopo) startLLM(t *testing.T, m *llm) *llmServer {
	t.Helper()
	ca, err := tlsintercept.NewCA("model server")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "baton-llm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777) // Baton (UID 1337) publishes its bundle here
	s := &llmServer{llm: m, host: hostPort(agentsPeerIP4, llmPort), caFile: filepath.Join(dir, "llm-ca.pem"), dir: dir}
	if err := os.WriteFile(s.caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts, err := tlsintercept.ParseHosts([]string{s.host})
	if err != nil {
		t.Fatal(err)
	}
	minter, err := tlsintercept.NewMinter(ca, hosts, tlsintercept.MinterOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := minter.CertificateFor(agentsPeerIP4, mustPort(llmPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{NextProtos: []string{"h2", "http/1.1"}, Certificates: []tls.Certificate{*cert}}}
	go srv.ServeTLS(tp.peer.listen(t, "0.0.0.0:"+llmPort), "", "")
	t.Cleanup(func() { srv.Close() })
	return s
}

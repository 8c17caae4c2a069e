package proxy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

const envelopeType = "application/vnd.baton.handoff+json"

// incomplete is an envelope missing most of the minimum viable state.
const incomplete = `{"schema_version":"1.0.0","task":{"id":"t1","intent":"summarise Q3"},` +
	`"completed":[{"id":"c1","summary":"compiled"}]}`

// contractPair is analyst → summarizer with the given contract settings on
// each side.
func contractPair(t *testing.T, agent http.Handler, senderExtra, receiverExtra string) *pair {
	t.Helper()
	ag := httptest.NewServer(agent)
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n"+receiverExtra, nil)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\nretry: {attempts: 0}\n"+senderExtra, nil)
	return &pair{a: a, b: b, agent: ag}
}

func TestContractEnforcedAtBothEdges(t *testing.T) {
	t.Parallel()
	ct := http.Header{"Content-Type": {envelopeType}}
	tests := []struct {
		name          string
		sender, recv  string
		body          string
		want          int
		wantKinds     []string
		refusedBy     string // "egress" or "ingress"
		agentReceives bool
	}{
		{name: "sender's Baton catches its own agent's drift", sender: "contract: {mode: enforce, min_completeness: 0.75}\n",
			recv: "contract: {mode: off}\n", body: incomplete, want: 422, wantKinds: []string{"completeness"}, refusedBy: "egress"},
		{name: "receiver's Baton protects its agent", sender: "contract: {mode: off}\n",
			recv: "contract: {mode: enforce, require: [open_questions]}\n", body: incomplete, want: 422,
			wantKinds: []string{"required"}, refusedBy: "ingress"},
		{name: "unsupported major", sender: "contract: {mode: off}\n", recv: "contract: {mode: enforce}\n",
			body: strings.Replace(string(handoff.Example()), `"1.0.0"`, `"2.0.0"`, 1), want: 422,
			wantKinds: []string{"version"}, refusedBy: "ingress"},
		{name: "identity claimed by the agent", sender: "contract: {mode: enforce}\n", recv: "",
			body: strings.Replace(string(handoff.Example()), `"agent": "analyst"`, `"agent": "ceo"`, 1), want: 422,
			wantKinds: []string{"identity"}, refusedBy: "egress"},
		{name: "a complete envelope passes enforce on both sides", sender: "contract: {mode: enforce}\n",
			recv: "contract: {mode: enforce, min_completeness: 1}\n", body: string(handoff.Example()), want: 200, agentReceives: true},
		{name: "observe passes and reports", sender: "", recv: "", body: incomplete, want: 200, agentReceives: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got seen
			p := contractPair(t, got.handler(200, "ok"), tc.sender, tc.recv)
			resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/handoff", tc.body, ct)
			if resp.StatusCode != tc.want {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, b)
			}
			if (got.count() > 0) != tc.agentReceives {
				t.Errorf("agent received %d requests", got.count())
			}
			if tc.want != 422 {
				return
			}
			var pd struct {
				Type       string              `json:"type"`
				Detail     string              `json:"detail"`
				Violations []handoff.Violation `json:"violations"`
			}
			json.NewDecoder(resp.Body).Decode(&pd)
			if !strings.HasSuffix(pd.Type, "#contract-violation") || len(pd.Violations) == 0 {
				t.Fatalf("problem %+v", pd)
			}
			kinds := map[string]bool{}
			for _, v := range pd.Violations {
				kinds[string(v.Kind)] = true
				if v.Pointer == "" && v.Kind != handoff.KindCompleteness || v.Detail == "" {
					t.Errorf("violation without pointer or explanation: %+v", v)
				}
			}
			for _, k := range tc.wantKinds {
				if !kinds[k] {
					t.Errorf("no %s violation in %+v", k, pd.Violations)
				}
			}
			if by := map[bool]string{true: "egress", false: "ingress"}[strings.Contains(pd.Detail, "sending Baton")]; by != tc.refusedBy {
				t.Errorf("refused by %s, want %s (%s)", by, tc.refusedBy, pd.Detail)
			}
			if tc.refusedBy == "ingress" && strings.Contains(pd.Detail, "2.0.0") {
				t.Log(pd.Detail)
			}
		})
	}
}

func TestContractObserveHeaderAndStamp(t *testing.T) {
	t.Parallel()
	var got seen
	p := contractPair(t, got.handler(200, "ok"), "", "")
	// A newer minor with fields this Baton does not know.
	env := strings.Replace(string(handoff.Example()), `"schema_version": "1.0.0",`,
		`"schema_version": "1.7.0", "x_future": {"kept": [1, 2, 3]},`, 1)
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/handoff", env,
		http.Header{"Content-Type": {envelopeType}, "Traceparent": {tp}})
	r := got.last(t)
	if h := r.Header.Get("Baton-Contract"); h != "violations=0; completeness=1.00" {
		t.Errorf("Baton-Contract %q", h)
	}
	body := got.body[len(got.body)-1]
	var e struct {
		Provenance struct {
			Agent   string `json:"agent"`
			TraceID string `json:"trace_id"`
			Hop     int    `json:"hop"`
			Stamped string `json:"stamped_at"`
		} `json:"provenance"`
		Future json.RawMessage `json:"x_future"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	if e.Provenance.Agent != "analyst" || e.Provenance.TraceID != traceID || e.Provenance.Hop != 1 || e.Provenance.Stamped == "" {
		t.Errorf("provenance not stamped: %+v", e.Provenance)
	}
	if string(e.Future) != `{"kept": [1, 2, 3]}` {
		t.Errorf("unknown field of a newer minor changed: %s", e.Future)
	}
	// Everything before provenance is byte-identical.
	cut := strings.Index(env, `"provenance"`)
	if !bytes.HasPrefix(body, []byte(env[:cut])) {
		t.Error("the envelope was changed outside provenance")
	}
	// The records carry the envelope summary.
	v := waitTrace(t, p.a.AdminAddr(), traceID, func(v records.TraceView) bool {
		return len(v.Records) == 1 && v.Records[0].State == record.Delivered
	})
	if s := v.Records[0].Envelope; s == nil || s.TaskID != "task-7f3a9c" || s.Completeness != 1 || s.OpenQuestions != 2 ||
		s.Unverified != 2 || s.Digest == "" {
		t.Errorf("record envelope summary %+v", s)
	}
}

func TestContractOnA2A(t *testing.T) {
	t.Parallel()
	a2a := func(method, env string) string {
		return `{"jsonrpc":"2.0","id":"r-1","method":"` + method + `","params":{"message":{"messageId":"m-` + method +
			`","role":"user","parts":[{"text":"go"}],"metadata":{"baton.handoff":` + env + `}}}}`
	}
	for _, method := range []string{"SendMessage", "message/send", "SendStreamingMessage", "message/stream"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			var got seen
			p := contractPair(t, got.handler(200, `{"jsonrpc":"2.0","id":"r-1","result":{}}`), "contract: {mode: off}\n",
				"contract: {mode: enforce, min_completeness: 0.75}\n")
			json := http.Header{"Content-Type": {"application/json"}}
			resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/a2a", a2a(method, incomplete), json)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(string(b), `"code":-32068`) || !strings.Contains(string(b), `"id":"r-1"`) ||
				!strings.Contains(string(b), `/params/message/metadata/baton.handoff`) {
				t.Errorf("incomplete A2A envelope: %d %s", resp.StatusCode, b)
			}
			if got.count() != 0 {
				t.Error("the agent received a refused A2A handoff")
			}
			resp = send(t, p.a.EgressAddr(), "summarizer", "POST", "/a2a", strings.Replace(a2a(method, string(handoff.Example())), "m-", "m2-", 1), json)
			if resp.StatusCode != 200 || got.count() != 1 || got.last(t).Header.Get("Baton-Contract") == "" {
				t.Errorf("complete A2A envelope: %d, agent calls %d", resp.StatusCode, got.count())
			}
		})
	}
	// A2A without an envelope, and opaque bodies, pass untouched.
	var got seen
	p := contractPair(t, got.handler(200, "ok"), "contract: {mode: enforce}\n", "contract: {mode: enforce}\n")
	plain := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"x","role":"user","parts":[{"text":"hi"}]}}}`
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/a2a", plain, http.Header{"Content-Type": {"application/json"}})
	if got.count() != 1 || string(got.body[0]) != plain || got.last(t).Header.Get("Baton-Contract") != "" {
		t.Errorf("A2A without an envelope changed: %q", got.body)
	}
}

// TestContractRetryKeepsItsStamp: an agent retrying an envelope handoff in
// the same trace sends the same bytes (the same stamp), so the receiver's
// dedupe window answers instead of refusing a mismatch.
func TestContractRetryKeepsItsStamp(t *testing.T) {
	t.Parallel()
	var got seen
	p := contractPair(t, got.handler(200, "ok"), "", "")
	hdr := http.Header{"Content-Type": {envelopeType}, "Traceparent": {tp}}
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/handoff", string(handoff.Example()), hdr)
	retry := send(t, p.a.EgressAddr(), "summarizer", "POST", "/handoff", string(handoff.Example()), hdr)
	if retry.StatusCode != 200 || retry.Header.Get("Idempotent-Replayed") != "true" || got.count() != 1 {
		t.Errorf("retry: %d replayed=%q agent calls %d", retry.StatusCode, retry.Header.Get("Idempotent-Replayed"), got.count())
	}
}

//go:build !sidecar

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/tokens"
	"github.com/batonproxy/baton/sidecar"
)

// demoContextTrace is the trace of the demo's act on context.
const demoContextTrace = "3c0e7d1f5a9b4e2c8d6f0a1b2c3d4e5f"

// demoContext is the demo's act on context: the researcher hands a 2 MB
// transcript to the editor by reference (stored once, read by the editor's
// agent from its Baton when it needs it), and the same envelope to the
// critic, whose edge has a token budget: trimmed by the envelope's
// priorities, with a note of what was left out.
func demoContext(ctx context.Context, p func(string, ...any), start func(string) (*sidecar.Baton, func(), error), loop string) error {
	var mu sync.Mutex
	got := map[string][]byte{}
	var read int
	var editorEgress string
	agent := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			got[name] = body
			mu.Unlock()
			var env handoff.Envelope
			if name == "editor" && json.Unmarshal(body, &env) == nil && len(env.Artifacts) > 0 {
				// The editor reads the transcript when it needs it.
				resp, err := http.Get("http://" + editorEgress + env.Artifacts[0].Ref)
				if err == nil {
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					read = int(n)
					mu.Unlock()
				}
			}
			io.WriteString(w, `{"ok":true}`)
		}
	}
	editor, err := startDemoAgent(agent("editor"))
	if err != nil {
		return err
	}
	defer editor.Close()
	critic, err := startDemoAgent(agent("critic"))
	if err != nil {
		return err
	}
	defer critic.Close()
	eB, stopE, err := start("agent: editor\nupstream: http://" + editor.Addr + "\n" + loop +
		"edges: [{from: researcher, context: {by_reference: {deliver: reference}}}]\n")
	if err != nil {
		return err
	}
	defer stopE()
	editorEgress = eB.EgressAddr()
	cB, stopC, err := start("agent: critic\nupstream: http://" + critic.Addr + "\n" + loop)
	if err != nil {
		return err
	}
	defer stopC()
	rB, stopR, err := start("agent: researcher\nupstream: http://127.0.0.1:9\n" + loop + "limits: {max_body_bytes: 8388608}\n" +
		"peers: {editor: {url: http://" + eB.IngressAddr() + "}, critic: {url: http://" + cB.IngressAddr() + "}}\n" +
		"edges: [{to: editor, context: {by_reference: true}}, {to: critic, context: {budget: {max_tokens: 300, model: gpt-4o, over: trim}}}]\n")
	if err != nil {
		return err
	}
	defer stopR()

	transcript := strings.Repeat("09:14 ops: checkout p95 at 410 ms since the 14:02 deploy; rolling back is off the table. ", 2<<20/88)
	why := strings.Repeat("It also carries the security fix that must stay. ", 20)
	env, _ := json.Marshal(handoff.Envelope{
		SchemaVersion: "1.0.0",
		Task:          handoff.Task{ID: "t-incident", Intent: "Write the incident summary from the call transcript."},
		Constraints:   []handoff.Constraint{{Text: "Name no customer.", Hard: true}},
		Completed:     []handoff.Completed{{Summary: "Timeline drafted.", Verification: handoff.Verified, Evidence: why}},
		RejectedPaths: []handoff.Rejected{{What: "Roll back the deploy", Why: why}},
		Artifacts:     []handoff.Artifact{{Name: "call.txt", MediaType: "text/plain", Content: mustJSON(transcript), Trust: handoff.Trusted}},
	})
	p("\n10. context by reference and a token budget (edges[].context).\n")
	for _, to := range []string{"editor", "critic"} {
		resp, err := demoPostKey(ctx, rB.EgressAddr(), to, "/tasks", "00-"+demoContextTrace+"-5555555555555555-01", string(env), "")
		if err != nil {
			return err
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("demo: the handoff to %s answered %d: %s", to, resp.StatusCode, answer)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	p("   the researcher sent %d bytes; the editor's agent got a reference of %d bytes, and read the %d-byte\n", len(env), len(got["editor"]), read)
	p("   transcript from its own Baton when it needed it (GET /v1/context/sha-256:…?trace=…): stored once, read once\n")
	if read != len(transcript) || len(got["editor"]) > 4096 {
		return fmt.Errorf("demo: the editor got %d bytes and read %d", len(got["editor"]), read)
	}
	var trimmed handoff.Envelope
	if err := json.Unmarshal(got["critic"], &trimmed); err != nil {
		return fmt.Errorf("demo: the critic's envelope: %w", err)
	}
	o200k, _ := tokens.For("gpt-4o", "")
	p("   the critic's edge has a budget of 300 tokens (gpt-4o, o200k_base): it got %d tokens (Baton's stamp and note uncounted),\n   task and constraints whole;\n", o200k.Count(got["critic"]))
	p("   left out, as its envelope says: %s\n", strings.Join(trimmed.Omitted, ", "))
	if len(trimmed.Omitted) == 0 || trimmed.Task.Intent == "" || len(trimmed.Constraints) != 1 {
		return fmt.Errorf("demo: the critic got %.300s", got["critic"])
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

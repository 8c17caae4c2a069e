package proxy_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
)

// TestConsoleAbandon abandons a failed trace from its console page: a → b
// (drafts) → c (down); the trace page offers to abandon it, the form (with
// a reason that is markup) abandons it, b's draft is discarded once, and
// the page shows the step undone and the reason escaped.
func TestConsoleAbandon(t *testing.T) {
	t.Parallel()
	store := state.NewMemory(config.Memory{})
	b := &sagaAgent{effect: "draft", work: "/draft", undo: "/discard", next: "c", nextPath: "/ship", seq: new(atomic.Int64)}
	aB := draftChain(t, func() state.Store { return store }, b, "admin_token: "+consoleToken+"\n"+
		"edges: [{to: b, side_effects: [{name: draft, compensate: {path: /discard, body: '{\"draft\": {{json .Response.draft_id}}}'}}]}]\n")

	const trace = "e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5"
	resp := send(t, aB.EgressAddr(), "b", http.MethodPost, "/draft", `{"doc":"q4"}`,
		http.Header{"Content-Type": {"application/json"}, "Traceparent": {"00-" + trace + "-b7ad6b7169203331-01"}})
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("the chain answered %d, want 502", resp.StatusCode)
	}

	cc := newConsoleClient(t, aB.AdminAddr())
	cc.login(consoleToken)
	var page string
	waitFor(t, "the trace page offering to abandon", func() bool {
		page = cc.page("/console/traces/" + trace)
		return strings.Contains(page, "Abandon trace")
	})
	form := url.Values{"csrf": {csrfOf(t, page)}, "reason": {"<b>client gave up</b>"}}
	if r, _ := cc.do("POST", "/console/traces/"+trace+"/abandon", form, nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("abandon form: %d", r.StatusCode)
	}
	waitFor(t, "the draft discarded", func() bool {
		page = cc.page("/console/traces/" + trace)
		return strings.Contains(page, "Every step is settled.")
	})
	if len(b.undone) != 1 || b.undone[0] != `{"draft": "dr-1"}` {
		t.Fatalf("b's draft was discarded %d times: %q", len(b.undone), b.undone)
	}
	if !strings.Contains(page, `<td class="state undone">undone</td>`) || !strings.Contains(page, "&lt;b&gt;client gave up&lt;/b&gt;") ||
		strings.Contains(page, "<b>client gave up</b>") || strings.Contains(page, "Abandon trace") {
		t.Fatalf("the trace page after abandoning:\n%s", page)
	}
}

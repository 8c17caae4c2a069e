package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/mesh"
	"github.com/batonproxy/baton/state"
)

// handingAgent is a loopAgent that, once its model stops, hands the task
// on to the peer next through its Baton's egress, and fails when the peer
// does.
type handingAgent struct {
	*loopAgent
	next string
}

func (a *handingAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	task, _ := io.ReadAll(r.Body)
	rec := httptest.NewRecorder()
	a.loopAgent.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/task", bytes.NewReader(task)))
	if rec.Code != http.StatusOK {
		http.Error(w, rec.Body.String(), rec.Code)
		return
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+*a.egress.Load()+"/task", bytes.NewReader(task))
	req.Host = a.next
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		http.Error(w, "the handoff failed: "+string(answer), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(answer)
}

// TestConsoleModelCallsInBrowser: planner → writer on one store, each
// agent calling an OpenAI-compatible model through its Baton's route llm
// (three rounds of 250 + 50 tokens), the writer's Baton allowing two calls
// per handling. The first run stops at the writer's third call, refused by
// its Baton; the client re-sends, and every call made before is answered
// from the journal. In headless Chromium, planner's console shows: on the
// trace's page, each model call as a bar of its own under its receipt,
// with its model, tokens and cost, the journal hits and the refusal drawn
// apart (as the stylesheet draws them), and the spend per agent and for
// the chain; on the overview, the trace among the costliest chains,
// leading to its page; on the mesh, llm as one model API node that both
// agents' edges lead to, with its tokens a minute.
func TestConsoleModelCallsInBrowser(t *testing.T) {
	t.Parallel()
	store := state.NewMemory(config.Memory{})
	model := httptest.NewServer(&chatModel{in: 250, out: 50, rounds: 3})
	t.Cleanup(model.Close)
	llm := "external: {routes: [{name: llm, url: \"" + model.URL + "/\", api: openai}]}\n" +
		"journal: {hosts: [\"" + strings.TrimPrefix(model.URL, "http://") + "\"]}\n"
	writerAgent := &loopAgent{}
	wsrv := httptest.NewServer(writerAgent)
	t.Cleanup(wsrv.Close)
	writer := startBatonWith(t, "agent: writer\nupstream: "+wsrv.URL+"\n"+llm+"models: {max_calls_per_handling: 2}\n",
		store, prometheusMetrics(t))
	we := writer.EgressAddr()
	writerAgent.egress.Store(&we)
	plannerAgent := &handingAgent{loopAgent: &loopAgent{}, next: "writer"}
	psrv := httptest.NewServer(plannerAgent)
	t.Cleanup(psrv.Close)
	planner := startBatonWith(t, "agent: planner\nupstream: "+psrv.URL+"\nadmin_token: "+consoleToken+"\n"+llm+
		"peers: {writer: {url: 'http://"+writer.IngressAddr()+"'}}\nretry: {attempts: 0}\n", store, prometheusMetrics(t))
	pe := planner.EgressAddr()
	plannerAgent.egress.Store(&pe)

	tp, trace := newTraceparent(t)
	if resp := sendTask(t, planner, tp, "offsite-1", ""); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("the first run: %d, want 500 (the writer's third call refused)", resp.StatusCode)
	}
	if e := writerAgent.lastError(); !strings.Contains(e, "model_calls_per_handling_exceeded") {
		t.Fatalf("the writer's model error: %q", e)
	}
	if resp := sendTask(t, planner, tp, "offsite-1", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("the re-sent task: %d (%s)", resp.StatusCode, writerAgent.lastError())
	}
	receipts(t, planner, trace, 4, consoleToken)
	api := newConsoleClient(t, planner.AdminAddr())
	api.header.Set("Authorization", "Bearer "+consoleToken)
	waitFor(t, "the chain in the costliest chains", func() bool {
		_, page := api.get("/console/")
		return strings.Contains(page, `data-trace="`+trace+`"`) && strings.Contains(page, "$0.001080")
	})

	br := newBrowser(t)
	admin := "http://" + planner.AdminAddr()
	br.do("signing in", chromedp.Navigate(admin+"/console/login"),
		chromedp.SendKeys(chromedp.ID("token"), consoleToken), chromedp.Click(chromedp.CSS("form.login button")),
		chromedp.WaitVisible(chromedp.CSS("nav")))

	// The overview: the chain, with what it cost, leads to its page.
	costly := run(br, "the costliest chains", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("tr.costly")].map(tr => tr.dataset.trace + " " + [...tr.cells].slice(1).map(c => c.textContent).join(" "))`))
	if len(costly) != 1 || costly[0] != trace+" $0.001080 1800" {
		t.Errorf("the costliest chains %q: want the trace, $0.001080 and 1800 tokens", costly)
	}
	br.screenshot("overview-models", true)
	br.do("the chain's trace, from the overview", chromedp.Click(chromedp.CSS(`tr.costly[data-trace="`+trace+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS("figure.waterfall")))
	if loc := br.location(); loc != admin+"/console/traces/"+trace {
		t.Errorf("the costly chain led to %s", loc)
	}

	// The waterfall: a bar per model call, under its receipt.
	bars := run(br, "the model calls' bars", chromedp.Evaluate[[]string](`[...document.querySelectorAll("figure.waterfall g.bar")].map(g => {
		const rect = g.querySelector("rect"), style = getComputedStyle(rect);
		if (!g.dataset.call) return g.querySelector("text.label").textContent.startsWith("ingress") ? "receipt" : "";
		return g.getAttribute("class") + " | " + g.querySelector("text.label").textContent + " | " + g.querySelector("text.mark").textContent +
			" | " + (style.strokeDasharray === "none" ? "solid" : "dashed") + " " + style.fill;
	}).filter(s => s)`))
	const (
		answered = "chat gpt-4.1-mini-2025-04-14"
		paid     = " | 250 in / 50 out tokens · $0.000180 | solid rgb(61, 111, 209)"
		hit      = " | journal hit, no spend | dashed rgb(232, 238, 251)"
	)
	want := []string{
		"receipt", // planner, first run
		"bar call live | " + answered + paid, "bar call live | " + answered + paid, "bar call live | " + answered + paid,
		"receipt", // writer, first run
		"bar call live | " + answered + paid, "bar call live | " + answered + paid,
		"bar call refused | chat gpt-4.1-mini | refused by Baton: calls per handling | dashed rgb(253, 236, 234)",
		"receipt", // planner, re-sent
		"bar call journal | " + answered + hit, "bar call journal | " + answered + hit, "bar call journal | " + answered + hit,
		"receipt", // writer, re-sent
		"bar call journal | " + answered + hit, "bar call journal | " + answered + hit,
		"bar call live | " + answered + paid,
	}
	if strings.Join(bars, "\n") != strings.Join(want, "\n") {
		t.Errorf("the waterfall's receipts and model calls:\n%s\nwant:\n%s", strings.Join(bars, "\n"), strings.Join(want, "\n"))
	}
	title := run(br, "a call's title", chromedp.Evaluate[string](`document.querySelector("figure.waterfall g.bar.call.live title").textContent`))
	if !regexp.MustCompile(`^model call chat gpt-4.1-mini-2025-04-14 to llm \(openai\): [0-9.]+ ms, finish tool_calls, status 200; `).MatchString(title) {
		t.Errorf("a call's title: %q", title)
	}
	// The spend per agent and for the chain.
	spend := run(br, "the spend", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("table.spend tbody tr")].map(tr => [...tr.cells].map(c => c.textContent).join(" "))`))
	wantSpend := []string{
		"planner 6 750 150 $0.000540 3 0 0 0",
		"writer 6 750 150 $0.000540 2 1 0 0",
		"chain 12 1500 300 $0.001080 5 1 0 0",
	}
	if strings.Join(spend, "\n") != strings.Join(wantSpend, "\n") {
		t.Errorf("the spend:\n%s\nwant:\n%s", strings.Join(spend, "\n"), strings.Join(wantSpend, "\n"))
	}
	br.screenshotOf("trace-models", "figure.waterfall")
	br.screenshotOf("trace-spend", "section.spend")

	// The mesh, once both Batons announced their last minute's calls.
	nodeFigures := regexp.MustCompile(`class="sub figures">[1-9][0-9.]*k? tok/min · 0\.0% err<`)
	edgeFigures := regexp.MustCompile(` [1-9][0-9.]*k? tok/min</text>`)
	waitWithin(t, mesh.Expiry+mesh.AnnounceEvery, "the model API in the mesh", func() bool {
		_, page := api.get("/console/mesh")
		return nodeFigures.MatchString(page) && len(edgeFigures.FindAllString(page, -1)) == 2 // planner's and writer's edges
	})
	br.do("the mesh page", chromedp.Navigate(admin+"/console/mesh"), chromedp.WaitVisible(chromedp.CSS("figure.mesh svg")))
	nodes := run(br, "the model API node", chromedp.Evaluate[[]string](`[...document.querySelectorAll('svg g.node[data-agent="_external:llm"]')].map(g =>
		g.getAttribute("class") + " | " + [...g.querySelectorAll("text")].map(t => t.textContent).join(" | ") + " | rx " + g.querySelector("rect").getAttribute("rx"))`))
	if len(nodes) != 1 || !regexp.MustCompile(`^node external model \| llm \| model API \| [1-9][0-9.]*k? tok/min · 0\.0% err \| rx 18$`).MatchString(nodes[0]) {
		t.Errorf("the model API's nodes %q: want one, llm, with its tokens a minute", nodes)
	}
	edges := run(br, "the edges to it", chromedp.Evaluate[[]string](`[...document.querySelectorAll('svg g.edge[data-to="_external:llm"]')].map(g =>
		g.dataset.from + " " + g.querySelector("text.sub").textContent)`))
	if len(edges) != 2 || !regexp.MustCompile(`^planner (p99 \S+ · )?[1-9][0-9.]*k? tok/min$`).MatchString(edges[0]) ||
		!regexp.MustCompile(`^writer (p99 \S+ · )?[1-9][0-9.]*k? tok/min$`).MatchString(edges[1]) {
		t.Errorf("the edges to llm %q: want planner's and writer's, each with its tokens a minute", edges)
	}
	if overlaps := labelOverlaps(br); len(overlaps) > 0 {
		t.Errorf("edge labels overlap: %q", overlaps)
	}
	br.screenshot("mesh-models", false)
}

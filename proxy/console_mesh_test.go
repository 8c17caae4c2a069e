package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/mesh"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// TestConsoleMeshInBrowser: four Batons on one Redis (a → b → c, and d in
// a process of its own) announce themselves; a's console draws the mesh in
// headless Chromium: a node per agent placed by depth, a node per external
// destination a fetches from (two hosts, and a base-URL route named by its
// name), the edges with their last minute's figures and their labels
// clear of each other and of the nodes (a fans out to four), a table of
// the Batons, and an agent name meant to run as markup left inert (an
// announcement forged in the store). d, SIGKILLed, drops out within the
// announcements' expiry.
func TestConsoleMeshInBrowser(t *testing.T) {
	t.Parallel()
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	store := "store: {redis: {url: " + url + ", prefix: '" + prefix + "'}}\n"
	var got seen
	agent := httptestServer(got.handler(200, `{"ok":true}`))
	t.Cleanup(agent.Close)
	// Each with its metrics served for Prometheus, as `baton serve` has them.
	c := startBatonWith(t, "agent: c\nupstream: "+agent.URL+"\n"+store+"edges: [{from: b}]\n", nil, prometheusMetrics(t))
	b := startBatonWith(t, "agent: b\nupstream: "+agent.URL+"\n"+store+
		"peers: {c: {url: 'http://"+c.IngressAddr()+"'}}\nedges: [{from: a}, {to: c}]\n", nil, prometheusMetrics(t))
	// Three external destinations of a's: two hosts, and one behind a route.
	var sites [3]*httptest.Server
	for i := range sites {
		sites[i] = httptestServer(got.handler(200, `{"ok":true}`))
		t.Cleanup(sites[i].Close)
	}
	host := func(i int) string { return sites[i].Listener.Addr().String() }
	a := startBatonWith(t, "agent: a\nupstream: "+agent.URL+"\nadmin_token: "+consoleToken+"\n"+store+
		"peers: {b: {url: 'http://"+b.IngressAddr()+"'}}\nedges: [{to: b}]\n"+
		"external: {allow: ['"+host(0)+"', '"+host(1)+"'], routes: [{name: search, url: '"+sites[2].URL+"/'}]}\n",
		nil, prometheusMetrics(t))
	d := startChild(t, holderConfig(agent.URL, "127.0.0.1:0", url, prefix, ""))

	// Traffic on a → b and b → c, then two announcements of each.
	for range 6 {
		if resp := send(t, a.EgressAddr(), "b", "POST", "/work", `{"task":"t"}`, nil); resp.StatusCode != 200 {
			t.Fatalf("a → b: %d", resp.StatusCode)
		}
		if resp := send(t, b.EgressAddr(), "c", "POST", "/work", `{"task":"t"}`, nil); resp.StatusCode != 200 {
			t.Fatalf("b → c: %d", resp.StatusCode)
		}
		for _, h := range []string{host(0), host(1)} {
			if resp := send(t, a.EgressAddr(), h, "GET", "/page", "", nil); resp.StatusCode != 200 {
				t.Fatalf("a → %s: %d", h, resp.StatusCode)
			}
		}
		if resp := send(t, a.EgressAddr(), a.EgressAddr(), "POST", "/search/q", `{"q":"t"}`, nil); resp.StatusCode != 200 {
			t.Fatalf("a → search: %d", resp.StatusCode)
		}
	}
	time.Sleep(mesh.AnnounceEvery + time.Second)
	br := newBrowser(t)
	admin := "http://" + a.AdminAddr()
	br.do("signing in", chromedp.Navigate(admin+"/console/login"),
		chromedp.SendKeys(chromedp.ID("token"), consoleToken), chromedp.Click(chromedp.CSS("form.login button")),
		chromedp.WaitVisible(chromedp.CSS("nav")))
	br.do("the mesh page", chromedp.Navigate(admin+"/console/mesh"), chromedp.WaitVisible(chromedp.CSS("figure.mesh svg")))
	nodes := run(br, "the nodes", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("svg g.node:not(.external)")].map(g => g.dataset.agent + "@" + g.querySelector("rect").getAttribute("x"))`))
	x := map[string]int{}
	for _, n := range nodes {
		agent, at, _ := strings.Cut(n, "@")
		x[agent], _ = strconv.Atoi(at)
	}
	if len(x) != 4 || !(x["a"] < x["b"] && x["b"] < x["c"]) || x["summarizer"] != x["a"] {
		t.Errorf("nodes and their columns %v: want a, b, c in depth order and d (agent summarizer) in the first column", nodes)
	}
	externals := run(br, "the external nodes", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("svg g.node.external")].map(g => g.dataset.agent + " " + g.querySelector("text.agent").textContent + " @" + g.querySelector("rect").getAttribute("x"))`))
	wantExternals := []string{
		"_external:" + host(0) + " " + host(0) + " @" + strconv.Itoa(x["b"]),
		"_external:" + host(1) + " " + host(1) + " @" + strconv.Itoa(x["b"]),
		"_external:search search @" + strconv.Itoa(x["b"]),
	}
	slices.Sort(wantExternals)
	if strings.Join(externals, "\n") != strings.Join(wantExternals, "\n") {
		t.Errorf("external nodes:\n%s\nwant, each its own, beside b:\n%s", strings.Join(externals, "\n"), strings.Join(wantExternals, "\n"))
	}
	edges := run(br, "the edges", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("svg g.edge")].map(g => g.dataset.from + "→" + g.dataset.to + " " + g.getAttribute("class") + " " + g.querySelector("text").textContent)`))
	byEdge := map[string]string{}
	for _, e := range edges {
		k, v, _ := strings.Cut(e, " ")
		byEdge[k] = v
	}
	for _, k := range []string{"a→b", "b→c", "a→_external:" + host(0), "a→_external:" + host(1), "a→_external:search"} {
		if !strings.HasPrefix(byEdge[k], "edge ok ") || !strings.Contains(byEdge[k], "/s · 0.0% err") {
			t.Errorf("edge %s is %q: want it healthy, with its figures", k, byEdge[k])
		}
	}
	if len(edges) != 5 {
		t.Errorf("edges %q: want a→b, b→c and a's three external ones", edges)
	}
	// The labels as Chromium lays them out: no two edges' meet, and none
	// covers a node.
	overlaps := labelOverlaps(br)
	if len(overlaps) > 0 {
		t.Errorf("edge labels overlap: %q", overlaps)
	}
	if rows := run(br, "the Batons' table", chromedp.Evaluate[int](`document.querySelectorAll("tr.baton").length`)); rows != 4 {
		t.Errorf("%d Batons listed, want 4", rows)
	}
	// Each edge leads to its latest traces, which lead to their pages.
	links := run(br, "the edges' links", chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg g.edge a")].map(a => a.closest("g").dataset.to + a.getAttribute("href"))`))
	traces := run(br, "a→b's traces", chromedp.Evaluate[[]string](`[...document.querySelectorAll(document.querySelector('svg g.edge[data-from="a"][data-to="b"] a').getAttribute("href") + " li a")].map(a => a.getAttribute("href"))`))
	if strings.Join(links, " ") != "b#edge-3 c#edge-4" || len(traces) != 6 {
		t.Errorf("edge links %q, a→b's traces %q: want both edges linked and a→b's six traces", links, traces)
	} else {
		api := newConsoleClient(t, a.AdminAddr())
		api.header.Set("Authorization", "Bearer "+consoleToken)
		if resp, page := api.get(traces[0]); resp.StatusCode != 200 || !strings.Contains(page, "a → b") {
			t.Errorf("a→b's latest trace %s: %d", traces[0], resp.StatusCode)
		}
	}
	br.screenshot("mesh", false)

	// An announcement written into the store by someone else, with markup
	// for an agent name: the page shows it as text.
	const evil = `<img src=x onerror="window.__xss=1">`
	forged, _ := json.Marshal(mesh.Announcement{ID: "forged", Agent: evil, LastSeen: time.Now(),
		Edges: []mesh.EdgeFigures{{To: "b", Rate: "1.0", P99: `<script>window.__xss=1</script>`, Breaker: "closed"}}})
	raw := redisStoreWithPrefix(t, url, prefix)
	if err := raw.Set(context.Background(), "mesh/baton/forged", forged, mesh.Expiry); err != nil {
		t.Fatal(err)
	}
	if err := raw.IndexAdd(context.Background(), "mesh/batons", "forged", float64(time.Now().Unix()), 0); err != nil {
		t.Fatal(err)
	}
	br.do("the mesh page again", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("figure.mesh svg")))
	if ran := run(br, "markup in announcements", chromedp.Evaluate[bool](`window.__xss === 1 || document.querySelector("svg img, td img, script:not([src])") !== null`)); ran {
		t.Error("markup from an announcement ran or was drawn as markup")
	}
	if txt := br.text(); !strings.Contains(txt, evil) {
		t.Errorf("the forged agent's name is not shown as text:\n%s", txt)
	}

	// d dies: it drops out within the expiry.
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	api := newConsoleClient(t, a.AdminAddr())
	api.header.Set("Authorization", "Bearer "+consoleToken)
	for {
		_, page := api.get("/console/mesh")
		if !strings.Contains(page, `data-agent="summarizer"`) {
			break
		}
		if time.Since(killed) > mesh.Expiry+mesh.AnnounceEvery {
			t.Fatalf("d is still in the mesh %v after it was killed", time.Since(killed))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("d dropped out %v after it was killed", time.Since(killed).Round(100*time.Millisecond))
}

// TestConsoleTracePictureInBrowser: a trace with a stop, its resume, a
// journal hit and an approval, as the Batons of a chain record them, drawn
// in headless Chromium: the agents' graph with the edge where the chain
// stopped marked resolved, and the waterfall's bars with their marks.
func TestConsoleTracePictureInBrowser(t *testing.T) {
	t.Parallel()
	store := state.NewMemory(config.Memory{})
	a := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\nadmin_token: "+consoleToken+"\n", store, nil)
	book := record.NewBook(store, time.Hour, slog.New(slog.DiscardHandler))
	const trace = "0af7651916cd43dd8448eb211c80319c"
	id := func(n int) string { return fmt.Sprintf("%s.%016x", trace, n) }
	t0 := time.Now().Add(-time.Minute)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	recs := []*record.Record{
		{ID: id(1), TraceID: trace, Side: record.Egress, From: "a", To: "b", Method: "POST", Target: "/plan", State: record.Delivered, Status: 200, Attempts: 1, Latency: 900, Created: at(0)},
		{ID: id(2), TraceID: trace, ParentID: id(1), Side: record.Ingress, From: "a", To: "b", Method: "POST", Target: "/plan", State: record.Delivered, Status: 200, Attempts: 1, Latency: 880, Created: at(10),
			Journal: &record.JournalSummary{Hits: 2, Misses: 1, Journaled: 1}},
		{ID: id(3), TraceID: trace, ParentID: id(2), Side: record.Egress, From: "b", To: "c", Method: "POST", Target: "/book", State: record.Delivered, Status: 503, Attempts: 3, Latency: 200, Created: at(50), ResolvedBy: id(4),
			Outcome: "resolved: " + id(4) + " delivered the same handoff (same key) when the chain resumed"},
		{ID: id(4), TraceID: trace, ParentID: id(2), Side: record.Egress, From: "b", To: "c", Method: "POST", Target: "/book", State: record.Delivered, Status: 200, Attempts: 1, Latency: 300, Created: at(500),
			Approval: &record.Approval{Gate: "bookings", Decision: "approved", By: "ops"}},
		{ID: id(5), TraceID: trace, ParentID: id(4), Side: record.Ingress, From: "b", To: "c", Method: "POST", Target: "/book", State: record.Delivered, Status: 200, Attempts: 1, Latency: 250, Created: at(520)},
	}
	if err := book.Write(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	br := newBrowser(t)
	admin := "http://" + a.AdminAddr()
	br.do("signing in", chromedp.Navigate(admin+"/console/login"),
		chromedp.SendKeys(chromedp.ID("token"), consoleToken), chromedp.Click(chromedp.CSS("form.login button")),
		chromedp.WaitVisible(chromedp.CSS("nav")))
	br.do("the trace", chromedp.Navigate(admin+"/console/traces/"+trace), chromedp.WaitVisible(chromedp.CSS("figure.waterfall")))
	graph := run(br, "the agents", chromedp.Evaluate[[]string](`[...document.querySelectorAll("figure.trace-graph g.node, figure.trace-graph g.edge")].map(g =>
		g.getAttribute("class") + " " + (g.dataset.agent || g.dataset.from + "→" + g.dataset.to) + " " + [...g.querySelectorAll("text")].map(t => t.textContent).join(" / "))`))
	want := []string{
		"edge ok a→b 1 handoff(s)",
		"edge warn b→c 2 handoff(s) / dead letter, resolved · retried · gated",
		"node a a / 0 received", "node b b / 1 received", "node c c / 1 received",
	}
	if strings.Join(graph, "\n") != strings.Join(want, "\n") {
		t.Errorf("the trace's graph:\n%s\nwant:\n%s", strings.Join(graph, "\n"), strings.Join(want, "\n"))
	}
	bars := run(br, "the bars", chromedp.Evaluate[[]string](`[...document.querySelectorAll("figure.waterfall g.bar")].map(g =>
		g.dataset.record.slice(-1) + " " + g.getAttribute("class") + ": " + ((g.querySelector("text.mark") || {}).textContent || ""))`))
	wantBars := []string{
		"1 bar delivered: ",
		"2 bar delivered: journal: 2 hit(s)",
		"3 bar resolved: dead letter, resolved · retried ×2",
		"4 bar delivered: gate bookings: approved",
		"5 bar delivered: ",
	}
	if strings.Join(bars, "\n") != strings.Join(wantBars, "\n") {
		t.Errorf("the waterfall:\n%s\nwant:\n%s", strings.Join(bars, "\n"), strings.Join(wantBars, "\n"))
	}
	br.screenshot("trace-picture", false)
}

// labelOverlaps reads the mesh's edge labels as Chromium lays them out and
// names each that meets another's or covers a node.
func labelOverlaps(br *browser) []string {
	br.t.Helper()
	return run(br, "the labels' boxes", chromedp.Evaluate[[]string](`(() => {
		const box = els => els.map(e => e.getBBox()).reduce((u, b) => ({x0: Math.min(u.x0, b.x), y0: Math.min(u.y0, b.y),
			x1: Math.max(u.x1, b.x + b.width), y1: Math.max(u.y1, b.y + b.height)}), {x0: 1e9, y0: 1e9, x1: -1e9, y1: -1e9});
		const meet = (a, b) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
		const labels = [...document.querySelectorAll("figure.mesh g.edge")].map(g => [g.dataset.from + "→" + g.dataset.to, box([...g.querySelectorAll("text")])]);
		const nodes = [...document.querySelectorAll("figure.mesh g.node")].map(g => [g.dataset.agent, box([g.querySelector("rect")])]);
		const out = [];
		labels.forEach(([n, b], i) => {
			labels.slice(i + 1).forEach(([m, c]) => { if (meet(b, c)) out.push(n + " meets " + m) });
			nodes.forEach(([m, c]) => { if (meet(b, c)) out.push(n + " covers " + m) });
		});
		return out;
	})()`))
}

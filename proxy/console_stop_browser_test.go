package proxy_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
)

// TestConsoleStopInBrowser: A → B → D on one Redis, every agent speaking
// A2A, D failing its first task inside a 200. In headless Chromium, the
// trace's waterfall draws D's handoff red where the chain stopped (the dead
// letter at B and D's receipt under it: stopped here) and the handoffs
// above it red with the chain stopped below; the agents' graph draws B → D
// down. The client re-sends: once the dead letter is resolved, the same
// trace marks it dead letter, resolved, drawn amber, on both sides.
func TestConsoleStopInBrowser(t *testing.T) {
	t.Parallel()
	store := sharedStore(t)
	d := &a2aAgent{failFirst: true}
	b := &a2aAgent{steps: []string{"d"}}
	dB := node(t, "d", d, "", store())
	bB := node(t, "b", b, peerYAML(map[string]string{"d": dB.IngressAddr()}), store())
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\nadmin_token: "+consoleToken+"\n"+
		peerYAML(map[string]string{"b": bB.IngressAddr()}), store())

	msg := a2aMessage("order-19", "book the trip")
	resp := send(t, aB.EgressAddr(), "b", "POST", "/", msg, http.Header{"Content-Type": {"application/json"}})
	io.Copy(io.Discard, resp.Body)
	dl := resp.Header.Get("Baton-Dead-Letter")
	if dl == "" {
		t.Fatalf("first send: %d, no Baton-Dead-Letter", resp.StatusCode)
	}
	trace := record.TraceOf(dl)
	waitTrace(t, bB.AdminAddr(), trace, func(v records.TraceView) bool { return len(v.Records) == 4 })

	br := newBrowser(t)
	admin := "http://" + aB.AdminAddr()
	br.do("signing in", chromedp.Navigate(admin+"/console/login"),
		chromedp.SendKeys(chromedp.ID("token"), consoleToken), chromedp.Click(chromedp.CSS("form.login button")),
		chromedp.WaitVisible(chromedp.CSS("nav")))
	// Each bar: its side and edge, its class, its colour, its marks.
	const barsJS = `[...document.querySelectorAll("figure.waterfall g.bar")].map(g =>
		g.querySelector("text.label").textContent.split(" ").slice(0, 2).join(" ") + " | " + g.getAttribute("class") + " | " +
		getComputedStyle(g.querySelector("rect")).fill + " | " + ((g.querySelector("text.mark") || {}).textContent || ""))`
	const edgesJS = `[...document.querySelectorAll("figure.trace-graph g.edge")].map(g =>
		g.dataset.from + "→" + g.dataset.to + " | " + g.getAttribute("class") + " | " + [...g.querySelectorAll("text")].map(t => t.textContent).join(" / "))`
	const red, amber = "rgb(180, 35, 24)", "rgb(154, 103, 0)"

	br.do("the stopped trace", chromedp.Navigate(admin+"/console/traces/"+trace), chromedp.WaitVisible(chromedp.CSS("figure.waterfall")))
	bars := run(br, "the bars", chromedp.Evaluate[[]string](barsJS))
	want := []string{
		"egress a→b | bar failed | " + red + " | chain stopped below",
		"ingress a→b | bar failed | " + red + " | chain stopped below",
		"egress b→d | bar dead | " + red + " | stopped here",
		"ingress b→d | bar failed | " + red + " | stopped here",
	}
	if strings.Join(bars, "\n") != strings.Join(want, "\n") {
		t.Errorf("the stopped trace's bars:\n%s\nwant:\n%s", strings.Join(bars, "\n"), strings.Join(want, "\n"))
	}
	edges := run(br, "the graph", chromedp.Evaluate[[]string](edgesJS))
	wantEdges := []string{
		"a→b | edge bad | 1 handoff(s) / chain stopped below",
		"b→d | edge down | 1 handoff(s) / stopped here",
	}
	if strings.Join(edges, "\n") != strings.Join(wantEdges, "\n") {
		t.Errorf("the stopped trace's graph:\n%s\nwant:\n%s", strings.Join(edges, "\n"), strings.Join(wantEdges, "\n"))
	}
	br.screenshot("trace-stopped", false)

	resp = send(t, aB.EgressAddr(), "b", "POST", "/", msg, http.Header{"Content-Type": {"application/json"}})
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Baton-Dead-Letter") != "" {
		t.Fatalf("re-sent: %d, Baton-Dead-Letter %q; want the chain completed", resp.StatusCode, resp.Header.Get("Baton-Dead-Letter"))
	}
	waitTrace(t, bB.AdminAddr(), trace, func(v records.TraceView) bool {
		for _, r := range v.Records {
			if r.ID == dl {
				return r.State == record.Delivered && r.ResolvedBy != ""
			}
		}
		return false
	})
	br.do("the trace once resolved", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("figure.waterfall")))
	bars = run(br, "the bars", chromedp.Evaluate[[]string](barsJS))
	want = []string{
		"egress a→b | bar resolved | " + amber + " | chain stopped below, resolved",
		"ingress a→b | bar resolved | " + amber + " | chain stopped below, resolved",
		"egress b→d | bar resolved | " + amber + " | dead letter, resolved",
		"ingress b→d | bar resolved | " + amber + " | dead letter, resolved",
	}
	if strings.Join(bars, "\n") != strings.Join(want, "\n") {
		t.Errorf("the resolved trace's bars:\n%s\nwant:\n%s", strings.Join(bars, "\n"), strings.Join(want, "\n"))
	}
	edges = run(br, "the graph", chromedp.Evaluate[[]string](edgesJS))
	wantEdges = []string{
		"a→b | edge warn | 1 handoff(s) / stopped below, resolved",
		"b→d | edge warn | 1 handoff(s) / dead letter, resolved",
	}
	if strings.Join(edges, "\n") != strings.Join(wantEdges, "\n") {
		t.Errorf("the resolved trace's graph:\n%s\nwant:\n%s", strings.Join(edges, "\n"), strings.Join(wantEdges, "\n"))
	}
	if txt := br.text(); !strings.Contains(txt, "resolved by") || !strings.Contains(txt, "the agent answered 200 with a failed A2A task") {
		t.Errorf("the tree does not say how the stop was resolved and why it failed:\n%s", txt)
	}
	br.screenshot("trace-resolved", false)
}

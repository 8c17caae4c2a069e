package proxy_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// chromiumPath finds headless Chromium: BATON_CHROMIUM, else chromium on
// PATH. Without it the browser test fails: it never skips.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("BATON_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the console's browser test needs Chromium and found none: install the Debian package chromium " +
		"(apt-get install chromium; .ci/run does) or set BATON_CHROMIUM to its path")
	return ""
}

// browser is one headless Chromium driving the console.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string // BATON_SCREENSHOTS: where to write screenshots, or ""
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // Chromium refuses to sandbox as root, as CI runs
		chromedp.DisableGPU,
		chromedp.WindowSize(1200, 860),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancelAlloc)
	t.Cleanup(cancel)
	// The first run starts the browser; it runs without a deadline, which
	// would end the browser with it.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	// A relative BATON_SCREENSHOTS is from the repository's root (go test
	// runs in proxy/): BATON_SCREENSHOTS=docs/img writes the docs' images.
	shots := os.Getenv("BATON_SCREENSHOTS")
	if shots != "" && !filepath.IsAbs(shots) {
		shots = filepath.Join("..", shots)
	}
	return &browser{t: t, ctx: ctx, shots: shots}
}

// tab is another tab of the same browser (the same cookies).
func (b *browser) tab() *browser {
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		b.t.Fatalf("opening a tab: %v", err)
	}
	return &browser{t: b.t, ctx: ctx, shots: b.shots}
}

func (b *browser) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, 20*time.Second)
}

// do runs actions, failing the test with what on error.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// submit runs actions that submit a form and waits for the page they load,
// returning its status.
func (b *browser) submit(what string, steps ...chromedp.Action[chromedp.Void]) int64 {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, steps...)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return resp.Status
}

func run[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// text is the page's visible text, its runs of white space as one space.
func (b *browser) text() string {
	b.t.Helper()
	return strings.Join(strings.Fields(run(b, "reading the page", chromedp.Text(chromedp.CSS("body")))), " ")
}

func (b *browser) location() string {
	b.t.Helper()
	return run(b, "reading the location", chromedp.Location())
}

// screenshot writes the viewport (the whole page with full) to
// $BATON_SCREENSHOTS/console-name.png.
func (b *browser) screenshot(name string, full bool) {
	b.t.Helper()
	if b.shots == "" {
		return
	}
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100) // quality 100: PNG
	}
	png := run(b, "screenshot "+name, shot)
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, "console-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// screenshotOf writes the first element css selects to
// $BATON_SCREENSHOTS/console-name.png.
func (b *browser) screenshotOf(name, css string) {
	b.t.Helper()
	if b.shots == "" {
		return
	}
	png := run(b, "screenshot "+name, chromedp.Screenshot(chromedp.CSS(css)))
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, "console-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// TestConsoleInBrowser drives the console in headless Chromium on a chain
// of two Batons (analyst → summarizer on one store): sign in through the
// form, open a trace from the overview's form, replay a dead letter once the
// receiver's agent is back, drop another with JavaScript off, and view a
// dead letter whose target, header and body hold markup meant to run.
func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t)
	p := startConsolePair(t, state.NewMemory(config.Memory{}), true)
	admin := "http://" + p.a.AdminAddr()
	api := newConsoleClient(t, p.a.AdminAddr())
	api.header.Set("Authorization", "Bearer "+consoleToken)

	// A delivered handoff, and traffic for the overview's figures.
	if resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/tasks", `{"task":"summarize"}`,
		http.Header{"Traceparent": {tp}}); resp.StatusCode != 200 {
		t.Fatalf("handoff: %d", resp.StatusCode)
	}
	waitTraceVia(t, api, traceID, 2)
	for range 4 {
		send(t, p.a.EgressAddr(), "summarizer", "POST", "/tasks", `{"task":"more"}`, nil)
	}
	if n := p.got.count(); n != 5 {
		t.Fatalf("the agent got %d handoffs, want 5", n)
	}

	// Dead letters: the receiver's agent is down.
	p.agent.down()
	replayID := p.deadLetter(t, "/tasks", `{"task":"replay me"}`, nil)
	dropID := p.deadLetter(t, "/tasks", `{"task":"drop me"}`, nil)
	const script, img = `<script>window.__xss=1</script>`, `<img src=x onerror="window.__xss=1">`
	xssID := p.deadLetter(t, "/tasks?q="+script, "note: "+script+"\n"+img+"\n", http.Header{"X-Note": {img}})
	waitFor(t, "three dead letters listed", func() bool {
		return strings.Count(api.page("/console/deadletters"), `/replay"`) == 3
	})

	// Sign in through the form.
	b.do("opening the console", chromedp.Navigate(admin+"/console/"))
	if txt := b.text(); !strings.Contains(txt, "Sign in") || strings.Contains(txt, "Dead letters") {
		t.Fatalf("signed out, the console shows:\n%s", txt)
	}
	if st := b.submit("signing in",
		chromedp.SendKeys(chromedp.ID("token"), consoleToken),
		chromedp.Click(chromedp.CSS("form.login button"))); st != 200 {
		t.Fatalf("after signing in: %d", st)
	}
	if loc, txt := b.location(), b.text(); loc != admin+"/console/" || !strings.Contains(txt, "Handoff health by edge") ||
		!strings.Contains(txt, "analyst→summarizer") || !strings.Contains(txt, "3 dead letters") {
		t.Fatalf("after signing in: %s\n%s", loc, txt)
	}
	b.screenshot("overview", false)

	// Open the trace from the overview's form: both records, as a tree.
	if st := b.submit("opening the trace",
		chromedp.SendKeys(chromedp.ID("trace-id"), traceID),
		chromedp.Click(chromedp.CSS("form.inline button"))); st != 200 {
		t.Fatalf("trace page: %d", st)
	}
	if loc := b.location(); loc != admin+"/console/traces/"+traceID {
		t.Errorf("the form opened %s", loc)
	}
	nested := run(b, "counting records", chromedp.Evaluate[int](`document.querySelectorAll("ul.tree > li > ul > li > .rec").length`))
	roots := run(b, "counting roots", chromedp.Evaluate[int](`document.querySelectorAll("ul.tree > li > .rec").length`))
	txt := b.text()
	if roots != 1 || nested != 1 || !strings.Contains(txt, "analyst → summarizer") ||
		!strings.Contains(txt, "summarizer received from analyst") || !strings.Contains(txt, "Hash chain intact") {
		t.Errorf("the trace should show the delegation record with the receipt under it (%d root, %d nested):\n%s", roots, nested, txt)
	}
	// Above the tree, the waterfall: a bar per record, the receipt indented
	// under its handoff and starting after it.
	bars := run(b, "the waterfall", chromedp.Evaluate[[]string](`[...document.querySelectorAll("figure.waterfall g.bar")].map(g =>
		g.getAttribute("class") + " " + g.querySelector("text.label").getAttribute("x") + " " + g.querySelector("rect").getAttribute("x"))`))
	if len(bars) != 2 || !strings.HasPrefix(bars[0], "bar delivered 6 ") || !strings.HasPrefix(bars[1], "bar delivered 18 ") {
		t.Errorf("waterfall bars %q: want the handoff and, indented, its receipt, both delivered", bars)
	}
	graph := run(b, "the trace's agents", chromedp.Evaluate[[]string](`[...document.querySelectorAll("figure.trace-graph g.node, figure.trace-graph g.edge")].map(g =>
		g.getAttribute("class") + " " + (g.dataset.agent || g.dataset.from + "→" + g.dataset.to))`))
	if strings.Join(graph, ", ") != "edge ok analyst→summarizer, node analyst, node summarizer" {
		t.Errorf("the trace's graph %q: want analyst and summarizer with the edge between them", graph)
	}
	b.screenshot("trace", false)

	// The receiver's agent is back: replay one dead letter from the list.
	p.agent.up()
	b.do("opening the dead letters", chromedp.Navigate(admin+"/console/deadletters"))
	for _, id := range []string{replayID, dropID, xssID} {
		if !strings.Contains(b.text(), id[33:]) {
			t.Fatalf("dead letter %s not listed:\n%s", id, b.text())
		}
	}
	b.screenshot("deadletters", false)
	b.submit("replaying", chromedp.Click(chromedp.CSS(`form[action="/console/deadletters/`+replayID+`/replay"] button`)))
	flash := run(b, "reading the flash", chromedp.Text(chromedp.CSS(".flash")))
	if want := "Replayed " + replayID + ": delivered, status 200."; flash != want {
		t.Errorf("flash %q, want %q", flash, want)
	}
	if html := run(b, "reading the list", chromedp.OuterHTML(chromedp.CSS("main"))); strings.Contains(html, "/console/records/"+replayID) {
		t.Errorf("the replayed dead letter is still listed:\n%s", html)
	}
	if n := p.got.count(); n != 6 || string(p.got.body[5]) != `{"task":"replay me"}` {
		t.Errorf("the agent got %d handoffs, want 6: the replayed one exactly once", n)
	}
	waitFor(t, "the replayed record delivered", func() bool {
		return strings.Contains(api.page("/console/records/"+replayID), `<span class="state delivered">delivered 200</span>`)
	})
	b.do("opening the replayed record", chromedp.Navigate(admin+"/console/records/"+replayID))
	if state := run(b, "reading the state", chromedp.Text(chromedp.CSS("span.state"))); state != "delivered 200" {
		t.Errorf("the replayed record is %q", state)
	}

	// With JavaScript off every page reads, and a dead letter is dropped
	// with its plain form.
	nojs := b.tab()
	nojs.do("turning JavaScript off", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	for path, want := range map[string]string{
		"/console/":                     "analyst→summarizer",
		"/console/traces/" + traceID:    "summarizer</strong> received from <strong>analyst",
		"/console/records/" + replayID:  "delivered 200",
		"/console/mesh":                 `data-agent="summarizer"`,
		"/console/deadletters":          dropID,
		"/console/records/" + xssID:     "&lt;script&gt;window.__xss=1&lt;/script&gt;",
		"/console/static/console.css":   "",
		"/console/traces?id=" + traceID: "Hash chain intact",
	} {
		nojs.do("opening "+path+" without JavaScript", chromedp.Navigate(admin+path))
		if want == "" {
			continue
		}
		if html := run(nojs, "reading "+path, chromedp.OuterHTML(chromedp.CSS("main"))); !strings.Contains(html, want) {
			t.Errorf("%s without JavaScript lacks %q:\n%s", path, want, html)
		}
	}
	nojs.do("opening the dead letters without JavaScript", chromedp.Navigate(admin+"/console/deadletters"))
	nojs.submit("dropping", chromedp.Click(chromedp.CSS(`form[action="/console/deadletters/`+dropID+`/drop"] button`)))
	if html := run(nojs, "reading the flash", chromedp.OuterHTML(chromedp.CSS(".flash"))); !strings.Contains(html, "Dropped "+dropID) {
		t.Errorf("no flash after the drop: %s", html)
	}
	if html := run(nojs, "reading the list", chromedp.OuterHTML(chromedp.CSS("main"))); strings.Contains(html, "/console/records/"+dropID) {
		t.Errorf("the dropped dead letter is still listed:\n%s", html)
	}
	if n := p.got.count(); n != 6 {
		t.Errorf("the agent got %d handoffs after the drop, want 6", n)
	}

	// The dead letter whose target, header and body carry markup: shown as
	// text, nothing of it runs or becomes an element.
	b.do("opening the record with markup", chromedp.Navigate(admin+"/console/records/"+xssID))
	if v := run(b, "reading window.__xss", chromedp.Evaluate[string](`typeof window.__xss`)); v != "undefined" {
		t.Errorf("window.__xss is %s: the page ran the record's markup", v)
	}
	if n := run(b, "counting elements", chromedp.Evaluate[int](`document.querySelectorAll("script, img, main iframe").length`)); n != 0 {
		t.Errorf("the record page has %d script/img elements: markup from the record became elements", n)
	}
	txt = b.text()
	body := run(b, "reading the body", chromedp.Text(chromedp.CSS("pre.body")))
	for _, want := range []string{script, img} {
		if !strings.Contains(txt, want) || !strings.Contains(body, want) {
			t.Errorf("the page does not show %q as text:\n%s", want, txt)
		}
	}
	if !strings.Contains(txt, "POST /tasks?q="+script) {
		t.Errorf("the target is not shown as text:\n%s", txt)
	}
	b.screenshot("record", true)

	// The records agree with what the browser did.
	if rec := recordOf(t, api, replayID); rec != record.Delivered {
		t.Errorf("replayed record %s", rec)
	}
	if rec := recordOf(t, api, dropID); rec != record.Dead {
		t.Errorf("dropped record %s: it stays a dead letter's record, unlisted", rec)
	}
}

// waitTraceVia waits until the trace page of the console shows n records.
func waitTraceVia(t *testing.T, c *consoleClient, id string, n int) {
	t.Helper()
	waitFor(t, "the trace's records", func() bool {
		resp, body := c.get("/console/traces/" + id)
		return resp.StatusCode == 200 && strings.Count(body, `<div class="rec delivered">`) == n
	})
}

// recordOf reads a record's state from its console page.
func recordOf(t *testing.T, c *consoleClient, id string) record.State {
	t.Helper()
	body := c.page("/console/records/" + id)
	for _, st := range []record.State{record.Delivered, record.Dead, record.Replayed, record.Failed, record.Sent} {
		if strings.Contains(body, `<span class="state `+string(st)+`">`) {
			return st
		}
	}
	t.Fatalf("no state on the record page of %s", id)
	return ""
}

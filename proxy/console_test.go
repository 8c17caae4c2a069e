package proxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/state"
)

const consoleToken = "console-test-token"

// consoleClient is a browser-like client of one Baton's console: it keeps
// cookies, does not follow redirects, and sends extra headers.
type consoleClient struct {
	t      *testing.T
	base   string // http://admin
	http   *http.Client
	header http.Header
}

func newConsoleClient(t *testing.T, admin string) *consoleClient {
	jar, _ := cookiejar.New(nil)
	return &consoleClient{t: t, base: "http://" + admin, header: http.Header{},
		http: &http.Client{Jar: jar, Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request and returns the response with its body read.
func (c *consoleClient) do(method, path string, form url.Values, hdr http.Header) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range []http.Header{c.header, hdr} {
		for k, vs := range h {
			req.Header[k] = vs
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

func (c *consoleClient) get(path string) (*http.Response, string) {
	c.t.Helper()
	return c.do("GET", path, nil, nil)
}

// page GETs a page that must answer 200.
func (c *consoleClient) page(path string) string {
	c.t.Helper()
	resp, body := c.get(path)
	if resp.StatusCode != 200 {
		c.t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
	}
	return body
}

var csrfField = regexp.MustCompile(`name="(?:baton-csrf" content|csrf" value)="([^"]+)"`)

// csrfOf returns the CSRF token a page's forms carry (its head has it
// for scripts, the sign-in form its own).
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in:\n%s", page)
	}
	return m[1]
}

// login signs in through the form.
func (c *consoleClient) login(token string) *http.Response {
	c.t.Helper()
	_, page := c.get("/console/login")
	resp, body := c.do("POST", "/console/login", url.Values{"csrf": {csrfOf(c.t, page)}, "token": {token},
		"next": {"/console/deadletters"}}, nil)
	if token == consoleToken && resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("sign-in: %d\n%s", resp.StatusCode, body)
	}
	return resp
}

// checkConsoleHeaders checks the headers every console answer carries.
func checkConsoleHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; " +
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"Cache-Control":          "no-store",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

func TestConsoleLoginRequired(t *testing.T) {
	t.Parallel()
	b := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\nadmin_token: "+consoleToken+"\n", nil)
	c := newConsoleClient(t, b.AdminAddr())

	resp, _ := c.get("/console")
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %d → %q, want 301 → /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, path := range []string{"/console/", "/console/deadletters", "/console/traces/0af7651916cd43dd8448eb211c80319c"} {
		resp, body := c.get(path)
		checkConsoleHeaders(t, path, resp)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `action="/console/login"`) ||
			strings.Contains(body, "Dead letters</a>") {
			t.Errorf("GET %s signed out: %d, want 401 with the sign-in form and no nav:\n%s", path, resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
	}
	// A POST signed out is refused, CSRF or not.
	if resp, _ := c.do("POST", "/console/deadletters/x/drop", url.Values{"csrf": {"x"}}, nil); resp.StatusCode != 401 {
		t.Errorf("POST signed out: %d, want 401", resp.StatusCode)
	}

	// A wrong token is refused: no cookie.
	resp = c.login("wrong")
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("sign-in with a wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := c.do("GET", "/console/", nil, http.Header{"Authorization": {"Bearer wrong"}}); resp.StatusCode != 401 {
		t.Errorf("a wrong bearer token: %d, want 401", resp.StatusCode)
	}

	// The right one: a session cookie that is not the token, then the page
	// asked for.
	resp = c.login(consoleToken)
	if loc := resp.Header.Get("Location"); loc != "/console/deadletters" {
		t.Errorf("after sign-in: Location %q, want /console/deadletters", loc)
	}
	var sess *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "baton_console" {
			sess = ck
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != "/console" ||
		sess.Secure || sess.MaxAge != 12*3600 || sess.Value == "" || strings.Contains(sess.Value, consoleToken) {
		t.Errorf("session cookie %+v", sess)
	}
	body := c.page("/console/")
	for _, want := range []string{"Overview", "Dead letters</a>", `href="/console/approvals"`, "admin", "Sign out"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview signed in lacks %q:\n%s", want, body)
		}
	}

	// The bearer token works without a session (scripts).
	bearer := newConsoleClient(t, b.AdminAddr())
	bearer.header.Set("Authorization", "Bearer "+consoleToken)
	bearer.page("/console/deadletters")

	// Sign out ends the session: the cookie no longer signs in.
	resp, _ = c.do("POST", "/console/logout", url.Values{"csrf": {csrfOf(t, body)}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	replay := newConsoleClient(t, b.AdminAddr())
	replay.header.Set("Cookie", "baton_console="+sess.Value)
	if resp, _ := replay.get("/console/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the session after sign-out: %d, want 401", resp.StatusCode)
	}

	// The JSON admin API answers as before.
	resp, err := http.Get("http://" + b.AdminAddr() + "/v1/deadletters")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if p := readProblem(t, resp); resp.StatusCode != 401 || !strings.HasSuffix(p.Type, "#unauthorized") {
		t.Errorf("admin API without a token: %d %+v", resp.StatusCode, p)
	}
}

// TestConsoleApproverIsNotAdmin: an approver's token signs in (the
// approvals page will know who decides) but opens none of what the admin
// API's bearer group serves, as on the API.
func TestConsoleApproverIsNotAdmin(t *testing.T) {
	t.Parallel()
	const alice = "alice-approver-token-0123456789"
	env := func(o *proxy.Options) {
		o.Env = func(k string) string { return map[string]string{"ALICE_TOKEN": alice}[k] }
	}
	approvers := "approvals: {approvers: [{name: alice, token_env: ALICE_TOKEN}]}\n"
	b := startBatonWith(t, "agent: analyst\nupstream: http://127.0.0.1:1\nadmin_token: "+consoleToken+"\n"+approvers, nil, env)

	c := newConsoleClient(t, b.AdminAddr())
	c.header.Set("Authorization", "Bearer "+alice)
	for _, path := range []string{"/console/", "/console/deadletters", "/console/traces/" + traceID,
		"/console/records/" + traceID + ".00f067aa0ba902b7", "/console/traces"} {
		resp, body := c.get(path)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Signed in as alice") ||
			strings.Contains(body, "Dead letters</a>") {
			t.Errorf("GET %s as approver: %d, want 403 without the admin pages in the nav:\n%s", path, resp.StatusCode, body)
		}
	}
	_, page := c.get("/console/")
	if resp, _ := c.do("POST", "/console/deadletters/"+traceID+".00f067aa0ba902b7/drop",
		url.Values{"csrf": {csrfOf(t, page)}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("drop as approver: %d, want 403", resp.StatusCode)
	}

	// Signed in through the form, an approver lands on the approvals page.
	form := newConsoleClient(t, b.AdminAddr())
	_, login := form.get("/console/login")
	resp, _ := form.do("POST", "/console/login", url.Values{"csrf": {csrfOf(t, login)}, "token": {alice}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/approvals" {
		t.Errorf("approver sign-in: %d → %q, want 303 → /console/approvals", resp.StatusCode, resp.Header.Get("Location"))
	}

	// With no admin token the admin API is open, and so is the console,
	// whoever signs in.
	open := startBatonWith(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+approvers, nil, env)
	oc := newConsoleClient(t, open.AdminAddr())
	oc.header.Set("Authorization", "Bearer "+alice)
	if body := oc.page("/console/deadletters"); !strings.Contains(body, "<span>alice</span>") {
		t.Errorf("open console with an approver's token:\n%s", body)
	}
	if body := newConsoleClient(t, open.AdminAddr()).page("/console/"); !strings.Contains(body, "<span>anonymous</span>") {
		t.Errorf("open console without a token:\n%s", body)
	}
}

func TestConsoleRefusesCrossSiteAndMissingCSRF(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml string }{
		{"token", "admin_token: " + consoleToken + "\n"},
		{"open", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+tc.yaml, nil)
			c := newConsoleClient(t, b.AdminAddr())
			if tc.yaml != "" {
				c.login(consoleToken)
			}
			csrf := csrfOf(t, c.page("/console/deadletters?offset=0"))
			id := "0af7651916cd43dd8448eb211c80319c.00f067aa0ba902b7"
			post := func(form url.Values, hdr http.Header) (int, string) {
				resp, body := c.do("POST", "/console/deadletters/"+id+"/drop", form, hdr)
				checkConsoleHeaders(t, "POST", resp)
				return resp.StatusCode, body
			}
			for _, bad := range []struct {
				what string
				form url.Values
				hdr  http.Header
			}{
				{"no CSRF token", url.Values{}, nil},
				{"a wrong CSRF token", url.Values{"csrf": {csrf + "x"}}, nil},
				{"a cross-site Origin", url.Values{"csrf": {csrf}}, http.Header{"Origin": {"http://evil.example"}}},
				{"Sec-Fetch-Site: cross-site", url.Values{"csrf": {csrf}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}},
				{"Sec-Fetch-Site: same-site", url.Values{"csrf": {csrf}}, http.Header{"Sec-Fetch-Site": {"same-site"}}},
			} {
				if st, body := post(bad.form, bad.hdr); st != http.StatusForbidden || !strings.Contains(body, "Forbidden") {
					t.Errorf("%s: %d, want 403:\n%s", bad.what, st, body)
				}
			}
			// The login form has its own token.
			if resp, _ := c.do("POST", "/console/login", url.Values{"token": {consoleToken}}, nil); resp.StatusCode != 403 {
				t.Errorf("sign-in without its CSRF token: %d, want 403", resp.StatusCode)
			}
			// Same origin with the token: the action runs (the record is
			// unknown) and says so on the page it returns to.
			st, _ := post(url.Values{"csrf": {csrf}}, http.Header{"Origin": {"http://" + b.AdminAddr()}, "Sec-Fetch-Site": {"same-origin"}})
			if st != http.StatusSeeOther {
				t.Fatalf("same-origin POST with the token: %d, want 303", st)
			}
			if body := c.page("/console/deadletters"); !strings.Contains(body, "Drop of "+id+" refused: no such record") {
				t.Errorf("no flash message after the drop:\n%s", body)
			}
			if body := c.page("/console/deadletters"); strings.Contains(body, "refused") {
				t.Errorf("the flash message shows twice:\n%s", body)
			}
		})
	}
}

func TestConsoleEscapesRecords(t *testing.T) {
	t.Parallel()
	p := startConsolePair(t, state.NewMemory(config.Memory{}), false)
	p.agent.down()
	const xss = "<script>alert(1)</script>"
	id := p.deadLetter(t, "/tasks?q="+xss, `{"note":"`+xss+`"}`, http.Header{"Traceparent": {tp}, "X-Note": {xss}})
	c := newConsoleClient(t, p.a.AdminAddr())
	c.header.Set("Authorization", "Bearer "+consoleToken)
	waitFor(t, "the dead letter listed", func() bool { return strings.Contains(c.page("/console/deadletters"), id[33:]) })
	for _, path := range []string{"/console/records/" + id, "/console/deadletters", "/console/traces/" + traceID} {
		body := c.page(path)
		if strings.Contains(body, xss) || strings.Contains(body, "<script") {
			t.Errorf("%s holds the script unescaped:\n%s", path, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the escaped text:\n%s", path, body)
		}
	}
	rec := c.page("/console/records/" + id)
	for _, want := range []string{"X-Note", "Checkpoint", "Replay", "Drop", `{&#34;note&#34;:&#34;&lt;script&gt;`} {
		if !strings.Contains(rec, want) {
			t.Errorf("record page lacks %q:\n%s", want, rec)
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	waitWithin(t, 5*time.Second, what, ok)
}

// waitWithin waits up to d for ok.
func waitWithin(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConsoleNotFoundPages(t *testing.T) {
	t.Parallel()
	b := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n", nil)
	c := newConsoleClient(t, b.AdminAddr())
	for _, path := range []string{
		"/console/traces/0af7651916cd43dd8448eb211c80319c",
		"/console/traces/not-a-trace",
		"/console/records/0af7651916cd43dd8448eb211c80319c.00f067aa0ba902b7",
		"/console/records/nope",
		"/console/nope",
	} {
		resp, body := c.get(path)
		checkConsoleHeaders(t, path, resp)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
			!strings.Contains(body, "<h1>Not found</h1>") {
			t.Errorf("GET %s: %d %s, want a 404 page:\n%s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	// The admin API's own 404 stays problem+json.
	resp, err := http.Get("http://" + b.AdminAddr() + "/v1/nope")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if readProblem(t, resp); resp.StatusCode != 404 {
		t.Errorf("admin API 404: %d", resp.StatusCode)
	}
}

func TestConsoleStoreDown(t *testing.T) {
	t.Parallel()
	srv, store := killableRedis(t)
	b := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://127.0.0.1:1}}\n", store)
	c := newConsoleClient(t, b.AdminAddr())
	c.page("/console/deadletters")
	srv.Kill()
	for _, path := range []string{"/console/traces/" + traceID, "/console/records/" + traceID + ".00f067aa0ba902b7",
		"/console/deadletters", "/console/"} {
		resp, body := c.get(path)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "store") {
			t.Errorf("GET %s with the store down: %d, want 503 saying so:\n%s", path, resp.StatusCode, body)
		}
	}
}

func TestConsoleOverviewFigures(t *testing.T) {
	t.Parallel()
	got := &seen{}
	ag := httptestServer(got.handler(200, `{"ok":true}`))
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n", nil)
	a := startMetered(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}, gone: {url: http://"+closedAddr(t)+"}}\nretry: {attempts: 0}\n")
	for range 3 {
		send(t, a.EgressAddr(), "summarizer", "POST", "/tasks", `{}`, nil)
	}
	send(t, a.EgressAddr(), "gone", "POST", "/tasks", `{}`, nil)

	body := newConsoleClient(t, a.AdminAddr()).page("/console/")
	row := regexp.MustCompile(`<tr><td>analyst→summarizer</td><td>egress</td><td class="num">3</td><td class="num">[0-9.]+</td><td class="num">0.0%</td><td class="num">[0-9.]+(ms|µs|s)</td>`)
	if !row.MatchString(body) {
		t.Errorf("overview lacks the analyst→summarizer row with 3 handoffs, 0.0%% errors and a p50:\n%s", body)
	}
	if !regexp.MustCompile(`<td>analyst→gone</td><td>egress</td><td class="num">1</td><td class="num">[0-9.]+</td><td class="num">100.0%</td>`).MatchString(body) {
		t.Errorf("overview lacks the analyst→gone row, 100%% errors:\n%s", body)
	}
	if !strings.Contains(body, `<strong class="count">1</strong> dead letter</a>`) ||
		!strings.Contains(body, "<tr><td>analyst→gone</td><td class=\"num\">1</td></tr>") {
		t.Errorf("overview does not count the dead letter:\n%s", body)
	}

	// Without Prometheus metrics the page says they are off.
	if body := newConsoleClient(t, b.AdminAddr()).page("/console/"); !strings.Contains(body, "Metrics are off") {
		t.Errorf("overview without metrics:\n%s", body)
	}
}

// switchAgent is an agent on a fixed loopback address that can go down
// (its listener closed: connections are refused) and come back.
type switchAgent struct {
	t    *testing.T
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
}

func newSwitchAgent(t *testing.T, h http.Handler) *switchAgent {
	a := &switchAgent{t: t, h: h, addr: "127.0.0.1:0"}
	a.up()
	t.Cleanup(a.down)
	return a
}

func (a *switchAgent) url() string { return "http://" + a.addr }

func (a *switchAgent) up() {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var l net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if l, err = net.Listen("tcp", a.addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		a.t.Fatalf("agent listening again on %s: %v", a.addr, err)
	}
	a.addr = l.Addr().String()
	a.srv = &http.Server{Handler: a.h}
	go a.srv.Serve(l)
}

func (a *switchAgent) down() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv != nil {
		a.srv.Close()
		a.srv = nil
	}
}

// startConsolePair is analyst's Baton (admin token set) handing off to
// summarizer's, both on one store, summarizer's agent one that can go
// down. Analyst does not retry and its breaker stays closed; with metered
// it serves Prometheus metrics as baton serve does.
func startConsolePair(t *testing.T, store state.Store, metered bool) *consolePair {
	t.Helper()
	p := &consolePair{got: &seen{}}
	p.agent = newSwitchAgent(t, p.got.handler(200, `{"ok":true}`))
	p.b = startBaton(t, "agent: summarizer\nupstream: "+p.agent.url()+"\n", store)
	var opts func(*proxy.Options)
	if metered {
		opts = prometheusMetrics(t)
	}
	p.a = startBatonWith(t, "agent: analyst\nupstream: http://127.0.0.1:1\nadmin_token: "+consoleToken+
		"\npeers: {summarizer: {url: http://"+p.b.IngressAddr()+"}}\nretry: {attempts: 0}\nbreaker: {failures: 100}\n",
		store, opts)
	return p
}

// prometheusMetrics gives a Baton metrics served for Prometheus on its
// admin listener, from a registry of its own.
func prometheusMetrics(t *testing.T) func(*proxy.Options) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return func(o *proxy.Options) {
		o.MeterProvider, o.Metrics = mp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
}

type consolePair struct {
	a, b  *baton
	agent *switchAgent
	got   *seen
}

// deadLetter makes a handoff while summarizer's agent is down and returns
// its dead letter.
func (p *consolePair) deadLetter(t *testing.T, path, body string, hdr http.Header) string {
	t.Helper()
	resp := send(t, p.a.EgressAddr(), "summarizer", "POST", path, body, hdr)
	if resp.StatusCode < 500 {
		t.Fatalf("handoff with the agent down: %d", resp.StatusCode)
	}
	return deadLetterID(t, resp)
}

// TestConsoleReplayAndDrop replays one dead letter and drops another
// through the console's forms, signed in by cookie.
func TestConsoleReplayAndDrop(t *testing.T) {
	t.Parallel()
	p := startConsolePair(t, state.NewMemory(config.Memory{}), false)
	p.agent.down()
	first := p.deadLetter(t, "/tasks", `{"n":1}`, nil)
	second := p.deadLetter(t, "/tasks", `{"n":2}`, nil)
	p.agent.up()

	c := newConsoleClient(t, p.a.AdminAddr())
	c.login(consoleToken)
	var page string
	waitFor(t, "both dead letters listed", func() bool {
		page = c.page("/console/deadletters")
		return strings.Contains(page, first) && strings.Contains(page, second)
	})
	csrf := csrfOf(t, page)
	resp, _ := c.do("POST", "/console/deadletters/"+first+"/replay", url.Values{"csrf": {csrf}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/deadletters" {
		t.Fatalf("replay: %d → %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	page = c.page("/console/deadletters")
	if !strings.Contains(page, "Replayed "+first+": delivered, status 200.") || !strings.Contains(page, `class="flash ok"`) {
		t.Errorf("no flash saying the replay delivered:\n%s", page)
	}
	if strings.Contains(page, "/console/records/"+first) || !strings.Contains(page, "/console/records/"+second) {
		t.Errorf("after the replay the list should hold only %s:\n%s", second, page)
	}
	if n := p.got.count(); n != 1 || string(p.got.body[0]) != `{"n":1}` {
		t.Errorf("the agent got %d handoff(s), want the replayed one once", n)
	}
	// The outcome is written off the request path.
	waitFor(t, "the replayed record delivered", func() bool {
		return strings.Contains(c.page("/console/records/"+first), `<span class="state delivered">delivered 200</span>`)
	})

	// Replaying it again is refused, and said so.
	c.do("POST", "/console/deadletters/"+first+"/replay", url.Values{"csrf": {csrf}}, nil)
	if page := c.page("/console/deadletters"); !strings.Contains(page, "Replay of "+first+" refused: record is not a dead letter") ||
		!strings.Contains(page, `class="flash fail"`) {
		t.Errorf("a second replay is not refused on the page:\n%s", page)
	}

	resp, _ = c.do("POST", "/console/deadletters/"+second+"/drop", url.Values{"csrf": {csrf}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("drop: %d", resp.StatusCode)
	}
	page = c.page("/console/deadletters")
	if !strings.Contains(page, "Dropped "+second) || !strings.Contains(page, "No dead letters") {
		t.Errorf("after the drop:\n%s", page)
	}
	if n := p.got.count(); n != 1 {
		t.Errorf("the agent got %d handoffs, want 1: dropping sends nothing", n)
	}
	if rec := c.page("/console/records/" + second); !strings.Contains(rec, `<span class="state dead">dead`) {
		t.Errorf("the dropped dead letter's record should stay, dead:\n%s", rec)
	}
}

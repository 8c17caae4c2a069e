package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/state/redistest"
)

// redisCost runs n handoffs from a to b (send makes one), both Batons on
// one private Redis, once warmed up, and returns the commands Redis served
// per handoff, by name, and in all.
func redisCost(t *testing.T, n int, send func(i int)) (map[string]float64, float64) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(costRedis.URL(), "redis://")})
	t.Cleanup(func() { rc.Close() })
	for i := range 5 {
		send(-1 - i) // connections, holders, announcements
	}
	before := settled(t, rc) // the warm-up's records flushed
	for i := range n {
		send(i)
	}
	after := settled(t, rc) // the records flushed (the book's flusher)
	per := map[string]float64{}
	total := 0.0
	for name, c := range after {
		if d := c - before[name]; d > 0 && name != "info" {
			per[name] = float64(d) / float64(n)
			total += per[name]
		}
	}
	return per, total
}

// settled returns the commands Redis served once no handoff's write is
// still coming: the count of record and window commands has not moved for
// 200ms (the Batons' background marks go on, and are left in).
func settled(t *testing.T, rc *redis.Client) map[string]int {
	t.Helper()
	quiet := func(m map[string]int) int {
		return m["hsetnx"] + m["hset"] + m["set"] + m["evalsha"] + m["rpush"] + m["zincrby"]
	}
	last, since := redistest.Commands(t, rc), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(25 * time.Millisecond)
		cur := redistest.Commands(t, rc)
		if quiet(cur) != quiet(last) {
			last, since = cur, time.Now()
			continue
		}
		if time.Since(since) >= 200*time.Millisecond {
			return cur
		}
	}
	t.Fatal("the Batons' writes never settled")
	return nil
}

var costRedis *redistest.Server

// TestRedisCommandsPerHandoff counts what one handoff between two Batons
// on Redis costs Redis, by kind of handoff, on defaults, and what a request
// through a chain of three costs: the figures docs/records.md's table shows. The background work of a Baton (its
// holder's mark, its mesh announcement) is in the counts too, spread over
// the handoffs. The plain body is too short to fingerprint; the 512-byte
// one is not, and its sender has no identity key, so a looks its text up
// among its agent's untrusted fingerprints and b keeps its fingerprints.
func TestRedisCommandsPerHandoff(t *testing.T) {
	costRedis = redistest.Start(t)
	ag := benchAgent(t)
	model := httptest.NewServer(&chatModel{in: 100, out: 20, rounds: 1})
	t.Cleanup(model.Close)
	store := fmt.Sprintf("store: {redis: {url: %q}}\n", costRedis.URL())
	bB := startBaton(t, "agent: b\nupstream: "+ag.URL+"\nlog_level: warn\n"+store+"edges: [{from: a}, {from: m, mcp: {}}]\n", nil)
	// A chain of three: a hands off to r, whose agent hands each task on to
	// c through its Baton as agents are written, with no trace context.
	cB := startBaton(t, "agent: c\nupstream: "+ag.URL+"\nlog_level: warn\n"+store+"edges: [{from: r}]\n", nil)
	var rEgress atomic.Pointer[string]
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+*rEgress.Load()+"/task", strings.NewReader(string(body)))
		req.Host = "c"
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(relay.Close)
	rB := startBaton(t, "agent: r\nupstream: "+relay.URL+"\nlog_level: warn\n"+store+
		"peers: {c: {url: http://"+cB.IngressAddr()+"}}\nedges: [{from: a}, {to: c}]\n", nil)
	re := rB.EgressAddr()
	rEgress.Store(&re)
	// a hands off to b; m is a's agent under another name, its edge to b MCP.
	// a's agent asks the model once per request it handles.
	var aEgress atomic.Pointer[string]
	asker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		resp, err := http.Post("http://"+*aEgress.Load()+"/llm/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"`+r.URL.Query().Get("q")+`"}]}`))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(asker.Close)
	aB := startBatonWith(t, "agent: a\nupstream: "+asker.URL+"\nlog_level: warn\n"+store+
		"peers: {b: {url: http://"+bB.IngressAddr()+"}, r: {url: http://"+rB.IngressAddr()+"}}\nedges: [{to: b}, {to: r}, {from: web, callers: {bearer: {tokens_env: WEB_TOKENS}}, chain_budget: {from_header: true}},\n"+
		"  {from: caller, callers: {anonymous: true}}]\n"+
		"external: {routes: [{name: llm, url: \""+model.URL+"/\", api: openai}]}\njournal: {hosts: [\""+strings.TrimPrefix(model.URL, "http://")+"\"]}\n", nil,
		func(o *proxy.Options) {
			o.Env = func(k string) string {
				if k == "WEB_TOKENS" {
					return webToken1
				}
				return ""
			}
		})
	e := aB.EgressAddr()
	aEgress.Store(&e)
	mB := startBaton(t, "agent: m\nupstream: "+ag.URL+"\nlog_level: warn\n"+store+
		"peers: {b: {url: http://"+bB.IngressAddr()+"}}\nedges: [{to: b, mcp: {}}]\n", nil)
	client := &http.Client{}
	post := func(url, host, body string, hdr ...string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	const n = 200
	for _, kind := range []struct {
		name    string
		ceiling float64 // commands per handoff not to pass: about one over what it costs, for the retries of chained writes that race (hmget, hset, hsetnx)
		send    func(i int)
	}{
		{"plain", 15, func(i int) { post("http://"+aB.EgressAddr()+"/task", "b", fmt.Sprintf(`{"task":"plain %d"}`, i)) }},
		{"plain, 512 bytes of text", 19, func(i int) {
			post("http://"+aB.EgressAddr()+"/task", "b", fmt.Sprintf(`{"task":"summarize %d","text":%q}`, i, proseOf(i, 460)))
		}},
		{"a chain of three, a → r → c (a request: two handoffs)", 38, func(i int) { // races meet more often under -race: 35.4 there
			post("http://"+aB.EgressAddr()+"/task", "r", fmt.Sprintf(`{"task":"chain %d"}`, i))
		}},
		{"a2a", 15, func(i int) {
			post("http://"+aB.EgressAddr()+"/task", "b", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, i, i))
		}},
		{"mcp", 20, func(i int) {
			post("http://"+mB.EgressAddr()+"/mcp", "b", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search_web","arguments":{"query":"q %d"}}}`, i, i),
				"Mcp-Session-Id", "s-1", "Accept", "application/json, text/event-stream")
		}},
		{"a handling with a journaled model call", 9, func(i int) {
			// A caller's request to a, whose agent asks the model once: the
			// receipt, the dedupe window, the journal's load and append.
			post(fmt.Sprintf("http://%s/task?q=%d", aB.IngressAddr(), i), "", `{"task":"ask"}`)
		}},
		{"a handling with a journaled model call, in a chain with a budget", 15, func(i int) {
			// The same, the caller setting a budget: the check's read before
			// the call, the spend's adds in the journal's append after it.
			post(fmt.Sprintf("http://%s/task?q=b%d", aB.IngressAddr(), i), "", `{"task":"ask"}`,
				"Authorization", "Bearer "+webToken1, "Baton-Chain-Budget", "tokens=100000000")
		}},
	} {
		per, total := redisCost(t, n, kind.send)
		names := make([]string, 0, len(per))
		for k := range per {
			names = append(names, k)
		}
		sort.Strings(names)
		var parts []string
		for _, k := range names {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, per[k]))
		}
		t.Logf("%s: %.2f commands per handoff: %s", kind.name, total, strings.Join(parts, ", "))
		if total > kind.ceiling {
			t.Errorf("%s: %.2f commands per handoff, over the ceiling of %.0f", kind.name, total, kind.ceiling)
		}
	}
}

// proseOf returns about n bytes of ordinary text, different for each i.
func proseOf(i, n int) string {
	words := strings.Fields("the quarterly report shows revenue grew in every region while costs held steady and the board " +
		"approved the plan to expand the logistics network next year after a review of supplier contracts and staffing")
	i = max(i, -i) // the warm-up's are negative
	var b strings.Builder
	for k := 0; b.Len() < n; k++ {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(k*7+i*13+k*k*i)%len(words)])
	}
	return b.String()
}

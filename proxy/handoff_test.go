package proxy_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

func TestHandoffCarriesTraceIdentityHopAndKey(t *testing.T) {
	t.Parallel()
	var got seen
	p := startPair(t, got.handler(200, `{"ok":true}`), "", "")

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	hdr := http.Header{
		"Traceparent":  {caller},
		"Tracestate":   {"vendor=opaque"},
		"Baggage":      {"tenant=acme"},
		"Content-Type": {"application/json"},
		"Baton-Agent":  {"planner"}, // forged by the agent
		"Baton-Hop":    {"7"},
		"Signature":    {"sig1=:AAAA:"},
	}
	resp := send(t, p.a.EgressAddr(), "summarizer", "POST", "/tasks?x=1", `{"task":"summarise"}`, hdr)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != `{"ok":true}` {
		t.Fatalf("body %q", b)
	}
	r := got.last(t)
	m := traceparentRE.FindStringSubmatch(r.Header.Get("Traceparent"))
	if m == nil {
		t.Fatalf("traceparent %q is not W3C", r.Header.Get("Traceparent"))
	}
	if m[1] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s, want the caller's", m[1])
	}
	if m[2] == "00f067aa0ba902b7" {
		t.Error("parent-id is still the caller's span; want Baton's")
	}
	if ts := r.Header.Get("Tracestate"); ts != "vendor=opaque" {
		t.Errorf("tracestate %q not kept", ts)
	}
	// The caller's baggage is kept, and the receiving Baton adds the
	// handling the agent is in (for its own handoffs to be tied to it).
	if bg := r.Header.Get("Baggage"); !strings.HasPrefix(bg, "tenant=acme,baton.handling=4bf92f3577b34da6a3ce929d0e0e4736.") {
		t.Errorf("baggage %q: want tenant=acme kept and baton.handling added", bg)
	}
	if a := r.Header.Values("Baton-Agent"); len(a) != 1 || a[0] != "analyst" {
		t.Errorf("Baton-Agent %q, want [analyst] (the forged value replaced)", a)
	}
	if h := r.Header.Get("Baton-Hop"); h != "1" {
		t.Errorf("Baton-Hop %q, want 1", h)
	}
	if r.Header.Get("Signature") != "" {
		t.Error("the agent's Signature header reached the peer")
	}
	if r.URL.RequestURI() != "/tasks?x=1" {
		t.Errorf("target %q", r.URL.RequestURI())
	}
	key := r.Header.Get("Idempotency-Key")
	if !regexp.MustCompile(`^"bk-[0-9a-f]{32}"$`).MatchString(key) {
		t.Fatalf("Idempotency-Key %q is not a derived sf-string key", key)
	}

	// The agent retries the same handoff in the same trace: the same key, so
	// the receiver's window answers and the agent is not called again.
	hdr["Traceparent"] = []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"}
	retry := send(t, p.a.EgressAddr(), "summarizer", "POST", "/tasks?x=1", `{"task":"summarise"}`, hdr)
	if retry.Header.Get("Idempotent-Replayed") != "true" || got.count() != 1 {
		t.Errorf("retry: Idempotent-Replayed %q, agent calls %d: want a replay of the same key",
			retry.Header.Get("Idempotent-Replayed"), got.count())
	}
	// A different body is a different handoff: a different key.
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/tasks?x=1", `{"task":"other"}`, hdr)
	if k3 := got.last(t).Header.Get("Idempotency-Key"); k3 == key || got.count() != 2 {
		t.Errorf("a different body: key %s (first %s), agent calls %d", k3, key, got.count())
	}
}

func TestAgentKeyKeptAndA2AKeyDerived(t *testing.T) {
	t.Parallel()
	var got seen
	p := startPair(t, got.handler(200, `{}`), "", "")

	send(t, p.a.EgressAddr(), "summarizer", "POST", "/", `{}`, http.Header{"Idempotency-Key": {"order-42"}})
	if k := got.last(t).Header.Get("Idempotency-Key"); k != `"order-42"` {
		t.Errorf("agent key became %q, want \"order-42\"", k)
	}

	a2a := func(method, id string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"message":{"messageId":"` + id +
			`","role":"user","parts":[{"text":"hi"}]}}}`
	}
	json := http.Header{"Content-Type": {"application/json"}}
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/a2a", a2a("SendMessage", "m-1"), json)
	k1 := got.last(t).Header.Get("Idempotency-Key")
	if !strings.HasPrefix(k1, `"a2a-`) {
		t.Errorf("A2A key %s: want an a2a- key", k1)
	}
	// A new trace (no traceparent) but the same message id: the same key,
	// so the receiver's window replays instead of calling the agent.
	n := got.count()
	again := send(t, p.a.EgressAddr(), "summarizer", "POST", "/a2a", a2a("SendMessage", "m-1"), json)
	if again.Header.Get("Idempotent-Replayed") != "true" || got.count() != n {
		t.Errorf("resent A2A message was not recognised as the same handoff")
	}
	send(t, p.a.EgressAddr(), "summarizer", "POST", "/a2a", a2a("message/send", "m-2"), json)
	if k3 := got.last(t).Header.Get("Idempotency-Key"); k3 == k1 || !strings.HasPrefix(k3, `"a2a-`) {
		t.Errorf("v0.3 message/send key %s: want a different a2a- key", k3)
	}
	// Idempotent methods get no derived key.
	send(t, p.a.EgressAddr(), "summarizer", "GET", "/status", "", nil)
	if k := got.last(t).Header.Get("Idempotency-Key"); k != "" {
		t.Errorf("GET got key %q", k)
	}
}

func TestForwardProxyAbsoluteForm(t *testing.T) {
	t.Parallel()
	var got seen
	p := startPair(t, got.handler(201, `created`), "", "")
	proxyURL, _ := url.Parse("http://" + p.a.EgressAddr())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	resp, err := client.Post("http://summarizer/jobs", "text/plain", strings.NewReader("work"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := got.last(t)
	if r.URL.Path != "/jobs" || r.Header.Get("Baton-Agent") != "analyst" {
		t.Errorf("got %s with Baton-Agent %q", r.URL.Path, r.Header.Get("Baton-Agent"))
	}
}

// TestForwardProxyByPeerAddress: an agent configured with its peers' own
// addresses, sending through Baton as its HTTP proxy, hands off to the peer
// whose URL host it names, on the URL's port or one of the peer's ports.
func TestForwardProxyByPeerAddress(t *testing.T) {
	t.Parallel()
	var got seen
	ag := httptest.NewServer(got.handler(201, `created`))
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\n", nil)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+b.IngressAddr()+
		", ports: [8081]}}\n", nil)
	proxyURL, _ := url.Parse("http://" + a.EgressAddr())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	for i, target := range []string{"http://" + b.IngressAddr() + "/jobs", "http://127.0.0.1:8081/jobs"} {
		resp, err := client.Post(target, "text/plain", strings.NewReader("work"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 || got.count() != i+1 || got.last(t).Header.Get("Baton-Agent") != "analyst" {
			t.Errorf("%s: %d, the agent got %d request(s) with Baton-Agent %q; want a handoff to summarizer",
				target, resp.StatusCode, got.count(), got.last(t).Header.Get("Baton-Agent"))
		}
	}
	resp, err := client.Post("http://127.0.0.1:8082/jobs", "text/plain", strings.NewReader("work"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || got.count() != 2 {
		t.Errorf("a port the peer does not have: %d; want 403, nothing delivered", resp.StatusCode)
	}
}

func TestHopCountsAlongTheChain(t *testing.T) {
	t.Parallel()
	// analyst → summarizer → reviewer; summarizer's agent forwards the
	// traceparent it received on its own outbound handoff.
	var atReviewer seen
	reviewerAgent := httptest.NewServer(atReviewer.handler(200, "reviewed"))
	t.Cleanup(reviewerAgent.Close)
	reviewer := startBaton(t, "agent: reviewer\nupstream: "+reviewerAgent.URL+"\n", nil)

	var sumEgress string
	sumAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequest("POST", "http://"+sumEgress+"/review", strings.NewReader("draft"))
		req.Host = "reviewer"
		req.Header.Set("Traceparent", r.Header.Get("Traceparent"))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(sumAgent.Close)
	sum := startBaton(t, "agent: summarizer\nupstream: "+sumAgent.URL+"\npeers: {reviewer: {url: http://"+
		reviewer.IngressAddr()+"}}\n", nil)
	sumEgress = sum.EgressAddr()
	analyst := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		sum.IngressAddr()+"}}\n", nil)

	resp := send(t, analyst.EgressAddr(), "summarizer", "POST", "/", "x",
		http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	r := atReviewer.last(t)
	if h, a := r.Header.Get("Baton-Hop"), r.Header.Get("Baton-Agent"); h != "2" || a != "summarizer" {
		t.Errorf("at reviewer: Baton-Hop %q Baton-Agent %q, want 2 and summarizer", h, a)
	}
	if !strings.Contains(r.Header.Get("Traceparent"), "0af7651916cd43dd8448eb211c80319c") {
		t.Errorf("trace lost along the chain: %q", r.Header.Get("Traceparent"))
	}
}

func TestSSEStreamsBeforeUpstreamFinishes(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: second\n\n")
	})
	p := startPair(t, agent, "", "")
	resp := send(t, p.a.EgressAddr(), "summarizer", "GET", "/events", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event %q, %v: it must arrive while the agent is still streaming", line, err)
	}
	close(release) // only now may the agent finish
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), "data: second") {
		t.Errorf("rest of stream %q", rest)
	}
}

func TestChunkedResponseStreams(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part1;")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "part2")
	})
	p := startPair(t, agent, "", "")
	resp := send(t, p.a.EgressAddr(), "summarizer", "GET", "/", "", nil)
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "part1;" {
		t.Fatalf("first chunk %q, %v", buf, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "part2" {
		t.Errorf("rest %q", rest)
	}
}

func TestUpgradePassesThrough(t *testing.T) {
	t.Parallel()
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("echo:" + line)
		brw.Flush()
	})
	p := startPair(t, agent, "", "")
	conn, err := (&netDialer{}).dial(p.a.EgressAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: summarizer\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(conn, "hello\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || line != "echo:hello\n" {
		t.Errorf("after upgrade read %q, %v", line, err)
	}
}

package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// h2cClient speaks HTTP/2 without TLS, with prior knowledge, and nothing else.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 20 * time.Second}
}

const h2cListen = "listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0, h2c: true}\n"

// TestH2CListeners: with listen.h2c, an agent's many concurrent handoffs
// share HTTP/2 connections to its Baton (more than one connection's stream
// bound), each is delivered once, and a streamed answer arrives event by
// event.
func TestH2CListeners(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[string]int{}
	release := make(chan struct{})
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: one\n\n")
			http.NewResponseController(w).Flush()
			<-release
			fmt.Fprint(w, "data: two\n\n")
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[string(b)]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"hop":%q}`, r.Header.Get("Baton-Hop"))
	})
	p := startPair(t, agent, h2cListen, h2cListen)
	c := h2cClient()
	post := func(path, body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.a.EgressAddr()+path, strings.NewReader(body))
		req.Host = "summarizer"
		req.Header.Set("Content-Type", "application/json")
		return c.Do(req)
	}

	const n = 300 // more than one connection's 250 streams
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := post("/task", fmt.Sprintf(`{"n":%d}`, i))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || string(b) != `{"hop":"1"}` {
				errs <- fmt.Errorf("handoff %d: %s %s %s", i, resp.Proto, resp.Status, b)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	if len(got) != n {
		t.Errorf("the agent got %d distinct handoffs, want %d", len(got), n)
	}
	for body, k := range got {
		if k != 1 {
			t.Errorf("%s delivered %d times", body, k)
		}
	}
	mu.Unlock()

	resp, err := post("/stream", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	if err != nil || line != "data: one\n" || resp.ProtoMajor != 2 {
		t.Fatalf("first event before the agent wrote the second: %q %v (%s)", line, err, resp.Proto)
	}
	close(release)
	rest, _ := io.ReadAll(rd)
	if string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest of the stream: %q", rest)
	}

	// The ingress listener speaks h2c too: a caller without a Baton's
	// identity gets its problem over HTTP/2.
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.b.IngressAddr()+"/task", strings.NewReader(`{}`))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode < 400 || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("ingress over h2c: %s %s %s", resp.Proto, resp.Status, resp.Header.Get("Content-Type"))
	}
}

// TestH2COffByDefault: without listen.h2c, a prior-knowledge HTTP/2 client
// gets no answer, and HTTP/1.1 works as before.
func TestH2COffByDefault(t *testing.T) {
	t.Parallel()
	p := startPair(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.a.EgressAddr()+"/x", nil)
	req.Host = "summarizer"
	if resp, err := h2cClient().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("h2c to a listener without it: %s", resp.Proto)
	}
	if resp := send(t, p.a.EgressAddr(), "summarizer", http.MethodGet, "/x", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP/1.1: %s", resp.Status)
	}
}

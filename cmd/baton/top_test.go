package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// topPair is analyst's Baton handing off to summarizer's and to a peer
// whose address refuses connections, each Baton serving /metrics as baton
// serve does.
type topPair struct {
	a, b   string // admin addresses
	egress string // analyst's egress
}

func startTopPair(t *testing.T) topPair {
	t.Helper()
	noOTLP := func(string) string { return "" }
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(agent.Close)
	b, _ := telemetryBaton(t, "agent: summarizer\nupstream: "+agent.URL+"\nadmin_token: s3cret\n", noOTLP)
	a, _ := telemetryBaton(t, "agent: analyst\nupstream: http://127.0.0.1:9\n"+
		"peers: {summarizer: {url: http://"+b.IngressAddr()+"}, gone: {url: http://"+closedListener(t)+"}}\n"+
		"retry: {attempts: 0}\n", noOTLP)
	return topPair{a: a.AdminAddr(), b: b.AdminAddr(), egress: a.EgressAddr()}
}

func (p topPair) handoffs(t *testing.T, host string, n, want int) {
	t.Helper()
	if err := p.send(host, n, want); err != nil {
		t.Fatal(err)
	}
}

// send makes n handoffs to host, each of which must be answered want.
func (p topPair) send(host string, n, want int) error {
	for range n {
		req, _ := http.NewRequest("POST", "http://"+p.egress+"/tasks", strings.NewReader(`{"task":1}`))
		req.Host = host
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("handoff to %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	return nil
}

// row returns the fields of the table row of edge on side.
func row(t *testing.T, out, edge, side string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 12 && f[0] == edge && f[1] == side {
			return f
		}
	}
	t.Fatalf("no row for %s %s in:\n%s", edge, side, out)
	return nil
}

func TestTopOnce(t *testing.T) {
	t.Parallel()
	p := startTopPair(t)
	p.handoffs(t, "summarizer", 3, 200)
	p.handoffs(t, "gone", 1, 502)

	var out bytes.Buffer
	env := func(k string) string { return map[string]string{"BATON_ADMIN_TOKEN": "s3cret"}[k] }
	if err := run(context.Background(), []string{"top", "--once", "--admin", "http://" + p.a, "--admin", p.b},
		&out, io.Discard, env); err != nil {
		t.Fatalf("top: %v\n%s", err, out.String())
	}
	s := out.String()
	if strings.Contains(s, "\x1b") {
		t.Errorf("--once printed terminal control codes:\n%q", s)
	}
	for _, want := range []string{"analyst @ http://" + p.a, "summarizer @ " + p.b, "since start", "EDGE", "P99"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// EDGE SIDE TOTAL REQ/S ERR% P50 P95 P99 RETRIES TIED BREAKER DLQ
	toB := row(t, s, "analyst→summarizer", "egress")
	if toB[2] != "3" || toB[4] != "0.0%" || toB[8] != "0" || toB[9] != "0%" || toB[10] != "closed" || toB[11] != "0" {
		t.Errorf("analyst→summarizer: %q, want 3 requests, 0.0%% errors, 0 retries, none tied (the chain's entry handles "+
			"nothing), closed, 0 dead letters", toB)
	}
	for i := 5; i <= 7; i++ {
		if toB[i] == "-" {
			t.Errorf("analyst→summarizer: no latency in column %d: %q", i, toB)
		}
	}
	if toB[3] == "-" {
		t.Errorf("analyst→summarizer: no rate: %q", toB)
	}
	toGone := row(t, s, "analyst→gone", "egress")
	if toGone[2] != "1" || toGone[4] != "100.0%" || toGone[11] != "1" {
		t.Errorf("analyst→gone: %q, want 1 request, 100.0%% errors, 1 dead letter", toGone)
	}
	fromA := row(t, s, "analyst→summarizer", "ingress")
	if fromA[2] != "3" || fromA[9] != "-" || fromA[10] != "-" || fromA[11] != "-" {
		t.Errorf("summarizer's ingress from analyst: %q, want 3 requests, no tie share, no breaker, no dead letters", fromA)
	}
}

// frames is a terminal that cancels top after a number of frames, calling
// between on each frame before the last.
type frames struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	n, stop int
	between func()
	cancel  context.CancelFunc
}

func (f *frames) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if bytes.HasPrefix(p, []byte("\x1b[H\x1b[2J")) {
		f.n++
		if f.n == f.stop {
			f.cancel()
		} else {
			f.between()
		}
	}
	return f.buf.Write(p)
}

func TestTopRefreshes(t *testing.T) {
	t.Parallel()
	p := startTopPair(t)
	p.handoffs(t, "summarizer", 3, 200)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sendErr error // from top's goroutine, read once it returned
	term := &frames{stop: 2, cancel: cancel, between: func() { sendErr = p.send("summarizer", 2, 200) }}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"top", "--interval", "20ms", "--admin", p.a}, term, io.Discard, noEnv)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("top did not stop when its context ended")
	}
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	parts := strings.Split(term.buf.String(), "\x1b[H\x1b[2J")
	if len(parts) != 3 || parts[0] != "" {
		t.Fatalf("want two frames, each after home and clear; got %q", term.buf.String())
	}
	first, second := parts[1], parts[2]
	if r := row(t, first, "analyst→summarizer", "egress"); r[2] != "3" {
		t.Errorf("first frame: %q, want 3 requests", r)
	}
	r := row(t, second, "analyst→summarizer", "egress")
	if r[2] != "5" || r[3] == "0.0" || r[3] == "-" {
		t.Errorf("second frame: %q, want 5 in all and a rate from the 2 since the first frame", r)
	}
	if !strings.Contains(second, "last ") {
		t.Errorf("second frame does not say its window:\n%s", second)
	}
}

func TestTopErrors(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(context.Background(), []string{"top", "--once", "--admin", closedListener(t)}, &out, io.Discard, noEnv)
	if err == nil || !strings.Contains(out.String(), "connect") {
		t.Errorf("top against a closed port: %v\n%s", err, out.String())
	}
	for _, args := range [][]string{{"top", "--interval", "0s"}, {"top", "extra"}, {"top", "--bogus"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard, noEnv); exitCode(err) != 2 {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

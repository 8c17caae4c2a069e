package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestReadSSE(t *testing.T) {
	in := "id: 1\nevent: tick\ndata: a\n\n: a comment\n\ndata: b\ndata: c\r\n\r\nretry: 5\n\ndata:\n\n"
	var got []string
	if err := readSSE(strings.NewReader(in), func(d []byte) bool { got = append(got, string(d)); return true }); err != nil {
		t.Fatal(err)
	}
	// A comment or a retry alone is no event; an empty data line is.
	want := []string{"a", "b\nc", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", got, want)
	}
	for _, cut := range []string{"data: a\n\ndata: b\n", "data: a\n\ndata: b"} {
		err := readSSE(strings.NewReader(cut), func([]byte) bool { return true })
		if err == nil || !strings.Contains(err.Error(), "middle of an event") {
			t.Fatalf("%q: a stream cut inside an event: got %v", cut, err)
		}
	}
	n := 0
	if err := readSSE(strings.NewReader("data: a\n\ndata: b\n\n"), func([]byte) bool { n++; return false }); err != nil || n != 1 {
		t.Fatalf("stopping after the first event: %d events, %v", n, err)
	}
}

func TestAppendSSEEvent(t *testing.T) {
	got := string(appendSSEEvent(nil, 42, 7))
	if want := "id: 7\nevent: tick\ndata: {\"stream\":42,\"seq\":7}\n\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestSSELoadDirect runs streams straight to the SSE agent's handler: every
// event of every stream arrives once and in order.
func TestSSELoadDirect(t *testing.T) {
	srv := httptest.NewServer(sseAgentHandler(5, 100*time.Millisecond))
	defer srv.Close()
	l := &sseLoad{url: srv.URL + "/sse", streams: 50, events: 5, ramp: 20 * time.Millisecond,
		timeout: 10 * time.Second, client: newSSEClient(50, false)}
	s := summarize(l.run(context.Background()), l.events, l.peakOpen.Load())
	if !s.lossless() || s.Completed != 50 || s.Received != 250 || s.Failed != 0 {
		t.Fatalf("summary %+v", s)
	}
	if s.PeakOpen < 2 || s.TTFEp50Ms <= 0 || s.TTFEp99Ms < s.TTFEp50Ms || s.DurationS < 0.1 {
		t.Fatalf("summary %+v", s)
	}
	if err := probeSSE(context.Background(), srv.URL+"/sse", "", false); err != nil {
		t.Fatal(err)
	}
}

// TestSSELoadFindsFaults: an upstream that drops, repeats, reorders and
// mixes events, fails a stream and cuts another is caught, each fault
// counted as what it is.
func TestSSELoadFindsFaults(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req sseRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Stream == nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		id := *req.Stream
		seqs := map[int][]int{
			0: {1, 2, 3, 4},    // clean
			1: {1, 2, 4},       // 3 lost
			2: {1, 2, 2, 3, 4}, // 2 duplicated
			3: {1, 3, 2, 4},    // 2 reordered
		}[id]
		if id == 4 {
			http.Error(w, "no", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		var b []byte
		for _, s := range seqs {
			b = appendSSEEvent(b, id, s)
		}
		switch id {
		case 5: // another stream's event, then cut in the middle of one
			b = appendSSEEvent(b, 0, 1)
			b = append(b, "data: {\"stream\":5"...)
		}
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	l := &sseLoad{url: srv.URL, streams: 6, events: 4, timeout: 10 * time.Second, client: newSSEClient(6, false)}
	res := l.run(context.Background())
	type want struct{ received, lost, dup, reorder, foreign int }
	for id, w := range []want{
		{4, 0, 0, 0, 0},
		{3, 1, 0, 0, 0},
		{4, 0, 1, 0, 0},
		{4, 0, 0, 1, 0},
		{0, 4, 0, 0, 0},
		{0, 4, 0, 0, 1},
	} {
		r := res[id]
		got := want{r.received, r.lost, r.dup, r.reorder, r.foreign}
		if got != w {
			t.Errorf("stream %d: got %+v, want %+v (err %v)", id, got, w, r.err)
		}
		if ok := id == 0; r.ok() != ok {
			t.Errorf("stream %d: ok() = %v (err %v)", id, r.ok(), r.err)
		}
	}
	if res[4].err == nil || !strings.Contains(res[4].err.Error(), "502") {
		t.Errorf("stream 4: err %v, want the 502", res[4].err)
	}
	if res[5].err == nil {
		t.Errorf("stream 5: a stream cut inside an event must be an error")
	}
	s := summarize(res, l.events, l.peakOpen.Load())
	if s.lossless() || s.Completed != 1 || s.Failed != 2 || s.Lost != 9 || s.Duplicated != 1 || s.Reordered != 1 || s.Foreign != 1 {
		t.Fatalf("summary %+v", s)
	}
	if len(s.Errors) != 2 {
		t.Fatalf("errors %q", s.Errors)
	}
}

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if q := quantile(ds, 0.5); q != 50*time.Millisecond {
		t.Fatalf("p50 %s", q)
	}
	if q := quantile(ds, 0.99); q != 99*time.Millisecond {
		t.Fatalf("p99 %s", q)
	}
	if q := quantile(nil, 0.99); q != 0 {
		t.Fatalf("empty: %s", q)
	}
	if q := quantile(ds[:1], 0.99); q != time.Millisecond {
		t.Fatalf("one: %s", q)
	}
}

func TestSSEFlags(t *testing.T) {
	var sb strings.Builder
	o, err := parseFlags([]string{"-sse", "500", "-sse-events", "4", "-sse-over", "1s", "-sse-hops", "1", "-sse-h2c"}, &sb)
	if err != nil {
		t.Fatal(err)
	}
	if o.sse != (sseOptions{streams: 500, events: 4, over: time.Second, ramp: 2 * time.Second, hops: 1, h2c: true}) {
		t.Fatalf("%+v", o.sse)
	}
	for _, args := range [][]string{
		{"-sse", "-1"},
		{"-sse", "5", "-sse-events", "0"},
		{"-sse", "5", "-sse-hops", "3"},
		{"-sse", "5", "-sse-over", "-1s"},
	} {
		if _, err := parseFlags(args, &sb); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestProcNoFile(t *testing.T) {
	lim, err := raiseNoFile(1024)
	if err != nil {
		t.Fatal(err)
	}
	got, err := procNoFile(os.Getpid())
	if err != nil || got != lim.Cur {
		t.Fatalf("procNoFile = %d, %v; getrlimit says %d", got, err, lim.Cur)
	}
	if n, err := openFDs(os.Getpid()); err != nil || n < 3 {
		t.Fatalf("openFDs = %d, %v", n, err)
	}
}

// TestSSELoadH2C: over HTTP/2 without TLS the streams share connections
// (the server sees fewer connections than streams) and lose nothing.
func TestSSELoadH2C(t *testing.T) {
	srv := httptest.NewUnstartedServer(sseAgentHandler(3, 50*time.Millisecond))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	l := &sseLoad{url: srv.URL + "/sse", streams: 100, events: 3, timeout: 10 * time.Second, client: newSSEClient(100, true)}
	// One stream first, so that the client holds its connection before the
	// hundred start: under load, streams started together may otherwise all
	// dial before the first connection is up.
	warm, err := openStream(context.Background(), l.client, l.url, "", -1)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, warm.Body)
	warm.Body.Close()
	s := summarize(l.run(context.Background()), l.events, l.peakOpen.Load())
	if !s.lossless() || s.Completed != 100 {
		t.Fatalf("summary %+v", s)
	}
	if n := conns.Load(); n >= 100 {
		t.Fatalf("%d connections for 100 streams over h2c", n)
	}
	if err := probeSSE(context.Background(), srv.URL+"/sse", "", true); err != nil {
		t.Fatal(err)
	}
}

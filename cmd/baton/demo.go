package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/state"
)

// demo runs two demo agents, analyst and summarizer, each with its Baton on
// free loopback ports and the in-memory store; analyst hands work to
// summarizer, and the demo prints what crossed the boundary.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	verbose := fs.Bool("v", false, "print the Batons' JSON logs to stderr")
	if err := fs.Parse(args); err != nil {
		return usageError{msg: "demo: " + err.Error()}
	}
	logOut := io.Discard
	if *verbose {
		logOut = stderr
	}
	log := newLogger(logOut, "info")
	tel := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())

	// summarizer: the receiving agent. It reports what it received and
	// streams its summary as server-sent events.
	var handoffs atomic.Int64
	sumAgent, err := startDemoAgent(summarizerAgent(&handoffs))
	if err != nil {
		return err
	}
	defer sumAgent.Close()

	start := func(yaml string) (*proxy.Server, func(), error) {
		c, err := config.Parse(strings.NewReader(yaml), nil)
		if err != nil {
			return nil, nil, err
		}
		store := state.NewMemory(c.Store.Memory)
		s, err := proxy.New(proxy.Options{Config: c, Store: store, TracerProvider: tp, Propagator: tel, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		if err := s.Start(); err != nil {
			return nil, nil, err
		}
		return s, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = s.Shutdown(sctx)
			_ = store.Close()
		}, nil
	}
	loop := "listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}\n"
	sum, stopSum, err := start("agent: summarizer\nupstream: http://" + sumAgent.Addr + "\n" + loop +
		"edges: [{from: analyst, max_hops: 8}]\n")
	if err != nil {
		return fmt.Errorf("demo: summarizer's Baton: %w", err)
	}
	defer stopSum()
	ana, stopAna, err := start("agent: analyst\nupstream: http://127.0.0.1:9\n" + loop +
		"peers: {summarizer: {url: http://" + sum.IngressAddr() + "}}\nedges: [{to: summarizer, max_hops: 8}]\n")
	if err != nil {
		return fmt.Errorf("demo: analyst's Baton: %w", err)
	}
	defer stopAna()

	p := func(format string, a ...any) { fmt.Fprintf(stdout, format, a...) }
	p("Baton demo: two agents, each with its Baton, on loopback (in-memory store)\n\n")
	p("  analyst ──▶ analyst's Baton egress %s ──▶ summarizer's Baton ingress %s ──▶ summarizer %s\n\n",
		ana.EgressAddr(), sum.IngressAddr(), sumAgent.Addr)

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	body := `{"task":"summarise Q3 anomalies","dataset":"q3.csv","threshold":0.05}`
	p("1. analyst POSTs to http://summarizer/handoff through its Baton (Host routing), with\n")
	p("   traceparent %s and a forged Baton-Agent: admin\n\n", caller)
	seen1, err := demoHandoff(ctx, ana.EgressAddr(), caller, body)
	if err != nil {
		return err
	}
	p("   what reached summarizer, added by the Batons:\n")
	for _, h := range []string{"Baton-Agent", "Baton-Hop", "Idempotency-Key", "Traceparent"} {
		p("     %-16s %s\n", h+":", seen1[h])
	}
	p("   trace id kept: %v (the caller's trace, with Baton's span as parent)\n", strings.Contains(seen1["Traceparent"], "4bf92f3577b34da6a3ce929d0e0e4736"))
	p("   forged Baton-Agent replaced: %v\n\n", seen1["Baton-Agent"] == "analyst")

	p("2. analyst retries the same handoff in the same trace (say its client timed out)\n")
	seen2, replayed, err := demoHandoffReplayed(ctx, ana.EgressAddr(), "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01", body)
	if err != nil {
		return err
	}
	p("   same Idempotency-Key %s, so summarizer's Baton answers from its dedupe window:\n", seen2["Idempotency-Key"])
	p("     Idempotent-Replayed: %s; summarizer ran the handoff %d time(s)\n\n", replayed, handoffs.Load())

	p("3. summarizer streams its reply (text/event-stream); each event is printed as it arrives:\n")
	if err := demoStream(ctx, ana.EgressAddr(), caller, func(ev string, at time.Duration) {
		p("     +%4dms  %s\n", at.Milliseconds(), ev)
	}); err != nil {
		return err
	}

	p("\n4. a destination that is neither a peer nor allowed is refused:\n")
	status, ctype, err := demoRefused(ctx, ana.EgressAddr())
	if err != nil {
		return err
	}
	p("     %d %s\n", status, ctype)
	p("\nDone: both Batons and the demo agent shut down.\n")
	return nil
}

type demoAgent struct {
	Addr string
	srv  *http.Server
}

func (d *demoAgent) Close() { _ = d.srv.Close() }

func startDemoAgent(h http.Handler) (*demoAgent, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: agent listener: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &demoAgent{Addr: l.Addr().String(), srv: srv}, nil
}

// summarizerAgent echoes the Baton headers of a handoff (counting them), or
// streams a summary as server-sent events.
func summarizerAgent(handoffs *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/summary/stream" {
			handoffs.Add(1)
			echoHeaders(w, r)
			return
		}
		streamSummary(w, r)
	}
}

func streamSummary(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i, part := range []string{"Q3 shows 3 anomalies above 0.05", "largest: vendor 17, +41%", "draft ready"} {
		if i > 0 {
			select {
			case <-time.After(150 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "event: summary\ndata: %s\n\n", part)
		w.(http.Flusher).Flush()
	}
}

func echoHeaders(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	out := map[string]string{}
	for _, h := range []string{"Baton-Agent", "Baton-Hop", "Idempotency-Key", "Traceparent"} {
		out[h] = r.Header.Get(h)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func demoRequest(ctx context.Context, method, egress, path, traceparent, body string) (*http.Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+egress+path, rd)
	if err != nil {
		return nil, err
	}
	req.Host = "summarizer"
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	req.Header.Set("Baton-Agent", "admin") // forged: the Baton replaces it
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("demo: %s %s: %w", method, path, err)
	}
	return resp, nil
}

func demoHandoff(ctx context.Context, egress, traceparent, body string) (map[string]string, error) {
	seen, _, err := demoHandoffReplayed(ctx, egress, traceparent, body)
	return seen, err
}

// demoHandoffReplayed also returns the Idempotent-Replayed header.
func demoHandoffReplayed(ctx context.Context, egress, traceparent, body string) (map[string]string, string, error) {
	resp, err := demoRequest(ctx, http.MethodPost, egress, "/handoff", traceparent, body)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, "", fmt.Errorf("demo: handoff answered %d: %s", resp.StatusCode, b)
	}
	seen := map[string]string{}
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
		return nil, "", fmt.Errorf("demo: reading summarizer's answer: %w", err)
	}
	return seen, resp.Header.Get("Idempotent-Replayed"), nil
}

func demoStream(ctx context.Context, egress, traceparent string, each func(string, time.Duration)) error {
	start := time.Now()
	resp, err := demoRequest(ctx, http.MethodGet, egress, "/summary/stream", traceparent, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	n := 0
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			each(data, time.Since(start))
			n++
		}
	}
	if n == 0 {
		return errors.New("demo: the stream carried no events")
	}
	return sc.Err()
}

func demoRefused(ctx context.Context, egress string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+egress+"/", nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = "stranger.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var pd struct {
		Type, Detail string
	}
	_ = json.NewDecoder(resp.Body).Decode(&pd)
	return resp.StatusCode, pd.Type + "\n     " + pd.Detail, nil
}

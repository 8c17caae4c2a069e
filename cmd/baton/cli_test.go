package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/sidecar"
	"github.com/batonproxy/baton/state"
)

// cliBaton starts a Baton whose one peer is down, and leaves one dead letter
// in trace demoTrace.
func cliBaton(t *testing.T) (*sidecar.Baton, *state.Memory, string) {
	t.Helper()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := l.Addr().String()
	l.Close()
	c, err := config.Parse(strings.NewReader("agent: analyst\nupstream: http://127.0.0.1:9\n"+
		"listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}\n"+
		"peers: {gone: {url: http://"+gone+"}}\nretry: {attempts: 0}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewMemory(config.Memory{})
	s, err := sidecar.New(proxy.Options{Config: c, Store: store, TracerProvider: sdktrace.NewTracerProvider(),
		Propagator: propagation.TraceContext{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		store.Close()
	})
	req, _ := http.NewRequest("POST", "http://"+s.EgressAddr()+"/work", strings.NewReader(`{"a":1}`))
	req.Host = "gone"
	req.Header.Set("Traceparent", "00-"+demoTrace+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Fatalf("handoff to a dead peer: %d", resp.StatusCode)
	}
	return s, store, resp.Header.Get("Baton-Dead-Letter")
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out, io.Discard, noEnv)
	return out.String(), err
}

func TestDLQAndTraceCommands(t *testing.T) {
	t.Parallel()
	s, store, _ := cliBaton(t)
	admin := s.AdminAddr()

	out, err := runCLI(t, "dlq", "ls", "--admin", admin)
	if err != nil || !strings.Contains(out, "analyst→gone") || !strings.Contains(out, "1 of 1 dead letter(s)") {
		t.Fatalf("dlq ls: %v\n%s", err, out)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]

	out, err = runCLI(t, "dlq", "show", id, "--admin", admin)
	if err != nil || !strings.Contains(out, `"state": "dead"`) || !strings.Contains(out, `"body": "eyJhIjoxfQ=="`) {
		t.Errorf("dlq show: %v\n%s", err, out)
	}
	out, err = runCLI(t, "dlq", "replay", id, "--admin", admin)
	if err == nil || !strings.Contains(out, "failed again") {
		t.Errorf("dlq replay to a dead peer: %v\n%s", err, out)
	}
	out, err = runCLI(t, "trace", demoTrace, "--verify", "--admin", admin)
	if err != nil || !strings.Contains(out, "intact") || !strings.Contains(out, "analyst → gone") || !strings.Contains(out, "dead") {
		t.Errorf("trace --verify: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "trace", strings.Repeat("0", 32), "--admin", admin); err == nil {
		t.Error("an unknown trace printed nothing and succeeded")
	}

	// Edit one entry of the chain behind Baton's back: write the chain
	// again, the first entry changed.
	ctx := context.Background()
	key := "{" + demoTrace + "}:records"
	c, err := store.ReadChain(ctx, key)
	if err != nil || len(c.Entries) < 2 {
		t.Fatalf("chain %s: %d entries, %v", key, len(c.Entries), err)
	}
	store.Delete(ctx, key)
	for i, e := range c.Entries {
		if i == 0 {
			e = bytes.Replace(e, []byte(`"to":"gone"`), []byte(`"to":"elsewhere"`), 1)
		}
		res, err := store.AppendChained(ctx, []state.Link{{Log: key, Seq: int64(i + 1), Entry: e, TTL: time.Hour}})
		if err != nil || !res[0].OK {
			t.Fatalf("rewriting entry %d: %+v %v", i+1, res, err)
		}
	}
	out, err = runCLI(t, "trace", demoTrace, "--verify", "--admin", admin)
	if err == nil || !strings.Contains(out, "BROKEN") {
		t.Errorf("trace --verify of an edited chain: %v\n%s", err, out)
	}

	out, err = runCLI(t, "dlq", "drop", id, "--admin", admin)
	if err != nil || !strings.Contains(out, "dropped") {
		t.Errorf("dlq drop: %v %s", err, out)
	}
	if out, _ := runCLI(t, "dlq", "ls", "--admin", admin); !strings.Contains(out, "0 of 0") {
		t.Errorf("after drop: %s", out)
	}
	if _, err := runCLI(t, "dlq", "frobnicate"); exitCode(err) != 2 {
		t.Errorf("unknown dlq subcommand: %v", err)
	}
}

package main

import (
	"github.com/batonproxy/baton/middleware"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// With no exporter configured, serve uses IDTracerProvider, and a handoff through
// two Batons still carries one trace with Baton's span as each parent.
func TestNoExporterPropagatesThroughTwoBatons(t *testing.T) {
	var mu sync.Mutex
	var got http.Header
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		io.WriteString(w, `{"ok":true}`)
	}))
	defer agent.Close()
	noEnv := func(string) string { return "" }
	b, telB := telemetryBaton(t, "agent: summarizer\nupstream: "+agent.URL+"\n", noEnv)
	a, _ := telemetryBaton(t, "agent: analyst\nupstream: http://127.0.0.1:9\npeers: {summarizer: {url: http://"+
		b.IngressAddr()+"}}\n", noEnv)
	if _, ok := telB.provider.(*middleware.IDTracerProvider); !ok {
		t.Fatalf("provider with no exporter is %T, want *middleware.IDTracerProvider", telB.provider)
	}
	for _, tc := range []struct{ in, traceID, flags string }{
		{"", "", "01"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "4bf92f3577b34da6a3ce929d0e0e4736", "00"},
		{"00-5cf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01", "5cf92f3577b34da6a3ce929d0e0e4737", "01"},
	} {
		req, _ := http.NewRequest("POST", "http://"+a.EgressAddr()+"/task", strings.NewReader(`{"task":"t"}`))
		req.Host = "summarizer"
		req.Header.Set("Content-Type", "application/json")
		if tc.in != "" {
			req.Header.Set("Traceparent", tc.in)
			req.Header.Set("Tracestate", "vendor=x")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		mu.Lock()
		tp, ts := got.Get("Traceparent"), got.Get("Tracestate")
		mu.Unlock()
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[3] != tc.flags || (tc.traceID != "" && parts[1] != tc.traceID) ||
			parts[2] == "00f067aa0ba902b7" || parts[2] == strings.Repeat("0", 16) {
			t.Fatalf("after %q the agent got traceparent %q; want trace %q, flags %s, a parent-id of Baton's", tc.in, tp, tc.traceID, tc.flags)
		}
		if tc.in != "" && ts != "vendor=x" {
			t.Fatalf("tracestate %q, want vendor=x", ts)
		}
		if resp.Header.Get("Traceparent") != "" && !strings.Contains(resp.Header.Get("Traceparent"), parts[1]) {
			t.Fatalf("response traceparent %q is another trace", resp.Header.Get("Traceparent"))
		}
	}
}

package middleware

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// benchBody returns a JSON body of exactly n bytes: an A2A SendMessage when
// a2a is set, else a plain JSON task.
func benchBody(n int, a2a bool) []byte {
	var head, tail string
	if a2a {
		head = `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-0001",` +
			`"role":"user","parts":[{"kind":"text","text":"`
		tail = `"}]}}}`
	} else {
		head, tail = `{"task":"summarise","text":"`, `"}`
	}
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// benchWriter is a ResponseWriter that discards, reused across iterations.
type benchWriter struct{ h http.Header }

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(int)             {}

// benchResolve stands in for the proxy's resolve step (proxy/resolve.go):
// every request goes to the peer summarizer.
func benchResolve(next http.Handler) http.Handler {
	target := &url.URL{Scheme: "http", Host: "summarizer-baton:15006"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := InfoFromContext(r.Context())
		in.From, in.To, in.Target, in.MaxHops = "analyst", "summarizer", target, 8
		next.ServeHTTP(w, r)
	})
}

// drain is the stand-in for the reverse proxy: it reads the body and
// answers 200.
func drain() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
}

// runChain serves POSTs of body through h. The request is rebuilt from a
// template each iteration (one allocation: the shallow copy), with fresh
// headers and body, as the server would hand them over.
func runChain(b *testing.B, h http.Handler, body []byte, header http.Header) {
	tmpl := httptest.NewRequest(http.MethodPost, "http://summarizer/tasks", nil)
	hdr := make(http.Header, 16)
	rd := bytes.NewReader(body)
	rc := io.NopCloser(rd)
	w := &benchWriter{h: make(http.Header, 8)}
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		clear(hdr)
		for k, v := range header {
			hdr[k] = v
		}
		clear(w.h)
		rd.Reset(body)
		r := tmpl.WithContext(ctx)
		r.Header, r.Body, r.ContentLength = hdr, rc, int64(len(body))
		h.ServeHTTP(w, r)
	}
}

func benchLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func BenchmarkEgressChain(b *testing.B) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	log := benchLogger()
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	book := newMemBook(map[string]inbound{traceID: {hop: 1, record: "r1"}})
	h := AccessLog(log, Egress, "analyst")(
		Correlate(book)(
			Trace(tp, w3c())(
				benchResolve(
					Identity(
						Limit(1 << 20)(
							IdempotencyKey(newMemBook(nil), 1<<20, false)(drain())))))))
	header := http.Header{
		"Content-Type": {"application/json"},
		"Traceparent":  {"00-" + traceID + "-00f067aa0ba902b7-01"},
		"Accept":       {"application/json"},
	}
	for _, bc := range []struct {
		name string
		body []byte
		key  string
	}{
		{name: "json", body: benchBody(512, false)},
		{name: "a2a", body: benchBody(512, true)},
		{name: "agent-key", body: benchBody(512, false), key: `"order-42"`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			hdr := header.Clone()
			if bc.key != "" {
				hdr[HeaderIdempotencyKey] = []string{bc.key}
			}
			runChain(b, h, bc.body, hdr)
		})
	}
}

func BenchmarkIngressChain(b *testing.B) {
	log := benchLogger()
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := AccessLog(log, Ingress, "summarizer")(
		Trace(tp, w3c())(
			HopGuard(func(string) int { return 8 })(
				Limit(1 << 20)(drain()))))
	runChain(b, h, benchBody(512, true), http.Header{
		"Content-Type":    {"application/json"},
		"Traceparent":     {"00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"},
		"Baton-Agent":     {"analyst"},
		"Baton-Hop":       {"2"},
		"Idempotency-Key": {`"a2a-0123456789abcdef0123456789abcdef"`},
	})
}

// BenchmarkHarness is the cost of runChain itself, to subtract.
func BenchmarkHarness(b *testing.B) {
	runChain(b, drain(), benchBody(512, false), http.Header{"Content-Type": {"application/json"}})
}

func BenchmarkParseKey(b *testing.B) {
	for _, bc := range []struct{ name, v string }{
		{"unquoted", "order-42-0123456789abcdef"},
		{"quoted", `"order-42-0123456789abcdef"`},
		{"quoted-escaped", `"order-\"42\"-0123456789abcdef"`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			vs := []string{bc.v}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseKey(vs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDeriveKey(b *testing.B) {
	in := &Info{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", From: "analyst", To: "summarizer"}
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"json", benchBody(512, false)},
		{"a2a", benchBody(512, true)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "http://summarizer/tasks", nil)
			r.Header.Set("Content-Type", "application/json")
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				DeriveKey(in, r, bc.body)
			}
		})
	}
}

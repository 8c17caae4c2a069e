package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/proxy"
)

// BenchmarkModelCall measures what understanding a model call adds to an
// intercepted call through Baton: the agent's chat completion over HTTPS
// (its TLS terminated by Baton, TLS from Baton to the server), with a
// realistic answer, whole (about 1 KB) and streamed (40 events, usage in
// the last), through a Baton that knows the host for a model API
// (models.hosts: the call is understood, spanned, metered and recorded in
// no receipt: it serves no handling) and through one that does not (the
// same bytes, an external call). cpu-µs/op is the process's CPU per call
// (agent, Baton and server): the difference between the rows is the cost.
// trace=ids is the shipped default (no exporter: spans carry ids and
// record nothing); trace=sdk exports every span, through the SDK's batch
// processor, to an exporter that discards them.
func BenchmarkModelCall(b *testing.B) {
	whole := `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("The lakeside lodge seats forty. ", 25) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":812,"completion_tokens":190,"total_tokens":1002}}`
	var stream strings.Builder
	for i := range 40 {
		fmt.Fprintf(&stream, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"content":"word %d "}}]}`+"\n\n", i)
	}
	stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":812,"completion_tokens":40,"total_tokens":852}}` + "\n\ndata: [DONE]\n\n")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream.String())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, whole)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	host := srv.Listener.Addr().String()
	dir := b.TempDir()
	caFile := filepath.Join(dir, "server-ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)

	request := func(stream bool) string {
		s := ""
		if stream {
			s = `"stream":true,"stream_options":{"include_usage":true},`
		}
		return `{"model":"gpt-4.1-mini",` + s + `"messages":[{"role":"system","content":"You plan offsites."},{"role":"user","content":"` +
			strings.Repeat("Find a venue for forty people near the lake. ", 40) + `"}]}`
	}
	for _, tracing := range []string{"ids", "sdk"} {
		for _, known := range []bool{false, true} {
			models := ""
			if known {
				models = "models: {hosts: {'" + host + "': openai}}\n"
			}
			bundle := filepath.Join(dir, fmt.Sprint(known), "bundle.pem")
			bt := startBatonWith(b, "agent: a\nupstream: http://127.0.0.1:1\nlog_level: warn\n"+
				"external: {allow: ['"+host+"'], ca_file: "+caFile+"}\n"+models+
				"intercept: {tls: {hosts: ['"+host+"'], bundle: "+bundle+"}}\n", nil, benchTracing(b, tracing))
			pemBytes, err := os.ReadFile(bundle)
			if err != nil {
				b.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(pemBytes)
			client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&neturl.URL{Scheme: "http", Host: bt.EgressAddr()}),
				TLSClientConfig: &tls.Config{RootCAs: roots}}}
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("trace=%s/understood=%v/stream=%v", tracing, known, stream)
				body := request(stream)
				b.Run(name, func(b *testing.B) {
					call := func() {
						resp, err := client.Post("https://"+host+"/v1/chat/completions", "application/json", strings.NewReader(body))
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Fatalf("%d", resp.StatusCode)
						}
					}
					call()
					measureCalls(b, call)
				})
			}
			client.CloseIdleConnections()
		}
	}
}

// benchTracing gives a benchmark's Baton the tracer provider serve would:
// "ids" with no exporter, "sdk" exporting (to nowhere, here).
func benchTracing(b *testing.B, tracing string) func(*proxy.Options) {
	return func(o *proxy.Options) {
		if tracing == "ids" {
			o.TracerProvider = &middleware.IDTracerProvider{}
			return
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		o.TracerProvider = tp
	}
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

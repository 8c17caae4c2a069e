package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"
)

// agentBody is what the bench agent answers; the probe checks that a row's
// response is exactly this, so that a proxy answering on its own is caught.
const agentBody = `{"ok":true,"agent":"bench"}`

// agentMarker is a response header the bench agent sets, for the same check.
const agentMarker = "Bench-Agent"

// runAgent is the hidden subcommand `bench agent --listen ADDR`: a minimal
// agent that reads the request body and answers 200 with a small JSON body.
// It runs in its own process so that its CPU is never counted as a proxy's.
func runAgent(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	body := []byte(agentBody)
	clen := fmt.Sprint(len(body))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hd := w.Header()
		hd["Content-Type"] = []string{"application/json"}
		hd["Content-Length"] = []string{clen}
		hd[agentMarker] = []string{"1"}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
	return serve("agent", *listen, h, stderr)
}

// serve runs srv on a loopback address until SIGTERM or SIGINT.
func serve(name, addr string, h http.Handler, stderr io.Writer) int {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(stderr, "bench %s: --listen must be a loopback host:port, got %q\n", name, addr)
		return 2
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "bench %s: %v\n", name, err)
		return 1
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	// HTTP/2 without TLS beside HTTP/1.1, for -sse -sse-h2c -sse-hops 0.
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "bench %s: %v\n", name, err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "bench %s: shutdown: %v\n", name, err)
	}
	return 0
}

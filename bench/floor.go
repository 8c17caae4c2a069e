package main

import (
	"flag"
	"fmt"
	"io"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/debug"
	"time"

	"github.com/batonproxy/baton/proxy"
)

// runFloor is the hidden subcommand `bench floor --listen ADDR --upstream
// URL`: the Go floor. It is one bare httputil.ReverseProxy hop built from
// exactly Baton's transport, buffer pool and GC setting, and nothing else:
// no router, no middleware, no tracing. What Baton costs above this row is
// what Baton's own features cost; what this row costs above direct is what
// any Go proxy on net/http costs.
func runFloor(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	upstream := fs.String("upstream", "", "agent base URL, e.g. http://127.0.0.1:8080")
	pprofAddr := fs.String("pprof", "", "also serve the Go runtime's profiles on this loopback address (/debug/pprof/), for -profile")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		fmt.Fprintf(stderr, "bench floor: --upstream must be a URL like http://127.0.0.1:8080, got %q\n", *upstream)
		return 2
	}
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr); err != nil {
			fmt.Fprintf(stderr, "bench floor: %v\n", err)
			return 1
		}
	}
	// The same GC setting as Baton's main.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
		},
		Transport: proxy.NewTransport(proxy.TransportOptions{
			Dial:           5 * time.Second,
			UpstreamHeader: 60 * time.Second,
		}),
		BufferPool: proxy.NewBufferPool(),
	}
	return serve("floor", *listen, rp, stderr)
}

// Command readyfloor is the floor `bench -startup` times Baton's start
// against: a Go net/http server that answers 200 on /readyz and does nothing
// else, built as Baton is (static, trimmed, stripped). What a start of Baton
// takes above this is what Baton's own start costs; what this takes is what
// starting any Go server costs on the machine.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {})
	if err := http.ListenAndServe(*listen, mux); err != nil {
		fmt.Fprintf(os.Stderr, "readyfloor: %v\n", err)
		os.Exit(1)
	}
}

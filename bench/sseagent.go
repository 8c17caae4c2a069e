package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// runSSEAgent is the hidden subcommand `bench sse-agent --listen ADDR
// --events N --over D`: an agent that answers each POST whose JSON body
// names a stream ({"stream": 17}) with a text/event-stream of N events, the
// first at once and the rest spaced evenly over D, each carrying its stream
// id and sequence number. It runs in its own process, as the other agent
// does, so that its CPU and its sockets are its own.
func runSSEAgent(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sse-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	events := fs.Int("events", 20, "events per stream")
	over := fs.Duration("over", 10*time.Second, "time from a stream's first event to its last")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *events < 1 || *over < 0 {
		fmt.Fprintln(stderr, "bench sse-agent: --events must be >= 1 and --over >= 0")
		return 2
	}
	return serve("sse-agent", *listen, sseAgentHandler(*events, *over), stderr)
}

// sseRequest is the body a stream's client sends.
type sseRequest struct {
	Stream *int `json:"stream"`
}

// sseEvent is the data of one event.
type sseEvent struct {
	Stream int `json:"stream"`
	Seq    int `json:"seq"`
}

// sseAgentHandler answers as runSSEAgent describes. A client that goes away
// ends its stream.
func sseAgentHandler(events int, over time.Duration) http.Handler {
	var gap time.Duration
	if events > 1 {
		gap = over / time.Duration(events-1)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST a JSON body {\"stream\": N}", http.StatusMethodNotAllowed)
			return
		}
		var req sseRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil || req.Stream == nil {
			http.Error(w, "want a JSON body {\"stream\": N}", http.StatusBadRequest)
			return
		}
		stream := *req.Stream
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set(agentMarker, "1")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		var t *time.Timer
		buf := make([]byte, 0, 96)
		for seq := 1; seq <= events; seq++ {
			if seq > 1 && gap > 0 {
				if t == nil {
					t = time.NewTimer(gap)
				} else {
					t.Reset(gap)
				}
				select {
				case <-r.Context().Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			buf = appendSSEEvent(buf[:0], stream, seq)
			if _, err := w.Write(buf); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	})
}

// appendSSEEvent appends one event: its id is the sequence number, its data
// the stream and the sequence number as JSON.
func appendSSEEvent(b []byte, stream, seq int) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, "\nevent: tick\ndata: {\"stream\":"...)
	b = strconv.AppendInt(b, int64(stream), 10)
	b = append(b, ",\"seq\":"...)
	b = strconv.AppendInt(b, int64(seq), 10)
	return append(b, "}\n\n"...)
}

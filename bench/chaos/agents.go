package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// order is what the chain's requests carry: the client's order id, which
// each agent passes on, and a run counter that makes every body differ (as
// a model's output would), so that keys by causal position are what keeps
// a re-run from repeating a step.
type order struct {
	Order string `json:"order"`
	Run   int64  `json:"run,omitempty"`
	Agent string `json:"agent,omitempty"`
}

// agentFault is what the leaf agent does to the requests it gets while a
// fault is on.
type agentFault int32

const (
	faultNone   agentFault = iota
	faultErrors            // answer 503 without the side effect
	faultCrash             // drop the connection mid-request, before the side effect
	faultSlow              // take longer than the caller's timeout, then do the side effect
)

// agents are the chain's agents, in process: each relays to the next
// through its Baton's egress, and the last one makes the side effect the
// run counts: one booking per order.
type agents struct {
	slow time.Duration // how long the leaf takes under faultSlow

	fault atomic.Int32 // agentFault, for the leaf

	mu       sync.Mutex
	effects  map[string]int            // order → the leaf's side effects
	runs     map[string]map[string]int // agent → order → runs answered 2xx
	lastRuns atomic.Int64

	servers []*http.Server
}

func newAgents(slow time.Duration) *agents {
	return &agents{slow: slow, effects: map[string]int{}, runs: map[string]map[string]int{}}
}

// startLazy serves agent name on a port of its own; next is the peer it
// hands off to through the egress *egress names once its Baton listens (""
// and nil for the leaf). It returns the agent's URL.
func (a *agents) startLazy(name, next string, egress *string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	var h http.HandlerFunc
	if next == "" {
		h = a.leaf(name)
	} else {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 60 * time.Second}
		h = a.relay(name, next, egress, client)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	a.servers = append(a.servers, srv)
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), nil
}

func (a *agents) close() {
	for _, s := range a.servers {
		s.Close()
	}
}

func readOrder(r *http.Request) (order, error) {
	var o order
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(b, &o)
	}
	if err == nil && o.Order == "" {
		err = fmt.Errorf("no order id")
	}
	return o, err
}

// relay is an agent in the middle: it passes the order on (with the trace
// context and baggage it got, as an OpenTelemetry-instrumented agent does)
// and answers with what came back.
func (a *agents) relay(name, next string, egress *string, client *http.Client) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		o, err := readOrder(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.Run, o.Agent = a.lastRuns.Add(1), name
		body, _ := json.Marshal(o)
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+*egress+"/orders", strings.NewReader(string(body)))
		req.Host = next
		req.Header.Set("Content-Type", "application/json")
		for _, h := range []string{"Traceparent", "Tracestate", "Baggage"} {
			if v := r.Header.Get(h); v != "" {
				req.Header.Set(h, v)
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, "calling "+next+": "+err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "%s answered %d: %s", next, resp.StatusCode, answer)
			return
		}
		a.ran(name, o.Order)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}
}

// leaf books the order: the side effect counted.
func (a *agents) leaf(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		o, err := readOrder(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch agentFault(a.fault.Load()) {
		case faultErrors:
			http.Error(w, "booking system unavailable", http.StatusServiceUnavailable)
			return
		case faultCrash:
			panic(http.ErrAbortHandler) // the connection drops before the booking
		case faultSlow:
			select {
			case <-time.After(a.slow):
			case <-r.Context().Done():
				return // the caller gave up before the booking
			}
		}
		a.mu.Lock()
		a.effects[o.Order]++
		n := a.effects[o.Order]
		a.mu.Unlock()
		a.ran(name, o.Order)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"order":%q,"booking":%d}`, o.Order, n)
	}
}

func (a *agents) ran(name, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.runs[name]
	if m == nil {
		m = map[string]int{}
		a.runs[name] = m
	}
	m[id]++
}

// effectsOf returns the leaf's side effects per order.
func (a *agents) effectsOf() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.effects))
	for k, v := range a.effects {
		out[k] = v
	}
	return out
}

// runsOf returns the completed runs of agent per order.
func (a *agents) runsOf(agent string) map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.runs[agent] {
		out[k] = v
	}
	return out
}

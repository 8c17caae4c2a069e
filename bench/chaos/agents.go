package chaos

import (
	"context"
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
	faultSlow              // hold the request until the fault heals (at most slow), then do the side effect
)

// agents are the chain's agents, in process: each relays to the next
// through its Baton's egress, and the last one makes the side effect the
// run counts: one booking per order.
type agents struct {
	slow time.Duration // the longest the leaf holds a request under faultSlow

	fault  atomic.Int32  // agentFault, for the leaf
	healed chan struct{} // under mu: closed when faultSlow ends

	mu       sync.Mutex
	effects  map[string]int            // order → the leaf's side effects
	bookings map[string][]booking      // order → each of its bookings, to name a duplicate's causes
	runs     map[string]map[string]int // agent → order → runs answered 2xx
	lastRuns atomic.Int64

	// Every strayEvery-th run of a relay also calls its next agent's host on
	// a port that is not its peer's (strayHost, set once the agents listen):
	// a call Baton must refuse, never deliver as a handoff.
	strayHost string
	stray     strayCounts

	servers []*http.Server
}

// strayEvery is how often a relay's run makes a stray-port call.
const strayEvery = 10

// strayCounts are the stray-port calls made and what became of them.
type strayCounts struct {
	sent, refused, answered, arrived atomic.Int64
}

func newAgents(slow time.Duration) *agents {
	return &agents{slow: slow, effects: map[string]int{}, bookings: map[string][]booking{}, runs: map[string]map[string]int{}}
}

// booking is one side effect of the leaf: when, which run of agent b asked
// for it, and the trace and key it came with.
type booking struct {
	at         time.Time
	run        int64
	trace, key string
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
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: callTimeout}
		h = a.relay(name, next, egress, client)
	}
	mux := http.NewServeMux()
	mux.Handle("/orders", h)
	mux.HandleFunc("/stray", func(w http.ResponseWriter, r *http.Request) {
		a.stray.arrived.Add(1) // a stray call delivered: the run fails
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.servers = append(a.servers, srv)
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), nil
}

// setFault sets what the leaf does from now on.
func (a *agents) setFault(f agentFault) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.healed != nil {
		close(a.healed) // what the slow fault holds goes on
		a.healed = nil
	}
	if f == faultSlow {
		a.healed = make(chan struct{})
	}
	a.fault.Store(int32(f))
}

// hold waits, under faultSlow, until the fault heals or a.slow has passed,
// and reports whether the caller is still there.
func (a *agents) hold(r *http.Request) bool {
	a.mu.Lock()
	healed := a.healed
	a.mu.Unlock()
	if healed == nil {
		return true // healed since the fault was read
	}
	t := time.NewTimer(a.slow)
	defer t.Stop()
	select {
	case <-t.C:
	case <-healed:
	case <-r.Context().Done():
		return false
	}
	return r.Context().Err() == nil
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
		if o.Run%strayEvery == 0 && a.strayHost != "" {
			a.strayCall(r.Context(), *egress, client)
		}
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

// strayCall calls a peer's agent's own address through the egress, as an
// unmodified client would with Baton as its HTTP proxy: not a peer's name or
// port, and not in external.allow, so Baton answers 403 unknown-destination.
func (a *agents) strayCall(ctx context.Context, egress string, client *http.Client) {
	a.stray.sent.Add(1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+egress+"/stray", strings.NewReader(`{}`))
	req.Host = a.strayHost
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	var p struct {
		Type string `json:"type"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden && strings.HasSuffix(p.Type, "#unknown-destination") {
		a.stray.refused.Add(1)
	} else {
		a.stray.answered.Add(1)
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
			if !a.hold(r) {
				return // the caller gave up before the booking
			}
		}
		a.mu.Lock()
		a.effects[o.Order]++
		n := a.effects[o.Order]
		a.bookings[o.Order] = append(a.bookings[o.Order], booking{at: time.Now(), run: o.Run,
			trace: r.Header.Get("Traceparent"), key: r.Header.Get("Idempotency-Key")})
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

// bookingsOf returns the leaf's bookings of order id.
func (a *agents) bookingsOf(id string) []booking {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]booking(nil), a.bookings[id]...)
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

package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/config"
)

// callTimeout bounds one request of a client or a relay agent: longer than
// the time limit a Baton on the shipped defaults puts on a try
// (timeouts.upstream_header), so that the caller hears Baton's own answer
// rather than giving up first.
const callTimeout = config.DefaultUpstreamHeader + 10*time.Second

// attempt is one request a client made.
type attempt struct {
	id       string // the order
	start    time.Time
	latency  time.Duration
	status   int // 0: no answer (a transport error)
	dead     string
	resuming bool // made by the resume after the load
}

func (a attempt) ok() bool { return a.status >= 200 && a.status < 300 }

// end is when the answer came (or the request failed).
func (a attempt) end() time.Time { return a.start.Add(a.latency) }

// final reports whether the answer ended the order for a client under
// load: it completed, or named a dead letter.
func (a attempt) final() bool { return a.ok() || a.dead != "" }

// keyState is where one order's key ended.
type keyState struct {
	completed  bool
	deadLetter string // the dead letter an answer named, when it ended so
	attempts   int
}

// driver is the load: clients that each place orders one after another,
// retrying each with its key until it gets a final answer or a dead letter.
type driver struct {
	entry    string // the first Baton's ingress
	client   *http.Client
	giveUp   time.Duration // per key
	interval time.Duration // between a client's orders

	next atomic.Int64

	mu       sync.Mutex
	attempts []attempt
	keys     map[string]*keyState
}

func newDriver(entry string, giveUp, interval time.Duration) *driver {
	return &driver{entry: entry, giveUp: giveUp, interval: interval, keys: map[string]*keyState{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}, Timeout: callTimeout}}
}

// run runs n clients until ctx ends; each finishes the order it is on.
func (d *driver) run(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				id := "o-" + strconv.FormatInt(d.next.Add(1), 10)
				wait := d.interval
				if !d.place(id, time.Now().Add(d.giveUp), false) {
					wait = max(wait, 250*time.Millisecond) // backs off after an order that did not complete, as clients do
				}
				if wait > 0 {
					time.Sleep(wait)
				}
			}
		}()
	}
	wg.Wait()
}

// place sends order id with its key until a final answer, a dead letter
// (unless resuming, when only a final answer ends it) or until, and
// reports whether the order completed.
func (d *driver) place(id string, until time.Time, resuming bool) bool {
	d.mu.Lock()
	st := d.keys[id]
	if st == nil {
		st = &keyState{}
		d.keys[id] = st
	}
	d.mu.Unlock()
	body := `{"order":"` + id + `"}`
	for wait := 50 * time.Millisecond; time.Now().Before(until); {
		a := d.send(id, body)
		a.resuming = resuming
		d.mu.Lock()
		d.attempts = append(d.attempts, a)
		st.attempts++
		switch {
		case a.ok():
			st.completed, st.deadLetter = true, ""
		case a.dead != "" && !resuming:
			st.deadLetter = a.dead
		}
		completed := st.completed
		done := completed || (st.deadLetter != "" && !resuming)
		d.mu.Unlock()
		if done {
			return completed
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
	return false
}

func (d *driver) send(id, body string) attempt {
	a := attempt{id: id, start: time.Now()}
	req, _ := http.NewRequest(http.MethodPost, "http://"+d.entry+"/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", strconv.Quote(id))
	resp, err := d.client.Do(req)
	a.latency = time.Since(a.start)
	if err != nil {
		return a
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a.status, a.dead = resp.StatusCode, resp.Header.Get("Baton-Dead-Letter")
	return a
}

// resume re-sends, with its key, every order that has not completed, as a
// chain is resumed (docs/resume.md), until each completes or until.
func (d *driver) resume(until time.Time, workers int) (resumed int) {
	d.mu.Lock()
	var open []string
	for id, st := range d.keys {
		if !st.completed {
			open = append(open, id)
		}
	}
	d.mu.Unlock()
	work := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				d.place(id, until, true)
			}
		}()
	}
	for _, id := range open {
		work <- id
	}
	close(work)
	wg.Wait()
	return len(open)
}

// snapshot copies what the driver saw.
func (d *driver) snapshot() ([]attempt, map[string]keyState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make(map[string]keyState, len(d.keys))
	for id, st := range d.keys {
		keys[id] = *st
	}
	return append([]attempt(nil), d.attempts...), keys
}

func (k keyState) String() string {
	switch {
	case k.completed:
		return "completed"
	case k.deadLetter != "":
		return "dead letter " + k.deadLetter
	}
	return fmt.Sprintf("open after %d attempt(s)", k.attempts)
}

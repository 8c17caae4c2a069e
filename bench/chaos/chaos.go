// Package chaos runs a chain of real Batons under steady load while it
// breaks their parts on a schedule, and checks Baton's promises across the
// whole chain: every order a client placed completes, or is a dead letter a
// Baton lists; after the dead letters are resumed, every order completed;
// and no order's side effect ran twice. `baton chaos` runs it
// (docs/chaos.md).
//
// The chain, every part a real process or socket:
//
//	clients ─▶ Baton a ─▶ agent a ─▶ Baton a egress ─▶ link ─▶ Baton b ─▶ agent b ─▶ Baton c ─▶ agent c (books)
//
// The three Batons share one throwaway redis-server; the link is a TCP
// proxy the harness can cut or slow (a partition between a and b).
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/batonproxy/baton/config"
)

// Options configure a run.
type Options struct {
	Baton   string // the baton binary the nodes run
	Redis   string // the redis-server binary
	Persist bool   // redis-server appends every write (appendfsync always)
	Cluster bool   // a Redis Cluster of three masters and three replicas instead of one redis-server

	Clients  int           // concurrent clients
	Interval time.Duration // pause between a client's orders
	Warmup   time.Duration // load before the first fault
	FaultFor time.Duration // how long each fault lasts
	Recover  time.Duration // load after each fault before the next
	Faults   []string      // names from FaultNames, in order
	GiveUp   time.Duration // a client stops retrying an order after this
	Resume   time.Duration // bound on resuming what did not complete

	Dir string // where logs and data go; empty: a temporary directory
	Out io.Writer
}

// FaultNames are the faults a run can inject, in the default order;
// ClusterFaultNames with a Redis Cluster.
var (
	FaultNames = []string{"agent-5xx", "agent-crash", "slow-peer", "partition", "link-delay",
		"baton-kill", "baton-term", "baton-stop", "redis-kill"}
	ClusterFaultNames = []string{"agent-5xx", "agent-crash", "slow-peer", "partition", "link-delay",
		"baton-kill", "baton-term", "baton-stop", "redis-failover"}
)

// faultDoc says what each fault does.
var faultDoc = map[string]string{
	"agent-5xx":   "agent c answers 503 to every request (no booking)",
	"agent-crash": "agent c drops each connection mid-request, before booking",
	"slow-peer": "agent c holds each request until the fault ends, then books (a hold longer than " +
		"Baton's default upstream header timeout, " + config.DefaultUpstreamHeader.String() + ", meets it)",
	"partition": "the link between Batons a and b closes every connection and refuses new ones",
	"link-delay": "the link drops its connections and holds each new one until the fault ends (a hold " +
		"longer than Baton's default upstream header timeout, " + config.DefaultUpstreamHeader.String() + ", meets it)",
	"baton-kill": "Baton b is SIGKILLed mid-request, and started again when the fault ends",
	"baton-term": "Baton b is sent SIGTERM (it drains), and started again when the fault ends",
	"baton-stop": "Baton b is frozen with SIGSTOP (its connections stay open, nothing answers), and " +
		"continued with SIGCONT when the fault ends",
	"redis-kill": "redis-server is SIGKILLed, and started again when the fault ends",
	"redis-failover": "a Redis Cluster master is SIGKILLed (its replica takes over), and started again " +
		"when the fault ends (it rejoins as a replica)",
}

// FaultDoc says what fault name does; "" for a name that is no fault.
func FaultDoc(name string) string { return faultDoc[name] }

// cluster is what a run starts.
type cluster struct {
	redis   *redis        // one redis-server, or
	rc      *redisCluster // a Redis Cluster
	batons  map[string]*batonNode
	link    *link
	agents  *agents
	persist bool
}

// stallFor bounds how long slow-peer and link-delay hold a request: a
// little past the only time limit a Baton on the shipped defaults puts on
// a try (no per_try_timeout; timeouts.upstream_header). A fault shorter
// than that ends first and lets what it held go on, as a peer or link that
// recovers does; a longer one meets Baton's timeout.
const stallFor = config.DefaultUpstreamHeader + 500*time.Millisecond

// termWait is how long baton-term waits for Baton b to drain and exit
// before killing it: its default shutdown grace, and a little more.
const termWait = config.DefaultShutdownGrace + 5*time.Second

func (c *cluster) inject(name string) error {
	switch name {
	case "agent-5xx":
		c.agents.setFault(faultErrors)
	case "agent-crash":
		c.agents.setFault(faultCrash)
	case "slow-peer":
		c.agents.setFault(faultSlow)
	case "partition":
		c.link.partition(true)
	case "link-delay":
		c.link.stall(stallFor)
	case "baton-kill":
		c.batons["b"].signal(syscall.SIGKILL, 5*time.Second)
	case "baton-term":
		c.batons["b"].signal(syscall.SIGTERM, termWait)
	case "baton-stop":
		c.batons["b"].pause()
	case "redis-kill":
		if c.redis == nil {
			return fmt.Errorf("chaos: redis-kill needs one redis-server: with --cluster, use redis-failover")
		}
		c.redis.signal(syscall.SIGKILL, 5*time.Second)
	case "redis-failover":
		if c.rc == nil {
			return fmt.Errorf("chaos: redis-failover needs --cluster")
		}
		return c.rc.failover()
	default:
		return fmt.Errorf("chaos: unknown fault %q (want one of %s)", name, strings.Join(FaultNames, ", "))
	}
	return nil
}

func (c *cluster) heal(name string) error {
	switch name {
	case "agent-5xx", "agent-crash", "slow-peer":
		c.agents.setFault(faultNone)
	case "partition":
		c.link.partition(false)
	case "link-delay":
		c.link.stall(0)
	case "baton-kill", "baton-term":
		return c.batons["b"].restart()
	case "baton-stop":
		c.batons["b"].resume()
	case "redis-kill":
		return c.redis.restart()
	case "redis-failover":
		return c.rc.rejoin()
	}
	return nil
}

// close stops everything the run started; a Baton left paused by
// baton-stop is continued first (process.signal).
func (c *cluster) close() {
	for _, b := range c.batons {
		b.stop()
	}
	if c.link != nil {
		c.link.close()
	}
	if c.agents != nil {
		c.agents.close()
	}
	if c.redis != nil {
		c.redis.stop()
	}
	if c.rc != nil {
		c.rc.stop()
	}
}

// start brings the chain up.
func start(o Options) (*cluster, error) {
	c := &cluster{batons: map[string]*batonNode{}, persist: o.Persist}
	c.agents = newAgents(stallFor)
	var err error
	store := ""
	if o.Cluster {
		if c.rc, err = startCluster(o.Dir, o.Redis, o.Persist); err != nil {
			return c, err
		}
		store = "addrs: [" + strings.Join(c.rc.addrs(), ", ") + "]"
	} else {
		if c.redis, err = startRedis(o.Dir, o.Redis, o.Persist, "redis"); err != nil {
			return c, err
		}
		store = "url: " + c.redis.url()
	}
	// No edges: the clients, which run no Baton, may call a. Nothing else
	// is set: every Baton runs the shipped defaults (timeouts, retries,
	// breaker, dedupe lease, store timeouts), so that what the run measures
	// is what a user who sets none of them gets.
	common := "store: {redis: {" + store + "}}\n"
	cURL, err := c.agents.startLazy("c", "", nil)
	if err != nil {
		return c, err
	}
	if c.batons["c"], err = startBaton(o.Dir, o.Baton, "c", "upstream: "+cURL+"\n"+common); err != nil {
		return c, err
	}
	// Agents a and b call their Batons' egress, known once those listen: the
	// Batons are started first, on their fixed ports, with their upstreams.
	bEgress, aEgress := new(string), new(string)
	bURL, err := c.agents.startLazy("b", "c", bEgress)
	if err != nil {
		return c, err
	}
	c.agents.strayHost = strings.TrimPrefix(bURL, "http://")
	if c.batons["b"], err = startBaton(o.Dir, o.Baton, "b", "upstream: "+bURL+"\n"+common+
		"peers: {c: {url: http://"+c.batons["c"].ingress+"}}\n"); err != nil {
		return c, err
	}
	*bEgress = c.batons["b"].egress
	if c.link, err = startLink(c.batons["b"].ingress); err != nil {
		return c, err
	}
	aURL, err := c.agents.startLazy("a", "b", aEgress)
	if err != nil {
		return c, err
	}
	if c.batons["a"], err = startBaton(o.Dir, o.Baton, "a", "upstream: "+aURL+"\n"+common+
		"peers: {b: {url: http://"+c.link.addr()+"}}\n"); err != nil {
		return c, err
	}
	*aEgress = c.batons["a"].egress
	return c, nil
}

// Run starts the chain, drives the load through the schedule of faults,
// resumes what did not complete, checks the promises and writes the report
// to o.Out. The error is non-nil when a promise was broken (a side effect
// ran twice, an order was lost) or the run could not be made.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "baton-chaos-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.Dir = dir
	}
	if o.Baton == "" || o.Redis == "" || o.Clients < 1 {
		return nil, errors.New("chaos: Options need the baton and redis-server binaries and at least one client")
	}
	for _, f := range o.Faults {
		if _, ok := faultDoc[f]; !ok {
			return nil, fmt.Errorf("chaos: unknown fault %q (want one of %s)", f, strings.Join(FaultNames, ", "))
		}
	}
	c, err := start(o)
	defer c.close()
	if err != nil {
		return nil, err
	}
	d := newDriver(c.batons["a"].ingress, o.GiveUp, o.Interval)
	kind := "one redis-server"
	if o.Cluster {
		kind = "a Redis Cluster (3 masters, 3 replicas)"
	}
	fmt.Fprintf(o.Out, "chaos: a → b → c on %s, %d clients, persistence %v; logs in %s\n", kind, o.Clients, o.Persist, o.Dir)

	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() { d.run(loadCtx, o.Clients); close(loadDone) }()

	var phases []phase
	began := time.Now()
	sleepCtx(ctx, o.Warmup)
	phases = append(phases, phase{name: "warm-up", start: began, end: time.Now(), after: time.Now()})
	for _, f := range o.Faults {
		if ctx.Err() != nil {
			break
		}
		p := phase{name: f, start: time.Now()}
		fmt.Fprintf(o.Out, "  %-14s %s\n", f, faultDoc[f])
		if err := c.inject(f); err != nil {
			stopLoad()
			<-loadDone
			return nil, err
		}
		sleepCtx(ctx, o.FaultFor)
		if err := c.heal(f); err != nil {
			stopLoad()
			<-loadDone
			return nil, fmt.Errorf("chaos: healing %s: %w", f, err)
		}
		p.end = time.Now()
		sleepCtx(ctx, o.Recover)
		p.after = time.Now()
		phases = append(phases, p)
	}
	stopLoad()
	<-loadDone
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r := &Report{Options: o, Phases: phases}
	_, keys := d.snapshot()
	r.Placed = len(keys)
	for _, st := range keys {
		switch {
		case st.completed:
			r.Completed++
		case st.deadLetter != "":
			r.DeadLettered++
		default:
			r.Open++
		}
	}
	r.Resumed = d.resume(time.Now().Add(o.Resume), max(128, 4*o.Clients))
	attempts, resumed := d.snapshot()
	r.check(c, keys, resumed)
	r.measure(attempts)
	r.write(o.Out)
	if r.Duplicates > 0 || r.Lost > 0 {
		return r, fmt.Errorf("chaos: %d order(s) whose side effect ran more than once, %d order(s) lost", r.Duplicates, r.Lost)
	}
	if r.Stray.Delivered > 0 {
		return r, fmt.Errorf("chaos: %d stray-port call(s) delivered to an agent", r.Stray.Delivered)
	}
	return r, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

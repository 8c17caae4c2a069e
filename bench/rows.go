package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonproxy/baton/trust/mtls"
)

// harness holds what one run shares across rows.
type harness struct {
	o      *options
	sup    *supervisor
	dir    string
	self   string // this binary, for the agent and floor subcommands
	wrk    string
	stderr io.Writer

	body      []byte
	script    string
	mcpBody   []byte // the baton-2hop-mcp row's body, and its script
	mcpScript string
	agent     *child
	agentAddr string
	batonBin  string
	batonErr  error // why Baton could not be built, once
	round     int   // the round being measured, from 1
}

// endpoint is a row made ready to measure: where wrk sends, which
// processes are the proxy being measured, and which other processes the row
// relies on (a Redis) whose CPU is the row's but not the proxy's.
type endpoint struct {
	url    string
	host   string
	script string // the wrk script, when not the run's, and its body
	body   []byte

	instances []instance
	services  []instance
}

// instance is one proxy (a Baton, or nginx with its master and worker) or
// one service a row relies on (redis-server).
type instance struct {
	name  string
	pids  []int
	ready time.Duration // process start to /readyz 200; Baton only
	// started is when a Baton was started: its idle RSS is read once its
	// settle trim is done (settleWait after this).
	started time.Time
	role    string // what a service is to the row, for the report
	// pprof is where the process serves its profiles, with -profile: a
	// Baton's admin listener, the floor's --pprof.
	pprof string
}

// bodyOr returns the endpoint's request body, or def when it has none of
// its own.
func (ep *endpoint) bodyOr(def []byte) []byte {
	if ep.body != nil {
		return ep.body
	}
	return def
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.stderr, "bench: "+format+"\n", args...)
}

// runAll starts the agent and runs every selected row in order, -repeat
// times. A row that cannot run is recorded as skipped or failed and the run
// goes on; only a failure of the agent itself ends it.
func (h *harness) runAll(ctx context.Context) (*results, error) {
	res := &results{Meta: h.meta(ctx)}
	h.body, h.mcpBody = requestBody(h.o.bodyBytes), mcpBody(h.o.bodyBytes)
	var err error
	if h.script, err = writeScript(h.dir, "post.lua", h.body); err != nil {
		return nil, err
	}
	if h.mcpScript, err = writeScript(h.dir, "mcp.lua", h.mcpBody); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	h.agent, err = h.sup.start("agent", h.self, "agent", "--listen", addr)
	if err != nil {
		return nil, err
	}
	h.agentAddr = addr
	if err := waitProbe(ctx, h.agent, "http://"+addr+"/bench", "", h.body); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}

	for name := range h.o.rows {
		if strings.HasPrefix(name, "baton-") {
			// Build before any row runs, so the compiler is not part of the
			// machine's load during a measurement.
			_, _ = h.baton(ctx)
			break
		}
	}

	setups := map[string]func(context.Context) (*endpoint, func(), error){
		rowDirect:     h.setupDirect,
		rowFloor:      h.setupFloor,
		rowBaton1:     h.setupBaton1,
		rowBaton1Core: h.setupBaton1Core,
		rowNginx:      h.setupNginx,
		rowHAProxy:    h.setupHAProxy,
	}
	for name, v := range twoHops {
		v.row = name
		setups[name] = h.setupBaton2(v)
	}
	// Each round runs every row in order, so the pairs of a ratio still run
	// back to back, and the rounds spread each pair over the run's time.
	for round := 1; round <= h.o.repeat && ctx.Err() == nil; round++ {
		h.round = round
		for _, name := range rowNames {
			if !h.o.rows[name] {
				continue
			}
			if ctx.Err() != nil {
				break
			}
			if h.o.waitQuiet > 0 {
				h.waitQuiet(ctx)
			}
			label := name
			if h.o.repeat > 1 {
				label = fmt.Sprintf("round %d/%d: %s", round, h.o.repeat, name)
			}
			h.logf("%s: starting", label)
			row := h.runRow(ctx, name, setups[name])
			if h.o.repeat > 1 {
				row.Round = round
			}
			switch row.Status {
			case statusOK:
				h.logf("%s: %.0f req/s, p99 %s", label, row.RPS, fmtDur(row.P99Ms))
			default:
				h.logf("%s: %s: %s", label, row.Status, row.Note)
			}
			res.Rows = append(res.Rows, row)
		}
	}
	res.derive()
	return res, nil
}

// runRow sets a row up, measures it and tears it down.
func (h *harness) runRow(ctx context.Context, name string, setup func(context.Context) (*endpoint, func(), error)) Row {
	row := Row{Name: name}
	ep, teardown, err := setup(ctx)
	if teardown != nil {
		defer teardown()
	}
	var skip skipError
	switch {
	case errors.As(err, &skip):
		row.Status, row.Note = statusSkipped, skip.reason
		return row
	case ctx.Err() != nil:
		row.Status, row.Note = statusSkipped, "interrupted"
		return row
	case err != nil:
		row.Status, row.Note = statusFailed, err.Error()
		return row
	}
	if err := h.measure(ctx, ep, &row); err != nil {
		row.Status, row.Note = statusFailed, err.Error()
		if ctx.Err() != nil {
			row.Status, row.Note = statusSkipped, "interrupted"
		}
		return row
	}
	row.Status = statusOK
	return row
}

// skipError marks a row that cannot run on this machine (a tool missing).
type skipError struct{ reason string }

func (e skipError) Error() string { return e.reason }

func (h *harness) setupDirect(context.Context) (*endpoint, func(), error) {
	return &endpoint{url: "http://" + h.agentAddr + "/bench"}, nil, nil
}

func (h *harness) setupFloor(ctx context.Context) (*endpoint, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	args := []string{"floor", "--listen", addr, "--upstream", "http://" + h.agentAddr}
	var pprofAddr string
	if h.o.profileDir != "" {
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, nil, err
		}
		args = append(args, "--pprof", pprofAddr)
	}
	c, err := h.sup.start("floor", h.self, args...)
	if err != nil {
		return nil, nil, err
	}
	url := "http://" + addr + "/bench"
	if err := waitProbe(ctx, c, url, "", h.body); err != nil {
		return nil, c.stop, err
	}
	return &endpoint{url: url, instances: []instance{{name: "floor", pids: []int{c.pid()}, pprof: pprofAddr}}}, c.stop, nil
}

// baton returns the Baton binary, building it once per run.
func (h *harness) baton(ctx context.Context) (string, error) {
	if h.batonBin != "" || h.batonErr != nil {
		return h.batonBin, h.batonErr
	}
	if h.o.batonBin != "" {
		if _, err := os.Stat(h.o.batonBin); err != nil {
			h.batonErr = fmt.Errorf("-baton: %w", err)
		}
		h.batonBin = h.o.batonBin
		return h.batonBin, h.batonErr
	}
	root, err := moduleRoot(ctx)
	if err == nil {
		h.logf("building ./cmd/baton")
		h.batonBin, err = buildBaton(ctx, root, h.dir)
	}
	h.batonErr = err
	return h.batonBin, err
}

func (h *harness) setupBaton1(ctx context.Context) (*endpoint, func(), error) {
	return h.setupBaton1With(ctx, false)
}

// setupBaton1Core is one Baton hop with only the core of a hop: records,
// checkpoints and the envelope contract off.
func (h *harness) setupBaton1Core(ctx context.Context) (*endpoint, func(), error) {
	return h.setupBaton1With(ctx, true)
}

func (h *harness) setupBaton1With(ctx context.Context, core bool) (*endpoint, func(), error) {
	bin, err := h.baton(ctx)
	if err != nil {
		return nil, nil, err
	}
	a, err := freeAddrs(3)
	if err != nil {
		return nil, nil, err
	}
	agentURL := "http://" + h.agentAddr
	c, ready, err := h.startBaton(ctx, bin, batonSpec{
		name: "baton-1hop", agent: "bench-a", upstream: agentURL, logLevel: h.o.batonLog,
		egress: a[0], ingress: a[1], admin: a[2],
		peers:   map[string]string{"bench-b": agentURL},
		edgesTo: []string{"bench-b"}, noRecords: core, noContract: core,
	})
	stop := stopper(c)
	if err != nil {
		return nil, stop, err
	}
	url := "http://" + a[0] + "/bench"
	if err := probe(url, "bench-b", h.body); err != nil {
		return nil, stop, err
	}
	return &endpoint{url: url, host: "bench-b", instances: []instance{
		{name: "baton", pids: []int{c.pid()}, ready: ready, started: c.started, pprof: h.pprofOf(a[2])},
	}}, stop, nil
}

// twoHop is what a baton-2hop row varies: Baton B's (the receiver's) dedupe
// window, which Batons keep their state in Redis, and whether both write
// handoff records.
type twoHop struct {
	row       string // names the processes, their configs and logs: <row>-a, <row>-b
	noDedupe  bool   // Baton B's ingress dedupe window off
	redisB    bool   // Redis is Baton B's store
	redisA    bool   // Redis is Baton A's store too
	noRecords bool   // records: {enabled: false} on both Batons
	mcp       bool   // the edge is MCP (edges[].mcp) and each request a tools/call
	mtls      bool   // the Batons speak mutual TLS (tls), certificates from a CA made for the row
	mesh      bool   // with redisA and redisB: one prefix for both, as a mesh on one Redis has
}

// twoHops are the baton-2hop rows, by name.
var twoHops = map[string]twoHop{
	rowBaton2:                   {},
	rowBaton2NoDedupe:           {noDedupe: true},
	rowBaton2NoRecords:          {noRecords: true},
	rowBaton2Redis:              {redisB: true},
	rowBaton2RedisNoDedupe:      {redisB: true, noDedupe: true},
	rowBaton2RedisNoRecords:     {redisB: true, noRecords: true},
	rowBaton2RedisBoth:          {redisA: true, redisB: true},
	rowBaton2RedisBothNoRecords: {redisA: true, redisB: true, noRecords: true},
	rowBaton2RedisMesh:          {redisA: true, redisB: true, mesh: true},
	rowBaton2MCP:                {mcp: true},
	rowBaton2MTLS:               {mtls: true},
}

// specs returns Baton A's and Baton B's configurations for the row, without
// their addresses and A's peer, which startBaton2 fills in. rdb hands out
// the Redis key prefixes; it is nil when neither Baton uses Redis.
func (v twoHop) specs(agentURL, logLevel string, rdb *benchRedis) (a, b batonSpec) {
	a = batonSpec{
		name: v.row + "-a", agent: "bench-a", upstream: agentURL, logLevel: logLevel,
		edgesTo: []string{"bench-b"}, noRecords: v.noRecords, mcp: v.mcp,
	}
	b = batonSpec{
		name: v.row + "-b", agent: "bench-b", upstream: agentURL, logLevel: logLevel,
		edgeFrom: []string{"bench-a"}, noDedupe: v.noDedupe, noRecords: v.noRecords, mcp: v.mcp,
	}
	// Each Baton gets its own prefix, as two deployments sharing a Redis
	// would; in the mesh row both get one, as Batons of one mesh do (a
	// trace's records are then one chain that both write).
	if v.redisA && rdb != nil {
		a.redisURL, a.redisPrefix = benchRedisURL, rdb.newPrefix()
	}
	if v.redisB && rdb != nil {
		b.redisURL, b.redisPrefix = benchRedisURL, rdb.newPrefix()
		if v.mesh && v.redisA {
			b.redisPrefix = a.redisPrefix
		}
	}
	return a, b
}

// storeRole says whose store Redis is in the row, for the report.
func (v twoHop) storeRole() string {
	switch {
	case v.redisA && v.redisB && v.mesh:
		return "Baton A's and B's store, one prefix"
	case v.redisA && v.redisB:
		return "Baton A's and B's store"
	case v.redisA:
		return "Baton A's store"
	}
	return "Baton B's store"
}

// setupBaton2 returns the setup of a baton-2hop row with its Batons set up
// as v says.
func (h *harness) setupBaton2(v twoHop) func(context.Context) (*endpoint, func(), error) {
	return func(ctx context.Context) (*endpoint, func(), error) {
		bin, err := h.baton(ctx)
		if err != nil {
			return nil, nil, err
		}
		var rdb *benchRedis
		if v.redisA || v.redisB {
			if rdb, err = openRedis(ctx, benchRedisURL); err != nil {
				return nil, nil, err
			}
		}
		specA, specB := v.specs("http://"+h.agentAddr, h.o.batonLog, rdb)
		if v.mtls {
			if specA.tls, specB.tls, err = h.certificates(v.row, specA.agent, specB.agent); err != nil {
				return nil, nil, err
			}
		}
		body, script := h.body, ""
		if v.mcp {
			body, script = h.mcpBody, h.mcpScript
		}
		ep, stop, err := h.startBaton2(ctx, bin, specA, specB, body)
		if ep != nil && script != "" {
			ep.script, ep.body = script, body
		}
		if rdb == nil {
			return ep, stop, err
		}
		if ep != nil && rdb.pid > 0 {
			ep.services = []instance{{name: rdb.name(), pids: []int{rdb.pid}, role: v.storeRole()}}
		}
		// Keys go after the Batons (which flush their queued records as they
		// stop), and after the measurement: not on its clock.
		return ep, func() { stop(); rdb.close(h.logf) }, err
	}
}

// startBaton2 starts Baton B from specB, then Baton A from specA with B's
// ingress as its peer bench-b (the addresses are filled in here), and
// probes the path with body (not when body is nil: the -sse mode probes
// its own way).
func (h *harness) startBaton2(ctx context.Context, bin string, specA, specB batonSpec, body []byte) (*endpoint, func(), error) {
	a, err := freeAddrs(6)
	if err != nil {
		return nil, func() {}, err
	}
	specA.egress, specA.ingress, specA.admin = a[0], a[1], a[2]
	specB.egress, specB.ingress, specB.admin = a[3], a[4], a[5]
	scheme := "http://"
	if specB.tls != nil {
		scheme = "https://"
	}
	specA.peers = map[string]string{"bench-b": scheme + a[4]}
	// B first, so that A's peer is listening when A starts.
	cb, readyB, err := h.startBaton(ctx, bin, specB)
	stopB := stopper(cb)
	if err != nil {
		return nil, stopB, err
	}
	ca, readyA, err := h.startBaton(ctx, bin, specA)
	stop := func() { stopper(ca)(); stopB() }
	if err != nil {
		return nil, stop, err
	}
	url := "http://" + a[0] + "/bench"
	if body != nil {
		if err := probe(url, "bench-b", body); err != nil {
			return nil, stop, err
		}
	}
	return &endpoint{url: url, host: "bench-b", instances: []instance{
		{name: "baton-a", pids: []int{ca.pid()}, ready: readyA, started: ca.started, pprof: h.pprofOf(specA.admin)},
		{name: "baton-b", pids: []int{cb.pid()}, ready: readyB, started: cb.started, pprof: h.pprofOf(specB.admin)},
	}}, stop, nil
}

func (h *harness) setupNginx(ctx context.Context) (*endpoint, func(), error) {
	return h.setupCFloor(ctx, "nginx", h.startNginx)
}

// setupCFloor runs the C proxy of that name (its binary on PATH, the row
// skipped without it), started by start, in front of the agent.
func (h *harness) setupCFloor(ctx context.Context, name string,
	start func(ctx context.Context, bin, listen, upstream string) (*child, []int, error)) (*endpoint, func(), error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, nil, skipError{name + " not on PATH (Debian/Ubuntu: `apt-get install " + name + "`)"}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	c, pids, err := start(ctx, bin, addr, h.agentAddr)
	stop := stopper(c)
	if err != nil {
		return nil, stop, err
	}
	url := "http://" + addr + "/bench"
	if err := probe(url, "", h.body); err != nil {
		return nil, stop, err
	}
	return &endpoint{url: url, instances: []instance{{name: name, pids: pids}}}, stop, nil
}

func stopper(c *child) func() {
	if c == nil {
		return func() {}
	}
	return c.stop
}

// waitProbe waits for url to answer the probe request, then checks it once
// more strictly: a proxy that is up but answers wrongly fails at once.
func waitProbe(ctx context.Context, c *child, url, host string, body []byte) error {
	_, err := poll(ctx, c, 5*time.Millisecond, 10*time.Second, url, func() error {
		// Any HTTP answer means the listener is up.
		if _, err := getStatus(strings.TrimSuffix(url, "/bench") + "/"); err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return probe(url, host, body)
}

// certificates makes a CA for the row and a certificate for each of its
// two Batons' agents, in the run's directory.
func (h *harness) certificates(row, agentA, agentB string) (a, b *tlsFiles, err error) {
	dir := filepath.Join(h.dir, row+"-tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	ca, err := mtls.NewCA("bench.local", 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	bundle, _, err := ca.PEM()
	if err != nil {
		return nil, nil, err
	}
	bundlePath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(bundlePath, bundle, 0o600); err != nil {
		return nil, nil, err
	}
	issue := func(agent string) (*tlsFiles, error) {
		cert, key, err := ca.Issue(agent, time.Now().Add(-time.Minute), time.Now().Add(24*time.Hour))
		if err != nil {
			return nil, err
		}
		f := &tlsFiles{cert: filepath.Join(dir, agent+".pem"), key: filepath.Join(dir, agent+"-key.pem"), bundle: bundlePath}
		if err := os.WriteFile(f.cert, cert, 0o600); err != nil {
			return nil, err
		}
		return f, os.WriteFile(f.key, key, 0o600)
	}
	if a, err = issue(agentA); err != nil {
		return nil, nil, err
	}
	b, err = issue(agentB)
	return a, b, err
}

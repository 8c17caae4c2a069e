// Command bench is Baton's benchmark harness. One run starts a small agent
// and measures, side by side with wrk on loopback, what each way of reaching
// it costs: directly, through one bare Go reverse-proxy hop built from
// Baton's own transport (the Go floor), through one Baton, through two
// Batons (egress then ingress, the real path; also with the receiver's
// ingress dedupe window off, with handoff records off on both, and with Redis
// as the receiver's store or both Batons', to read what the window and the
// records cost), and through nginx (the C floor). For every row it reports
// throughput, latency, the proxy's CPU time per request and its memory, so
// that Baton's overhead is read against the best a Go proxy can do, not
// against nothing. With -repeat N it measures every row N times, in N
// rounds of all the rows, and reports each ratio's median over the rounds.
//
// Usage:
//
//	go run ./bench [-c 64] [-d 10s] [-t 2] [-body-bytes 512] [-quick]
//	               [-markdown] [-json FILE] [-rows direct,go-floor,...]
//	               [-repeat N]
//
// The agent and the Go floor run as separate processes (this binary re-run
// with the hidden subcommands "agent" and "floor") so that each process's
// CPU time is its own. Every process the harness starts is stopped when it
// exits, on success, on error and on SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "agent":
			os.Exit(runAgent(os.Args[2:], os.Stderr))
		case "floor":
			os.Exit(runFloor(os.Args[2:], os.Stderr))
		case "sse-agent":
			os.Exit(runSSEAgent(os.Args[2:], os.Stderr))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// rowNames are the rows in the order they run and print.
// Every pair compared in a ratio runs back to back: a row's -norecords
// variant runs right after it, and its -nodedupe variant right before it.
var rowNames = []string{
	rowDirect, rowFloor, rowBaton1Core, rowBaton1,
	rowBaton2NoDedupe, rowBaton2, rowBaton2NoRecords, rowBaton2MTLS, rowBaton2MCP,
	rowBaton2RedisNoDedupe, rowBaton2Redis, rowBaton2RedisNoRecords,
	rowBaton2RedisBoth, rowBaton2RedisBothNoRecords, rowBaton2RedisMesh,
	rowNginx, rowHAProxy,
}

const (
	rowDirect                   = "direct"
	rowFloor                    = "go-floor"
	rowBaton1                   = "baton-1hop"
	rowBaton1Core               = "baton-1hop-core"
	rowBaton2                   = "baton-2hop"
	rowBaton2NoDedupe           = "baton-2hop-nodedupe"
	rowBaton2NoRecords          = "baton-2hop-norecords"
	rowBaton2MCP                = "baton-2hop-mcp"
	rowBaton2MTLS               = "baton-2hop-mtls"
	rowBaton2Redis              = "baton-2hop-redis"
	rowBaton2RedisNoDedupe      = "baton-2hop-redis-nodedupe"
	rowBaton2RedisNoRecords     = "baton-2hop-redis-norecords"
	rowBaton2RedisBoth          = "baton-2hop-redis-both"
	rowBaton2RedisBothNoRecords = "baton-2hop-redis-both-norecords"
	rowBaton2RedisMesh          = "baton-2hop-redis-mesh"
	rowNginx                    = "nginx"
	rowHAProxy                  = "haproxy"
)

// options are the command-line settings of one run.
type options struct {
	conns     int
	dur       time.Duration
	threads   int
	warmup    time.Duration
	warmupMax time.Duration
	bodyBytes int
	quick     bool
	markdown  bool
	jsonPath  string
	batonBin  string
	batonLog  string
	waitQuiet time.Duration
	rows      map[string]bool
	repeat    int
	keep      bool
	// profileDir, when set, is where each measured run's CPU profiles of
	// the proxies go (profile.go).
	profileDir string
	sse        sseOptions // the -sse mode, when sse.streams > 0
	startup    int        // the -startup mode: starts per store, when > 0
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var rows string
	fs.IntVar(&o.conns, "c", 64, "wrk connections")
	fs.DurationVar(&o.dur, "d", 10*time.Second, "measured wrk duration per row (whole seconds)")
	fs.IntVar(&o.threads, "t", 2, "wrk threads")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured wrk run before each row (0 disables; whole seconds)")
	fs.DurationVar(&o.warmupMax, "warmup-max", 30*time.Second, "after -warmup, wrk runs on in 2s rounds while a proxy's RSS grows by more than 5% a round, for at most this long in all (at or under -warmup: no rounds)")
	fs.IntVar(&o.bodyBytes, "body-bytes", 512, "size of the JSON request body")
	fs.BoolVar(&o.quick, "quick", false, "short run: -d 3s, -warmup 1s, -warmup-max 1s")
	fs.BoolVar(&o.markdown, "markdown", false, "also print the results as a markdown table")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&o.batonBin, "baton", "", "use this baton binary instead of building ./cmd/baton")
	fs.StringVar(&o.batonLog, "baton-log-level", "", "set log_level in the generated Baton configs (default: Baton's own, which logs every handoff at info)")
	fs.DurationVar(&o.waitQuiet, "wait-quiet", 0, "before each row, wait up to this long for other processes to leave the machine under 10% busy (for shared machines)")
	fs.StringVar(&rows, "rows", strings.Join(rowNames, ","), "comma-separated rows to run")
	fs.IntVar(&o.repeat, "repeat", 1, "measure every row this many times, in rounds of all the rows, and report the median ratios")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configs, logs) and print its path")
	fs.StringVar(&o.profileDir, "profile", "", "write a CPU profile of each Baton and of the Go floor, taken during each measured run, and a one-second execution trace from its middle, to this directory (made if missing) as <row>[-r<round>]-<process>.pprof and .trace")
	fs.IntVar(&o.startup, "startup", 0, "instead of the rows: start Baton this many times per store and report exec to /readyz 200, and its idle RSS")
	fs.IntVar(&o.sse.streams, "sse", 0, "instead of the rows: this many concurrent SSE streams through Baton, every event checked (see -sse-*)")
	fs.IntVar(&o.sse.events, "sse-events", 20, "with -sse: events per stream")
	fs.DurationVar(&o.sse.over, "sse-over", 10*time.Second, "with -sse: time from a stream's first event to its last")
	fs.DurationVar(&o.sse.ramp, "sse-ramp", 2*time.Second, "with -sse: the streams start evenly over this time")
	fs.IntVar(&o.sse.hops, "sse-hops", 2, "with -sse: 2 (Baton A egress → Baton B ingress → agent), 1 (Baton egress → agent) or 0 (direct)")
	fs.BoolVar(&o.sse.h2c, "sse-h2c", false, "with -sse: the clients speak HTTP/2 without TLS to the first hop (listen.h2c), so that its streams share a few connections")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./bench [flags]\n       go run ./bench -sse N [-sse-events 20] [-sse-over 10s] [-sse-ramp 2s] [-sse-hops 2] [-sse-h2c]\n\n"+
			"Measures the rows "+strings.Join(rowNames, ", ")+" with wrk on loopback;\n"+
			"with -sse, N concurrent SSE handoffs through two Batons instead, every event checked.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	if o.quick {
		o.dur, o.warmup, o.warmupMax = 3*time.Second, time.Second, time.Second
	}
	var errs []error
	if o.conns < 1 {
		errs = append(errs, fmt.Errorf("-c: must be >= 1, got %d", o.conns))
	}
	if o.threads < 1 || o.threads > o.conns {
		errs = append(errs, fmt.Errorf("-t: must be between 1 and -c (%d), got %d", o.conns, o.threads))
	}
	if o.dur < time.Second || o.dur%time.Second != 0 {
		errs = append(errs, fmt.Errorf("-d: must be whole seconds >= 1s, got %s", o.dur))
	}
	if o.warmup < 0 || o.warmup%time.Second != 0 {
		errs = append(errs, fmt.Errorf("-warmup: must be whole seconds >= 0, got %s", o.warmup))
	}
	if o.sse.streams < 0 {
		errs = append(errs, fmt.Errorf("-sse: must be >= 0, got %d", o.sse.streams))
	}
	if o.sse.streams > 0 {
		if o.sse.events < 1 {
			errs = append(errs, fmt.Errorf("-sse-events: must be >= 1, got %d", o.sse.events))
		}
		if o.sse.over < 0 || o.sse.ramp < 0 {
			errs = append(errs, fmt.Errorf("-sse-over and -sse-ramp: must be >= 0, got %s and %s", o.sse.over, o.sse.ramp))
		}
		if o.sse.hops < 0 || o.sse.hops > 2 {
			errs = append(errs, fmt.Errorf("-sse-hops: must be 0, 1 or 2, got %d", o.sse.hops))
		}
	}
	if o.startup < 0 {
		errs = append(errs, fmt.Errorf("-startup: must be >= 0, got %d", o.startup))
	}
	if o.repeat < 1 {
		errs = append(errs, fmt.Errorf("-repeat: must be >= 1, got %d", o.repeat))
	}
	if o.waitQuiet < 0 {
		errs = append(errs, fmt.Errorf("-wait-quiet: must be >= 0, got %s", o.waitQuiet))
	}
	if o.bodyBytes < 0 || o.bodyBytes > 8<<20 {
		errs = append(errs, fmt.Errorf("-body-bytes: must be between 0 and 8388608, got %d", o.bodyBytes))
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			errs = append(errs, fmt.Errorf("-profile: %w", err))
		}
	}
	switch o.batonLog {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("-baton-log-level: must be one of debug, info, warn, error, got %q", o.batonLog))
	}
	o.rows = map[string]bool{}
	for _, r := range strings.Split(rows, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		known := false
		for _, n := range rowNames {
			known = known || n == r
		}
		if !known {
			errs = append(errs, fmt.Errorf("-rows: unknown row %q, want some of %s", r, strings.Join(rowNames, ",")))
		}
		o.rows[r] = true
	}
	return o, errors.Join(errs...)
}

// run does one benchmark run and prints the report to stdout; progress and
// process logs go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if o.startup > 0 {
		return runStartup(ctx, o, stdout, stderr)
	}
	if o.sse.streams > 0 {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding own executable: %w", err)
		}
		return runSSE(ctx, o, self, stdout, stderr)
	}
	wrkPath, err := exec.LookPath("wrk")
	if err != nil {
		return errors.New("wrk not found on PATH: install it first (Debian/Ubuntu: `apt-get install wrk`; macOS: `brew install wrk`)")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own executable: %w", err)
	}

	dir, done, err := workDir(ctx, o, "baton-bench-", stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	// nginx workers drop to an unprivileged user when run as root; let them
	// reach the prefix directory.
	_ = os.Chmod(dir, 0o755)

	sup := newSupervisor(dir, stderr)
	defer sup.stopAll()

	h := &harness{
		o:      o,
		sup:    sup,
		dir:    dir,
		self:   self,
		wrk:    wrkPath,
		stderr: stderr,
	}
	res, err := h.runAll(ctx)
	if err != nil {
		return err
	}
	printTable(stdout, res)
	if o.markdown {
		fmt.Fprintln(stdout)
		printMarkdown(stdout, res)
	}
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, res); err != nil {
			return err
		}
		abs, _ := filepath.Abs(o.jsonPath)
		fmt.Fprintf(stderr, "bench: wrote %s\n", abs)
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	var failed []string
	for _, r := range res.Rows {
		if r.Status == statusFailed {
			failed = append(failed, r.label())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("rows failed: %s (see notes above)", strings.Join(failed, ", "))
	}
	return nil
}

// workDir makes a run's temporary directory (configs, process logs). The
// function it returns, given the run's error, removes the directory, or
// keeps it and prints its path with -keep or when the run failed (not
// interrupted).
func workDir(ctx context.Context, o *options, prefix string, stderr io.Writer) (string, func(error), error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("creating temp dir: %w", err)
	}
	return dir, func(err error) {
		if o.keep || (err != nil && ctx.Err() == nil) {
			fmt.Fprintf(stderr, "bench: kept %s (configs and process logs)\n", dir)
			return
		}
		os.RemoveAll(dir)
	}, nil
}

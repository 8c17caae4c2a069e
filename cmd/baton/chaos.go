//go:build !sidecar

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/batonproxy/baton/bench/chaos"
)

const chaosUsage = `  baton chaos [--short] [--cluster] [--faults LIST] [--clients N] [--fault-for D] [--recover D]
              [--persist=false] [--redis-server PATH] [--json FILE] [--dir DIR]
                                 run a chain of three Batons (this binary) on a throwaway
                                 redis-server under load while faults are injected in
                                 turn; print per fault the requests, errors and latency,
                                 and from its end the time to the first completed order,
                                 to full recovery and the longest wait of an order; then
                                 resume what did not complete and check that no order's
                                 side effect ran twice and none was lost: exit 1 if one
                                 was (docs/chaos.md)
`

// chaosCmd runs the chaos harness with this binary as the Batons.
func chaosCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	short := fs.Bool("short", false, "a run of about a minute (as make test runs it)")
	faults := fs.String("faults", "", "faults to inject, in order (default: every one)")
	cluster := fs.Bool("cluster", false, "a Redis Cluster of three masters and three replicas (needs redis-cli); redis-failover replaces redis-kill")
	clients := fs.Int("clients", 16, "concurrent clients")
	faultFor := fs.Duration("fault-for", 10*time.Second, "how long each fault lasts")
	recoverFor := fs.Duration("recover", 10*time.Second, "load after each fault")
	persist := fs.Bool("persist", true, "redis-server appends every write to disk (appendfsync always)")
	redisBin := fs.String("redis-server", "redis-server", "the redis-server binary")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	dir := fs.String("dir", "", "keep the Batons' and redis-server's logs and data here (default: a temporary directory, removed)")
	if _, done, err := parseCommand(fs, args, "chaos", chaosUsage+chaosHelp(fs), stdout, stderr); done || err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	redis, err := exec.LookPath(*redisBin)
	if err != nil {
		return fmt.Errorf("chaos: %s not found: install Redis (Debian: apt-get install redis-server)", *redisBin)
	}
	list := chaos.FaultNames
	if *cluster {
		list = chaos.ClusterFaultNames
	}
	if *faults != "" {
		list = strings.Split(*faults, ",")
	}
	o := chaos.Options{Baton: bin, Redis: redis, Persist: *persist, Cluster: *cluster, Clients: *clients, Interval: 10 * time.Millisecond,
		Warmup: 3 * time.Second, FaultFor: *faultFor, Recover: *recoverFor, Faults: list,
		GiveUp: 20 * time.Second, Resume: 2 * time.Minute, Out: stdout, Dir: *dir}
	if *short {
		o.Clients, o.Interval, o.Warmup, o.FaultFor, o.Recover, o.GiveUp = 8, 25*time.Millisecond, 2*time.Second, 2500*time.Millisecond, 2500*time.Millisecond, 10*time.Second
	}
	r, runErr := chaos.Run(ctx, o)
	if r != nil && *jsonOut != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return runErr
}

// chaosHelp lists the flags and the faults, each with what it does.
func chaosHelp(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("\nFlags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	b.WriteString("\nFaults, in this order unless --faults names others:\n")
	names := slices.Clone(chaos.FaultNames)
	for _, n := range chaos.ClusterFaultNames {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		where := ""
		switch {
		case !slices.Contains(chaos.FaultNames, n):
			where = " (with --cluster)"
		case !slices.Contains(chaos.ClusterFaultNames, n):
			where = " (without --cluster)"
		}
		b.WriteString(wrap(fmt.Sprintf("  %-14s ", n), chaos.FaultDoc(n)+where, 80, strings.Repeat(" ", 17)))
	}
	return b.String()
}

// wrap writes text after prefix in lines of at most width, each line after
// the first indented by indent; the first word always follows prefix, and
// a word longer than a line keeps a line of its own.
func wrap(prefix, text string, width int, indent string) string {
	var b strings.Builder
	line, empty := prefix, true
	for _, w := range strings.Fields(text) {
		if !empty && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line, empty = line+w, false
	}
	return b.String() + line + "\n"
}

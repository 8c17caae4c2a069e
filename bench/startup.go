package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"text/tabwriter"
	"time"
)

// settleWait is how long after it reports ready a Baton is left idle before
// its resident set is read in the -startup mode: past serve's settle trim
// (3s after start), with a margin.
const settleWait = 4 * time.Second

// startupRow is one store's startup measurement in the -startup mode.
type startupRow struct {
	store   string
	ready   []time.Duration // exec to the first 200 from /readyz, one per start
	readyKB int64           // VmRSS right after the last timed start was ready
	idleKB  int64           // VmRSS settleWait after a start was ready
	err     error
	skipped string
}

// runStartup is `bench -startup N`: it starts the sidecar build N times per
// store (the memory store, the default; then Redis, when it answers PING at
// benchRedisURL), times each start from just before the fork to the first
// 200 from the admin /readyz, polled every readyPoll on a fresh connection,
// and stops it. One more start per store is left idle past serve's settle
// trim, and its VmRSS read: what an idle Baton holds.
func runStartup(ctx context.Context, o *options, stdout, stderr io.Writer) (err error) {
	dir, done, err := workDir(ctx, o, "baton-startup-", stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	sup := newSupervisor(dir, stderr)
	defer sup.stopAll()
	h := &harness{o: o, sup: sup, dir: dir, stderr: stderr}
	bin, err := h.baton(ctx)
	if err != nil {
		return err
	}
	floor := h.startupFloor(ctx, o.startup)
	rows := []*startupRow{{store: "memory"}, {store: "redis"}}
	var rdb *benchRedis
	if r, err := openRedis(ctx, benchRedisURL); err != nil {
		rows[1].skipped = err.Error()
	} else {
		rdb = r
		defer rdb.close(h.logf)
	}
	for _, row := range rows {
		if row.skipped != "" {
			continue
		}
		spec := func(i int) (batonSpec, error) {
			addrs, err := freeAddrs(3)
			if err != nil {
				return batonSpec{}, err
			}
			s := batonSpec{name: fmt.Sprintf("baton-%s-%d", row.store, i), agent: "bench-a",
				upstream: "http://127.0.0.1:9", logLevel: o.batonLog,
				egress: addrs[0], ingress: addrs[1], admin: addrs[2],
				peers: map[string]string{"bench-b": "http://127.0.0.1:9"}, edgesTo: []string{"bench-b"}}
			if row.store == "redis" {
				s.redisURL, s.redisPrefix = benchRedisURL, rdb.newPrefix()
			}
			return s, nil
		}
		h.logf("startup: %d starts with the %s store", o.startup, row.store)
		for i := 0; i <= o.startup && ctx.Err() == nil; i++ {
			s, err := spec(i)
			if err != nil {
				row.err = err
				break
			}
			c, took, err := h.startBaton(ctx, bin, s)
			if err != nil {
				row.err = err
				if c != nil {
					c.stop()
				}
				break
			}
			if i < o.startup {
				row.ready = append(row.ready, took)
				if i == o.startup-1 {
					row.readyKB, _ = rssKiB(c.pid())
				}
				c.stop()
				continue
			}
			// The last start: left idle past the settle trim.
			select {
			case <-ctx.Done():
			case <-time.After(settleWait):
			}
			row.idleKB, _ = rssKiB(c.pid())
			c.stop()
		}
	}
	printStartup(stdout, o.startup, append([]*startupRow{floor}, rows...))
	for _, r := range rows {
		if r.err != nil {
			return fmt.Errorf("startup (%s store): %w", r.store, r.err)
		}
	}
	return ctx.Err()
}

// startupFloor times n starts of bench/readyfloor, a Go net/http server
// that answers /readyz and does nothing else, as Baton's are timed: what
// starting any Go server costs on this machine.
func (h *harness) startupFloor(ctx context.Context, n int) *startupRow {
	row := &startupRow{store: "go-floor"}
	root, err := moduleRoot(ctx)
	var bin string
	if err == nil {
		bin, err = buildLikeBaton(ctx, root, h.dir, "./bench/readyfloor", "readyfloor")
	}
	if err != nil {
		row.skipped = err.Error()
		return row
	}
	h.logf("startup: %d starts of the Go floor", n)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		addrs, err := freeAddrs(1)
		if err != nil {
			row.err = err
			return row
		}
		c, err := h.sup.start(fmt.Sprintf("readyfloor-%d", i), bin, "--listen", addrs[0])
		if err != nil {
			row.err = err
			return row
		}
		readyz := "http://" + addrs[0] + "/readyz"
		at, err := poll(ctx, c, readyPoll, readyTimeout, "readyfloor "+readyz, func() error {
			if st, err := getStatus(readyz); err != nil || st != http.StatusOK {
				return fmt.Errorf("%w: %d %v", errNotYet, st, err)
			}
			return nil
		})
		if err == nil {
			row.ready = append(row.ready, at.Sub(c.started))
			if i == n-1 {
				row.readyKB, _ = rssKiB(c.pid())
			}
		}
		c.stop()
		if err != nil {
			row.err = err
			return row
		}
	}
	return row
}

func printStartup(w io.Writer, n int, rows []*startupRow) {
	fmt.Fprintf(w, "baton serve, exec to /readyz 200 (polled every %s), %d starts per store; go-floor is bench/readyfloor, a Go server that does nothing else, started the same way\n\n", readyPoll, n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tstarts\tmin ms\tp50 ms\tp90 ms\tmax ms\tRSS ready MiB\tRSS idle MiB\t")
	for _, r := range rows {
		if r.skipped != "" || len(r.ready) == 0 {
			continue
		}
		s := slices.Sorted(slices.Values(r.ready))
		idle := "-"
		if r.idleKB > 0 {
			idle = mib(r.idleKB)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t\n", r.store, len(s),
			ms(s[0]), ms(quantile(s, 0.5)), ms(quantile(s, 0.9)), ms(s[len(s)-1]),
			mib(r.readyKB), idle)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRSS idle is VmRSS %s after a start was ready (serve trims again 3s after it starts).\n", settleWait)
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(w, "%s store skipped: %s\n", r.store, r.skipped)
		}
		if r.err != nil {
			fmt.Fprintf(w, "%s store FAILED: %v\n", r.store, r.err)
		}
	}
}

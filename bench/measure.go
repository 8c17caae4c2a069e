package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/batonproxy/baton/config"
)

// measure runs wrk against ep and fills row: idle RSS, an unmeasured
// warmup, then CPU before and after the measured run, with RSS sampled
// during it.
func (h *harness) measure(ctx context.Context, ep *endpoint, row *Row) error {
	// A Baton trims its start-up pages and garbage 3s after it starts
	// (cmd/baton/serve.go): what it holds idle is read after that.
	for _, in := range ep.instances {
		if wait := time.Until(in.started.Add(settleWait)); !in.started.IsZero() && wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	groups := make([][]int, len(ep.instances))
	for i, in := range ep.instances {
		groups[i] = in.pids
		st := InstanceStat{Name: in.name, PIDs: in.pids}
		if in.ready > 0 {
			ms := float64(in.ready) / float64(time.Millisecond)
			st.ReadyMs = &ms
		}
		v, err := sumRSS(in.pids)
		if err != nil {
			return fmt.Errorf("%s: reading VmRSS of pids %s: %w", in.name, pidString(in.pids), err)
		}
		st.RSSIdleKiB = v
		row.Instances = append(row.Instances, st)
	}
	w := wrkRun{bin: h.wrk, threads: h.o.threads, conns: h.o.conns, script: h.script, url: ep.url, host: ep.host}
	if ep.script != "" {
		w.script = ep.script
	}
	if h.o.warmup > 0 {
		w.dur = h.o.warmup
		if _, err := w.run(ctx); err != nil {
			return fmt.Errorf("warmup: %w", err)
		}
		if err := h.warmUntilSettled(ctx, w, groups, row); err != nil {
			return err
		}
		if err := h.afterWarmup(ctx, ep, row); err != nil {
			return err
		}
	}
	w.dur = h.o.dur
	row.Command = w.String()

	agentPID := []int{h.agent.pid()}
	before := make([]time.Duration, len(groups))
	for i, g := range groups {
		d, err := sumCPU(g)
		if err != nil {
			return fmt.Errorf("%s: reading CPU: %w", ep.instances[i].name, err)
		}
		before[i] = d
	}
	agentBefore, err := sumCPU(agentPID)
	if err != nil {
		return fmt.Errorf("agent: reading CPU: %w", err)
	}
	// A service's CPU is best effort: it is not ours, and may be gone.
	svcBefore := make([]time.Duration, len(ep.services))
	svcErr := make([]error, len(ep.services))
	for i, s := range ep.services {
		svcBefore[i], svcErr[i] = sumCPU(s.pids)
	}
	busyBefore, err := machineBusy()
	if err != nil {
		return err
	}
	sampler := startRSSSampler(groups)
	profiles := h.startProfiles(ctx, ep, h.profileLabel(row.Name), int(h.o.dur/time.Second))
	start := time.Now()
	r, err := w.run(ctx)
	wall := time.Since(start)
	peaks := sampler.stop()
	if err != nil {
		return err
	}
	row.Profiles = awaitProfiles(profiles, row)
	busyAfter, err := machineBusy()
	if err != nil {
		return err
	}
	agentAfter, err := sumCPU(agentPID)
	if err != nil {
		return fmt.Errorf("agent: reading CPU: %w", err)
	}
	for i, g := range groups {
		after, err := sumCPU(g)
		if err != nil {
			return fmt.Errorf("%s: reading CPU (did it exit under load?): %w", ep.instances[i].name, err)
		}
		row.Instances[i].CPUSec = (after - before[i]).Seconds()
		row.Instances[i].RSSPeakKiB = peaks[i]
	}
	for i, s := range ep.services {
		if after, err := sumCPU(s.pids); err == nil && svcErr[i] == nil {
			row.Services = append(row.Services, InstanceStat{Name: s.name, Role: s.role, PIDs: s.pids, CPUSec: (after - svcBefore[i]).Seconds()})
		}
	}
	row.fill(r, agentAfter-agentBefore)
	row.noise(busyAfter-busyBefore, agentAfter-agentBefore+r.CPU, wall)
	if r.Requests == 0 {
		return fmt.Errorf("wrk completed no requests")
	}
	return nil
}

// quietPct is how busy the machine may be, without the harness's load,
// for -wait-quiet to start a row.
const quietPct = 10

// waitQuiet waits, at most -wait-quiet, until the machine has been under
// quietPct busy for one second. The agent is idle then, so whatever is busy
// is someone else.
func (h *harness) waitQuiet(ctx context.Context) {
	deadline := time.Now().Add(h.o.waitQuiet)
	for i := 0; ; i++ {
		b0, err := machineBusy()
		if err != nil {
			return
		}
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		b1, err := machineBusy()
		if err != nil {
			return
		}
		pct := 100 * (b1 - b0).Seconds() / (time.Since(t0).Seconds() * float64(runtime.NumCPU()))
		if pct < quietPct {
			return
		}
		if time.Now().After(deadline) {
			h.logf("machine still %.0f%% busy after waiting %s; going on", pct, h.o.waitQuiet)
			return
		}
		if i%15 == 0 {
			h.logf("machine %.0f%% busy with other work; waiting for it to quiet down", pct)
		}
	}
}

// recoverWithin bounds how long a path that broke at the end of the warmup
// may take to answer again: the longest a Baton circuit breaker stays open by
// default (max_open_for, reached only after several failed probes), plus
// slack for the half-open probe.
const recoverWithin = config.DefaultBreakerMaxOpenFor + 15*time.Second

// settleAfterWarmup is how long the path is probed after the warmup, every
// 100ms, before the measured run.
const settleAfterWarmup = time.Second

// afterWarmup probes the path again once the warmup is over. wrk ends a run
// by closing its connections with requests in flight, as any client that
// gives up does; a proxy should take that in its stride. If the path does
// not answer as the agent, the measured run would only count errors: wait
// (at most recoverWithin) until it does, and say on the row that it broke
// and for how long. A path that does not recover fails the row.
func (h *harness) afterWarmup(ctx context.Context, ep *endpoint, row *Row) error {
	// The cancellations reach the proxies a moment after wrk exits, and a
	// breaker opens only once it has counted them: probe for a while.
	var first error
	for end := time.Now().Add(settleAfterWarmup); first == nil && time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		first = probe(ep.url, ep.host, ep.bodyOr(h.body))
	}
	if first == nil {
		return nil
	}
	start := time.Now()
	_, err := poll(ctx, nil, 250*time.Millisecond, recoverWithin, "the path after the warmup", func() error {
		if err := probe(ep.url, ep.host, ep.bodyOr(h.body)); err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		return nil
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("the path stopped answering as the agent when wrk's warmup ended "+
			"(and closed its connections with requests in flight), and did not recover: %w; first failed probe: %v", err, first)
	}
	row.Warnings = append(row.Warnings, fmt.Sprintf(
		"the path stopped answering as the agent when wrk's warmup ended (and closed its connections with requests in flight); "+
			"it answered again %.1fs later, and the measured run started then. First failed probe: %v",
		time.Since(start).Seconds(), first))
	return nil
}

// Settling: a proxy with state of its own (a Baton's in-memory store,
// filling to its bound; the heap growing to what its GC target allows
// over that) is still growing after a short warmup, and the page faults
// and the collections of that growth, paid once in a process's life, would
// be counted per request. So after -warmup, wrk runs on in rounds of
// settleRound while any instance's RSS grew by more than settleGrowth
// in the last, for at most -warmup-max in all; the row records how long
// (warmup_s) and the report names a row that needed more than -warmup.
const (
	settleRound  = 2 * time.Second
	settleGrowth = 0.05
)

func (h *harness) warmUntilSettled(ctx context.Context, w wrkRun, groups [][]int, row *Row) error {
	row.WarmupS = h.o.warmup.Seconds()
	if len(groups) == 0 {
		return nil // no proxy (the direct row)
	}
	last := rssOf(groups)
	w.dur = settleRound
	for time.Duration(row.WarmupS*float64(time.Second))+settleRound <= h.o.warmupMax {
		if _, err := w.run(ctx); err != nil {
			return fmt.Errorf("warmup: %w", err)
		}
		row.WarmupS += settleRound.Seconds()
		now := rssOf(groups)
		grew := false
		for i := range now {
			if last[i] > 0 && float64(now[i]-last[i]) > settleGrowth*float64(last[i]) {
				grew = true
			}
		}
		if !grew {
			return nil
		}
		last = now
	}
	row.Warnings = append(row.Warnings, fmt.Sprintf("its RSS was still growing after %.0fs of warmup (-warmup-max)", row.WarmupS))
	return nil
}

// rssOf is each group's VmRSS in KiB, 0 where it cannot be read.
func rssOf(groups [][]int) []int64 {
	out := make([]int64, len(groups))
	for i, g := range groups {
		out[i], _ = sumRSS(g)
	}
	return out
}

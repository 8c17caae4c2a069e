package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// sseOptions are the settings of the -sse mode: concurrent SSE handoffs
// through Baton, every event checked.
type sseOptions struct {
	streams int
	events  int
	over    time.Duration // a stream's first event to its last
	ramp    time.Duration // stream i starts at ramp*i/streams
	hops    int           // 2: egress → ingress → agent; 1: egress → agent; 0: direct
	h2c     bool          // the clients speak HTTP/2 without TLS to the first hop
}

// fdReserve is what a process needs beyond its sockets for streams: its
// listeners, log, epoll, the runtime's and the store's descriptors.
const fdReserve = 64

// sseProc is one process measured over an -sse run.
type sseProc struct {
	Name       string  `json:"name"`
	PID        int     `json:"pid"`
	Role       string  `json:"role"`
	CPUSeconds float64 `json:"cpu_s"` // utime+stime over the run
	CPUPerUs   float64 `json:"cpu_us_per_stream"`
	RSSIdleKiB int64   `json:"rss_idle_kib"`       // VmRSS before the streams
	HWMKiB     int64   `json:"rss_peak_kib"`       // VmHWM after them: the peak resident set
	PerKiB     float64 `json:"rss_kib_per_stream"` // (peak - idle) / streams
	PeakFDs    int     `json:"peak_fds"`           // sampled every fdInterval
	FDLimit    uint64  `json:"fd_limit"`           // soft RLIMIT_NOFILE
	FDNeed     int     `json:"fd_need"`            // sockets the streams need at once, plus fdReserve

	cpu0 time.Duration
}

// sseReport is everything an -sse run measured.
type sseReport struct {
	Machine struct {
		CPUs      int    `json:"cpus"`
		CPUModel  string `json:"cpu_model,omitempty"`
		Kernel    string `json:"kernel,omitempty"`
		GoVersion string `json:"go"`
		Commit    string `json:"commit,omitempty"`
	} `json:"machine"`
	Path    string     `json:"path"`
	H2C     bool       `json:"h2c"`
	Streams int        `json:"streams"`
	Events  int        `json:"events_per_stream"`
	OverS   float64    `json:"events_over_s"`
	RampS   float64    `json:"ramp_s"`
	Summary sseSummary `json:"summary"`
	Procs   []*sseProc `json:"processes"`
	Notes   []string   `json:"notes,omitempty"`
}

// fdInterval is how often the processes' open descriptors are counted.
const fdInterval = 250 * time.Millisecond

// runSSE is `bench -sse N`: it starts an SSE agent, the Batons of the path,
// and N client streams, checks every event of every stream, and reports
// what the streams saw and what the processes used. Any lost, duplicated or
// reordered event, or a stream that failed, is an error.
func runSSE(ctx context.Context, o *options, self string, stdout, stderr io.Writer) (err error) {
	so := o.sse
	// The harness holds one socket per stream, the agent one, and each
	// Baton two; ask for the most any process needs.
	lim, limErr := raiseNoFile(uint64(2*so.streams + fdReserve))
	dir, done, err := workDir(ctx, o, "baton-bench-sse-", stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	sup := newSupervisor(dir, stderr)
	defer sup.stopAll()
	h := &harness{o: o, sup: sup, dir: dir, self: self, stderr: stderr}

	rep := &sseReport{H2C: so.h2c, Streams: so.streams, Events: so.events, OverS: so.over.Seconds(), RampS: so.ramp.Seconds()}
	m := h.meta(ctx)
	rep.Machine.CPUs, rep.Machine.CPUModel, rep.Machine.Kernel = m.CPUs, m.CPUModel, m.Kernel
	rep.Machine.GoVersion, rep.Machine.Commit = m.GoVersion, m.Commit
	if limErr != nil {
		rep.Notes = append(rep.Notes, limErr.Error())
	}
	h.logf("RLIMIT_NOFILE now %d (hard %d)", lim.Cur, lim.Max)

	var bin string
	if so.hops > 0 {
		if bin, err = h.baton(ctx); err != nil {
			return err
		}
	}
	agentAddr, err := freeAddr()
	if err != nil {
		return err
	}
	agent, err := sup.start("sse-agent", self, "sse-agent", "--listen", agentAddr,
		"--events", fmt.Sprint(so.events), "--over", so.over.String())
	if err != nil {
		return err
	}
	agentURL := "http://" + agentAddr
	if _, err := poll(ctx, agent, 5*time.Millisecond, 10*time.Second, "sse-agent", func() error {
		if _, err := getStatus(agentURL + "/"); err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		return nil
	}); err != nil {
		return err
	}
	// Over h2c the first hop's streams share a few connections; over
	// HTTP/1.1 each holds one.
	inbound := so.streams
	if so.h2c {
		inbound = 0
	}
	agentIn := so.streams
	if so.hops == 0 {
		agentIn = inbound
	}
	rep.Procs = append(rep.Procs, &sseProc{Name: "sse-agent", PID: agent.pid(), Role: "the upstream agent", FDNeed: agentIn + fdReserve})

	url, host := agentURL+"/sse", ""
	switch so.hops {
	case 0:
		rep.Path = "client → sse-agent"
	case 1:
		a, err := freeAddrs(3)
		if err != nil {
			return err
		}
		c, _, err := h.startBaton(ctx, bin, batonSpec{
			name: "baton-a", agent: "bench-a", upstream: agentURL, logLevel: o.batonLog,
			egress: a[0], ingress: a[1], admin: a[2], h2c: so.h2c,
			peers: map[string]string{"bench-b": agentURL}, edgesTo: []string{"bench-b"},
		})
		if err != nil {
			return err
		}
		url, host = "http://"+a[0]+"/sse", "bench-b"
		rep.Path = "client → baton-a egress → sse-agent"
		rep.Procs = append(rep.Procs, &sseProc{Name: "baton-a", PID: c.pid(), Role: "Baton, egress", FDNeed: inbound + so.streams + fdReserve})
	default:
		specA, specB := twoHop{row: "baton"}.specs(agentURL, o.batonLog, nil)
		specA.h2c = so.h2c
		ep, _, err := h.startBaton2(ctx, bin, specA, specB, nil)
		if ep == nil {
			return err
		}
		url, host = strings.TrimSuffix(ep.url, "/bench")+"/sse", ep.host
		rep.Path = "client → baton-a egress → baton-b ingress → sse-agent"
		for _, in := range ep.instances {
			role, need := "Baton A, egress (sender)", inbound+so.streams
			if in.name == "baton-b" {
				role, need = "Baton B, ingress (receiver)", 2*so.streams
			}
			rep.Procs = append(rep.Procs, &sseProc{Name: in.name, PID: in.pids[0], Role: role, FDNeed: need + fdReserve})
		}
	}
	if err := probeSSE(ctx, url, host, so.h2c); err != nil {
		return fmt.Errorf("probe of %s: %w", rep.Path, err)
	}
	rep.Procs = append(rep.Procs, &sseProc{Name: "harness", PID: os.Getpid(), Role: "the clients", FDNeed: inbound + fdReserve})

	for _, p := range rep.Procs {
		p.FDLimit, _ = procNoFile(p.PID)
		p.RSSIdleKiB, _ = rssKiB(p.PID)
		if p.FDLimit < uint64(p.FDNeed) {
			rep.Notes = append(rep.Notes, fmt.Sprintf(
				"%s may open %d descriptors (RLIMIT_NOFILE) and the streams need about %d: %d streams do not fit this machine's limit (hard %d; raising it needs CAP_SYS_RESOURCE)",
				p.Name, p.FDLimit, p.FDNeed, so.streams, lim.Max))
		}
	}
	for _, n := range rep.Notes {
		h.logf("WARNING: %s", n)
	}
	for _, p := range rep.Procs {
		if p.cpu0, err = cpuTime(p.PID); err != nil {
			return err
		}
	}
	fds := startFDSampler(rep.Procs)
	h.logf("%d streams × %d events over %s, ramp %s: %s", so.streams, so.events, so.over, so.ramp, rep.Path)
	load := &sseLoad{
		url: url, host: host, streams: so.streams, events: so.events, ramp: so.ramp,
		timeout: so.ramp + so.over + 2*time.Minute, client: newSSEClient(so.streams, so.h2c),
	}
	res := load.run(ctx)
	fds.stop()
	rep.Summary = summarize(res, so.events, load.peakOpen.Load())
	for _, p := range rep.Procs {
		cpu, err := cpuTime(p.PID)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		p.CPUSeconds = (cpu - p.cpu0).Seconds()
		p.CPUPerUs = p.CPUSeconds * 1e6 / float64(so.streams)
		p.HWMKiB, _ = statusKiB(p.PID, "VmHWM")
		p.PerKiB = float64(p.HWMKiB-p.RSSIdleKiB) / float64(so.streams)
	}
	printSSE(stdout, rep)
	if o.jsonPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
		abs, _ := filepath.Abs(o.jsonPath)
		fmt.Fprintf(stderr, "bench: wrote %s\n", abs)
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	if !rep.Summary.lossless() {
		return fmt.Errorf("%d of %d streams did not get every event once and in order (%d events lost)",
			rep.Summary.Streams-rep.Summary.Completed, rep.Summary.Streams, rep.Summary.Lost)
	}
	return nil
}

// probeSSE opens one stream (id -1) through the path and reads its first
// event, so that a path that answers wrongly fails before the load starts.
// The probe's stream is cut after that event.
func probeSSE(ctx context.Context, url, host string, h2c bool) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c := newSSEClient(1, h2c)
	defer c.CloseIdleConnections()
	resp, err := openStream(ctx, c, url, host, -1)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var first []byte
	err = readSSE(resp.Body, func(data []byte) bool {
		first = append([]byte{}, data...)
		return false
	})
	var ev sseEvent
	switch {
	case first == nil:
		return fmt.Errorf("the stream ended without an event (%v)", err)
	case json.Unmarshal(first, &ev) != nil || ev.Stream != -1 || ev.Seq != 1:
		return fmt.Errorf("want the first event of stream -1, got data %s", snippet(first))
	}
	return nil
}

// fdSampler records each process's peak count of open descriptors.
type fdSampler struct {
	procs []*sseProc
	stopc chan struct{}
	wg    sync.WaitGroup
}

func startFDSampler(procs []*sseProc) *fdSampler {
	s := &fdSampler{procs: procs, stopc: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(fdInterval)
		defer t.Stop()
		for {
			for _, p := range s.procs {
				if n, err := openFDs(p.PID); err == nil && n > p.PeakFDs {
					p.PeakFDs = n
				}
			}
			select {
			case <-s.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *fdSampler) stop() { close(s.stopc); s.wg.Wait() }

// printSSE prints an -sse run's report.
func printSSE(w io.Writer, r *sseReport) {
	s := &r.Summary
	fmt.Fprintf(w, "sse: %d streams × %d events (over %s, started over %s): %s\n", r.Streams, r.Events,
		time.Duration(r.OverS*float64(time.Second)), time.Duration(r.RampS*float64(time.Second)), r.Path)
	model := ""
	if r.Machine.CPUModel != "" {
		model = " (" + r.Machine.CPUModel + ")"
	}
	fmt.Fprintf(w, "machine: %d CPUs%s, Linux %s, %s, commit %s\n\n", r.Machine.CPUs, model, r.Machine.Kernel, r.Machine.GoVersion, r.Machine.Commit)
	fmt.Fprintf(w, "streams       %d completed of %d, %d failed; %d open at once at the peak\n", s.Completed, s.Streams, s.Failed, s.PeakOpen)
	fmt.Fprintf(w, "events        %d received of %d: %d lost, %d duplicated, %d reordered, %d foreign\n",
		s.Received, s.EventsExpected, s.Lost, s.Duplicated, s.Reordered, s.Foreign)
	fmt.Fprintf(w, "first event   p50 %s, p99 %s, max %s (from the stream's request)\n", fmtDur(s.TTFEp50Ms), fmtDur(s.TTFEp99Ms), fmtDur(s.TTFEMaxMs))
	fmt.Fprintf(w, "duration      %.1fs, first request to last event\n\n", s.DurationS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "process\tCPU s\tCPU µs/stream\tRSS idle MiB\tRSS peak MiB (VmHWM)\tKiB/stream\tpeak fds\tfd limit\trole")
	for _, p := range r.Procs {
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%s\t%s\t%.1f\t%d\t%d\t%s\n", p.Name, p.CPUSeconds, p.CPUPerUs,
			mib(p.RSSIdleKiB), mib(p.HWMKiB), p.PerKiB, p.PeakFDs, p.FDLimit, p.Role)
	}
	tw.Flush()
	for _, e := range s.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "WARNING: %s\n", n)
	}
	if s.lossless() {
		fmt.Fprintln(w, "\nno event lost, duplicated or reordered")
	}
}

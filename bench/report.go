package main

import (
	"runtime"
	"slices"
	"time"
)

// floorTarget is the budget for Baton's CPU per request over the Go floor's.
const floorTarget = 1.3

// dedupeTarget is the least throughput the 2-hop path may keep with Baton
// B's dedupe window on, as a share of the same path with it off.
const dedupeTarget = 0.85

// recordsTarget is the least throughput the 2-hop path may keep with
// handoff records on (and the breaker, which is always on), as a share of
// the same path with records off on both Batons.
const recordsTarget = 0.85

// Row statuses.
const (
	statusOK      = "ok"
	statusSkipped = "skipped"
	statusFailed  = "failed"
)

// results is everything one run found; it is also the -json document.
type results struct {
	Meta Meta  `json:"meta"`
	Rows []Row `json:"rows"`
	// Summary is the ratios of the run: with several rounds, each one's
	// median over the rounds, which Rounds holds one by one.
	Summary Summary   `json:"summary"`
	Rounds  []Summary `json:"rounds,omitempty"`
}

// Meta describes the machine and the load.
type Meta struct {
	Time      string `json:"time"`
	Commit    string `json:"commit,omitempty"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go_version"`
	Wrk       string `json:"wrk,omitempty"`
	Nginx     string `json:"nginx,omitempty"`
	HAProxy   string `json:"haproxy,omitempty"`
	Threads   int    `json:"wrk_threads"`
	Conns     int    `json:"wrk_connections"`
	DurationS int    `json:"duration_s"`
	WarmupS   int    `json:"warmup_s"`
	// WarmupMaxS bounds the warmup with its rounds until RSS settles
	// (-warmup-max); at or under WarmupS, there are none.
	WarmupMaxS int    `json:"warmup_max_s,omitempty"`
	BodyBytes  int    `json:"body_bytes"`
	GOGC       string `json:"GOGC,omitempty"`
	GOMAXPROCS string `json:"GOMAXPROCS,omitempty"`
	BatonLog   string `json:"baton_log_level,omitempty"`
	// Repeat is -repeat when above 1: how many rounds the run had.
	Repeat int `json:"repeat,omitempty"`
}

// Row is one way of reaching the agent.
type Row struct {
	Name string `json:"name"`
	// Round is the row's round, from 1, in a run with -repeat above 1; 0
	// in a single run.
	Round  int    `json:"round,omitempty"`
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
	// Warnings are things that went wrong in a row that was still measured.
	Warnings []string `json:"warnings,omitempty"`
	Command  string   `json:"command,omitempty"`
	// Profiles are the CPU profiles taken during the measured run, with
	// -profile: one file per process.
	Profiles []string `json:"profiles,omitempty"`
	// WarmupS is the unmeasured run before the measured one: -warmup, and
	// the rounds after it until the proxy's RSS stopped growing.
	WarmupS float64 `json:"warmup_s,omitempty"`

	Requests     int64   `json:"requests"`
	ElapsedS     float64 `json:"elapsed_s"`
	RPS          float64 `json:"rps"`
	P50Ms        float64 `json:"p50_ms"`
	P75Ms        float64 `json:"p75_ms"`
	P90Ms        float64 `json:"p90_ms"`
	P99Ms        float64 `json:"p99_ms"`
	Non2xx       int64   `json:"non_2xx"`
	SocketErrors int64   `json:"socket_errors"`

	// RatioToDirect is RPS over the direct row's of the same round.
	RatioToDirect *float64 `json:"ratio_to_direct,omitempty"`
	// ProxyCPUUsPerReq sums every proxy instance of the row; nil for direct.
	ProxyCPUUsPerReq *float64 `json:"proxy_cpu_us_per_req,omitempty"`
	AgentCPUUsPerReq float64  `json:"agent_cpu_us_per_req"`
	WrkCPUUsPerReq   float64  `json:"wrk_cpu_us_per_req"`
	// MachineBusyPct is how busy all CPUs were during the measured run;
	// OtherCPUPct the part of it that was neither wrk, the agent nor the
	// proxy (other processes, steal): the run's noise. Both are percent of
	// the machine's capacity (CPUs × wall time).
	MachineBusyPct float64 `json:"machine_busy_pct"`
	OtherCPUPct    float64 `json:"other_cpu_pct"`

	Instances []InstanceStat `json:"instances,omitempty"`
	// Services are processes the row relies on that are not the proxy
	// (redis-server as Baton B's store): their CPU is not in
	// ProxyCPUUsPerReq, and not counted as noise either.
	Services []InstanceStat `json:"services,omitempty"`
}

// InstanceStat is one proxy instance of a row (a Baton; nginx's master and
// worker together), or one of its services (only CPU is measured for those).
type InstanceStat struct {
	Name string `json:"name"`
	// Role is what a service is to the row ("Baton B's store").
	Role        string   `json:"role,omitempty"`
	PIDs        []int    `json:"pids"`
	ReadyMs     *float64 `json:"ready_ms,omitempty"`
	CPUSec      float64  `json:"cpu_s"`
	CPUUsPerReq float64  `json:"cpu_us_per_req"`
	RSSIdleKiB  int64    `json:"rss_idle_kib"`
	RSSPeakKiB  int64    `json:"rss_peak_kib"`
}

// Summary holds the derived ratios the notes ask about.
type Summary struct {
	Baton1OverFloor *float64 `json:"baton_1hop_cpu_over_floor,omitempty"`
	// Baton1CoreOverFloor is the same for the core of a hop (records and
	// the envelope contract off).
	Baton1CoreOverFloor *float64 `json:"baton_1hop_core_cpu_over_floor,omitempty"`
	Target              float64  `json:"baton_1hop_cpu_over_floor_target"`
	Baton2OverTwoFloor  *float64 `json:"baton_2hop_cpu_over_2x_floor,omitempty"`
	NginxOverFloor      *float64 `json:"nginx_cpu_over_floor,omitempty"`
	HAProxyOverFloor    *float64 `json:"haproxy_cpu_over_floor,omitempty"`

	// Dedupe compares baton-2hop with Baton B's dedupe window on and off,
	// with the memory store and with Redis.
	DedupeMemory *OnOff  `json:"dedupe_memory,omitempty"`
	DedupeRedis  *OnOff  `json:"dedupe_redis,omitempty"`
	DedupeTarget float64 `json:"dedupe_rps_on_over_off_target"`

	// Records compares baton-2hop with handoff records on and off on both
	// Batons: memory stores, Redis as Baton B's store, Redis as both's.
	RecordsMemory    *OnOff  `json:"records_memory,omitempty"`
	RecordsRedis     *OnOff  `json:"records_redis,omitempty"`
	RecordsRedisBoth *OnOff  `json:"records_redis_both,omitempty"`
	RecordsTarget    float64 `json:"records_rps_on_over_off_target"`

	// MTLS compares baton-2hop over mutual TLS with it in plaintext:
	// handshakes amortised over kept-alive connections (no target).
	MTLS *OnOff `json:"mtls,omitempty"`
}

// OnOff is a row with a feature on against the same row with it off.
type OnOff struct {
	On  string `json:"on"`
	Off string `json:"off"`
	// RPS is req/s on ÷ off: below 1 the feature costs throughput.
	RPS float64 `json:"rps_on_over_off"`
	// CPU is proxy CPU µs/req on ÷ off: above 1 the feature costs CPU.
	CPU *float64 `json:"proxy_cpu_on_over_off,omitempty"`
	// Each is RPS in each round, in round order, when the run had several
	// (RPS and CPU are then medians). A round where either row failed has
	// no ratio and is left out; results.Rounds says which.
	Each []float64 `json:"rps_on_over_off_each,omitempty"`
}

// fill records wrk's report and the per-request CPU figures.
func (r *Row) fill(w wrkResult, agentCPU time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r.Requests, r.ElapsedS, r.RPS = w.Requests, w.Elapsed.Seconds(), w.RPS
	r.P50Ms, r.P75Ms, r.P90Ms, r.P99Ms = ms(w.P50), ms(w.P75), ms(w.P90), ms(w.P99)
	r.Non2xx, r.SocketErrors = w.Non2xx, w.SocketErrors
	if w.Requests == 0 {
		return
	}
	perReq := func(sec float64) float64 { return sec * 1e6 / float64(w.Requests) }
	r.AgentCPUUsPerReq = perReq(agentCPU.Seconds())
	r.WrkCPUUsPerReq = perReq(w.CPU.Seconds())
	for i := range r.Services {
		r.Services[i].CPUUsPerReq = perReq(r.Services[i].CPUSec)
	}
	if len(r.Instances) == 0 {
		return
	}
	var total float64
	for i := range r.Instances {
		r.Instances[i].CPUUsPerReq = perReq(r.Instances[i].CPUSec)
		total += r.Instances[i].CPUSec
	}
	v := perReq(total)
	r.ProxyCPUUsPerReq = &v
}

// noiseWarnPct is the share of the machine other processes may take
// during a row before the row is flagged as noisy.
const noiseWarnPct = 5

// noise records how busy the machine was during the run and how much of
// that was not the harness's processes (own is wrk plus the agent; the
// proxy's share is in Instances).
func (r *Row) noise(busy, own time.Duration, wall time.Duration) {
	capacity := wall.Seconds() * float64(runtime.NumCPU())
	if capacity <= 0 {
		return
	}
	for _, in := range r.Instances {
		own += time.Duration(in.CPUSec * float64(time.Second))
	}
	for _, sv := range r.Services {
		own += time.Duration(sv.CPUSec * float64(time.Second))
	}
	r.MachineBusyPct = 100 * busy.Seconds() / capacity
	r.OtherCPUPct = max(0, 100*(busy-own).Seconds()/capacity)
}

// row returns the named row of any round that succeeded, nil if none did.
func (res *results) row(name string) *Row {
	for i := range res.Rows {
		if res.Rows[i].Name == name && res.Rows[i].Status == statusOK {
			return &res.Rows[i]
		}
	}
	return nil
}

// rowIn returns the named row of the round if it succeeded.
func (res *results) rowIn(round int, name string) *Row {
	for i := range res.Rows {
		if r := &res.Rows[i]; r.Round == round && r.Name == name && r.Status == statusOK {
			return r
		}
	}
	return nil
}

// has reports whether the run included the named row at all.
func (res *results) has(name string) bool {
	for _, r := range res.Rows {
		if r.Name == name {
			return true
		}
	}
	return false
}

// rounds returns the run's rounds in order: just 0 for a single run.
func (res *results) rounds() []int {
	var ns []int
	for _, r := range res.Rows {
		if !slices.Contains(ns, r.Round) {
			ns = append(ns, r.Round)
		}
	}
	slices.Sort(ns)
	return ns
}

// derive computes the ratios between rows. Rows are compared only within
// their round, where they ran back to back. With one round the summary is
// that round's; with several it is each ratio's median over them, so that
// one noisy round does not decide a verdict.
func (res *results) derive() {
	var each []Summary
	for _, n := range res.rounds() {
		each = append(each, res.deriveRound(n))
	}
	if len(each) == 1 {
		res.Summary = each[0]
		return
	}
	res.Summary, res.Rounds = medianOf(each), each
}

func newSummary() Summary {
	return Summary{Target: floorTarget, DedupeTarget: dedupeTarget, RecordsTarget: recordsTarget}
}

// deriveRound computes the ratios between the rows of one round, and sets
// their RatioToDirect.
func (res *results) deriveRound(round int) Summary {
	s := newSummary()
	s.DedupeMemory = res.onOff(round, rowBaton2, rowBaton2NoDedupe)
	s.DedupeRedis = res.onOff(round, rowBaton2Redis, rowBaton2RedisNoDedupe)
	s.RecordsMemory = res.onOff(round, rowBaton2, rowBaton2NoRecords)
	s.RecordsRedis = res.onOff(round, rowBaton2Redis, rowBaton2RedisNoRecords)
	s.RecordsRedisBoth = res.onOff(round, rowBaton2RedisBoth, rowBaton2RedisBothNoRecords)
	s.MTLS = res.onOff(round, rowBaton2MTLS, rowBaton2)
	if d := res.rowIn(round, rowDirect); d != nil && d.RPS > 0 {
		for i := range res.Rows {
			if r := &res.Rows[i]; r.Round == round && r.Status == statusOK {
				v := r.RPS / d.RPS
				r.RatioToDirect = &v
			}
		}
	}
	f := res.rowIn(round, rowFloor)
	if f == nil || f.ProxyCPUUsPerReq == nil || *f.ProxyCPUUsPerReq <= 0 {
		return s
	}
	floor := *f.ProxyCPUUsPerReq
	ratio := func(name string, div float64) *float64 {
		if r := res.rowIn(round, name); r != nil && r.ProxyCPUUsPerReq != nil {
			v := *r.ProxyCPUUsPerReq / div
			return &v
		}
		return nil
	}
	s.Baton1OverFloor = ratio(rowBaton1, floor)
	s.Baton1CoreOverFloor = ratio(rowBaton1Core, floor)
	s.Baton2OverTwoFloor = ratio(rowBaton2, 2*floor)
	s.NginxOverFloor = ratio(rowNginx, floor)
	s.HAProxyOverFloor = ratio(rowHAProxy, floor)
	return s
}

// onOff compares two rows of a round that both succeeded; nil otherwise.
func (res *results) onOff(round int, on, off string) *OnOff {
	a, b := res.rowIn(round, on), res.rowIn(round, off)
	if a == nil || b == nil || b.RPS <= 0 {
		return nil
	}
	c := &OnOff{On: on, Off: off, RPS: a.RPS / b.RPS}
	if a.ProxyCPUUsPerReq != nil && b.ProxyCPUUsPerReq != nil && *b.ProxyCPUUsPerReq > 0 {
		v := *a.ProxyCPUUsPerReq / *b.ProxyCPUUsPerReq
		c.CPU = &v
	}
	return c
}

// ratios and pairs point at the summary's ratios in a fixed order, so that
// medianOf can take them one by one over the rounds.
func (s *Summary) ratios() []**float64 {
	return []**float64{&s.Baton1OverFloor, &s.Baton1CoreOverFloor, &s.Baton2OverTwoFloor, &s.NginxOverFloor, &s.HAProxyOverFloor}
}

func (s *Summary) pairs() []**OnOff {
	return []**OnOff{&s.DedupeMemory, &s.DedupeRedis, &s.RecordsMemory, &s.RecordsRedis, &s.RecordsRedisBoth, &s.MTLS}
}

// medianOf summarises several rounds: each ratio is its median over the
// rounds that have it, and is nil only when none does.
func medianOf(rounds []Summary) Summary {
	s := newSummary()
	for k, dst := range s.ratios() {
		var vs []float64
		for i := range rounds {
			if v := *rounds[i].ratios()[k]; v != nil {
				vs = append(vs, *v)
			}
		}
		*dst = median(vs)
	}
	for k, dst := range s.pairs() {
		var last *OnOff
		var rps, cpu []float64
		for i := range rounds {
			c := *rounds[i].pairs()[k]
			if c == nil {
				continue
			}
			last = c
			rps = append(rps, c.RPS)
			if c.CPU != nil {
				cpu = append(cpu, *c.CPU)
			}
		}
		if last != nil {
			*dst = &OnOff{On: last.On, Off: last.Off, RPS: *median(rps), CPU: median(cpu), Each: rps}
		}
	}
	return s
}

// median returns the middle value of vs (the mean of the two middle ones
// for an even count), nil for none.
func median(vs []float64) *float64 {
	if len(vs) == 0 {
		return nil
	}
	vs = slices.Sorted(slices.Values(vs))
	m := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		m = (vs[len(vs)/2-1] + m) / 2
	}
	return &m
}

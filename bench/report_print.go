package main

// Rendering a run's results: the table (text or Markdown), the notes that
// say what the figures mean against their targets, and the -json document.
// report.go holds the results and derives the ratios.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

var columns = []string{"row", "req/s", "×direct", "p50", "p99", "proxy CPU µs/req", "agent CPU µs/req", "RSS idle MiB", "RSS peak MiB", "errors"}

// cells renders a row for the table; failed and skipped rows say so in
// the req/s column and explain in the notes.
func (r *Row) cells() []string {
	if r.Status != statusOK {
		c := []string{r.label(), strings.ToUpper(r.Status)}
		for len(c) < len(columns) {
			c = append(c, "-")
		}
		return c
	}
	ratio := "-"
	if r.RatioToDirect != nil {
		ratio = fmt.Sprintf("%.2f", *r.RatioToDirect)
	}
	cpu, idle, peak := "-", "-", "-"
	if r.ProxyCPUUsPerReq != nil {
		cpu = fmt.Sprintf("%.1f", *r.ProxyCPUUsPerReq)
		if len(r.Instances) > 1 {
			parts := make([]string, len(r.Instances))
			for i, in := range r.Instances {
				parts[i] = fmt.Sprintf("%.1f", in.CPUUsPerReq)
			}
			cpu += " (" + strings.Join(parts, "+") + ")"
		}
		idles := make([]string, len(r.Instances))
		peaks := make([]string, len(r.Instances))
		for i, in := range r.Instances {
			idles[i] = mib(in.RSSIdleKiB)
			peaks[i] = mib(in.RSSPeakKiB)
		}
		idle, peak = strings.Join(idles, " / "), strings.Join(peaks, " / ")
	}
	return []string{
		r.label(),
		fmt.Sprintf("%.0f", r.RPS),
		ratio,
		fmtDur(r.P50Ms),
		fmtDur(r.P99Ms),
		cpu,
		fmt.Sprintf("%.1f", r.AgentCPUUsPerReq),
		idle,
		peak,
		fmt.Sprint(r.Non2xx + r.SocketErrors),
	}
}

// label names the row in the table and the notes, with its round in a
// repeated run: "baton-2hop #2".
func (r *Row) label() string {
	if r.Round == 0 {
		return r.Name
	}
	return fmt.Sprintf("%s #%d", r.Name, r.Round)
}

func mib(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }

// fmtDur renders milliseconds as wrk does: µs below 1ms, s above 1s.
func fmtDur(ms float64) string {
	switch {
	case ms < 1:
		return fmt.Sprintf("%.0fµs", ms*1000)
	case ms < 1000:
		return fmt.Sprintf("%.2fms", ms)
	default:
		return fmt.Sprintf("%.2fs", ms/1000)
	}
}

func (m Meta) lines() []string {
	head := "baton bench " + m.Time
	if m.Commit != "" {
		head += ", commit " + m.Commit
	}
	mach := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.CPUModel != "" {
		mach += " (" + m.CPUModel + ")"
	}
	mach += ", linux " + m.Kernel + ", " + m.GoVersion
	if m.Wrk != "" {
		mach += ", " + m.Wrk
	}
	if m.Nginx != "" {
		mach += ", " + m.Nginx
	}
	if m.HAProxy != "" {
		mach += ", " + m.HAProxy
	}
	if m.GOGC != "" {
		mach += ", GOGC=" + m.GOGC
	}
	if m.GOMAXPROCS != "" {
		mach += ", GOMAXPROCS=" + m.GOMAXPROCS
	}
	load := fmt.Sprintf("load: wrk -t%d -c%d -d%ds --latency, POST %d-byte JSON; %ds unmeasured warmup per row; all on loopback",
		m.Threads, m.Conns, m.DurationS, m.BodyBytes, m.WarmupS)
	if m.WarmupMaxS > m.WarmupS {
		load = strings.Replace(load, "warmup per row", fmt.Sprintf("warmup per row, then on until the proxy's RSS settles (at most %ds)", m.WarmupMaxS), 1)
	}
	if m.BatonLog != "" {
		load += "; Baton log_level: " + m.BatonLog
	}
	if m.Repeat > 1 {
		load += fmt.Sprintf("; %d rounds of all the rows, ratios are medians over them", m.Repeat)
	}
	return []string{head, mach, load}
}

// findings are the lines under the table: Baton's startup, the ratios,
// and why any row did not run.
func (res *results) findings() []string {
	var out []string
	var ready []string
	for _, r := range res.Rows {
		var parts []string
		for _, in := range r.Instances {
			if in.ReadyMs != nil {
				p := fmt.Sprintf("%.1fms", *in.ReadyMs)
				if len(r.Instances) > 1 {
					p = strings.TrimPrefix(in.Name, "baton-") + " " + p
				}
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			ready = append(ready, r.label()+" "+strings.Join(parts, ", "))
		}
	}
	if len(ready) > 0 {
		out = append(out, "Baton start → admin /readyz 200 (polled every 1ms): "+strings.Join(ready, "; "))
	}
	s := res.Summary
	if s.Baton1OverFloor != nil {
		verdict := "met"
		if *s.Baton1OverFloor > s.Target {
			verdict = "MISSED"
		}
		v := res.ratio(*s.Baton1OverFloor, func(x *Summary) *float64 { return x.Baton1OverFloor })
		out = append(out, fmt.Sprintf("baton-1hop CPU/req ÷ go-floor CPU/req = %s (target ≤ %.1f: %s)", v, s.Target, verdict))
	} else if res.has(rowBaton1) {
		out = append(out, "baton-1hop CPU/req ÷ go-floor CPU/req = n/a (needs both rows to succeed)")
	}
	if s.Baton1CoreOverFloor != nil {
		verdict := "met"
		if *s.Baton1CoreOverFloor > s.Target {
			verdict = "MISSED"
		}
		v := res.ratio(*s.Baton1CoreOverFloor, func(x *Summary) *float64 { return x.Baton1CoreOverFloor })
		out = append(out, fmt.Sprintf("baton-1hop-core CPU/req ÷ go-floor CPU/req = %s (target ≤ %.1f: %s; records and contract off)",
			v, s.Target, verdict))
	}
	if s.Baton2OverTwoFloor != nil {
		v := res.ratio(*s.Baton2OverTwoFloor, func(x *Summary) *float64 { return x.Baton2OverTwoFloor })
		out = append(out, fmt.Sprintf("baton-2hop CPU/req ÷ (2 × go-floor CPU/req) = %s (two Batons against two bare hops)", v))
	}
	for _, d := range []struct {
		feature, store string
		pair           func(*Summary) *OnOff
		target         float64
		on, off        string
	}{
		{"dedupe", "memory", func(x *Summary) *OnOff { return x.DedupeMemory }, s.DedupeTarget, rowBaton2, rowBaton2NoDedupe},
		{"dedupe", "redis", func(x *Summary) *OnOff { return x.DedupeRedis }, s.DedupeTarget, rowBaton2Redis, rowBaton2RedisNoDedupe},
		{"records", "memory", func(x *Summary) *OnOff { return x.RecordsMemory }, s.RecordsTarget, rowBaton2, rowBaton2NoRecords},
		{"records", "redis", func(x *Summary) *OnOff { return x.RecordsRedis }, s.RecordsTarget, rowBaton2Redis, rowBaton2RedisNoRecords},
		{"records", "redis-both", func(x *Summary) *OnOff { return x.RecordsRedisBoth }, s.RecordsTarget, rowBaton2RedisBoth, rowBaton2RedisBothNoRecords},
	} {
		head := d.feature + " on ÷ off throughput (" + d.store + ")"
		switch c := d.pair(&s); {
		case c != nil:
			verdict := "met"
			if c.RPS < d.target {
				verdict = "MISSED"
			}
			v := res.ratio(c.RPS, func(x *Summary) *float64 {
				if p := d.pair(x); p != nil {
					return &p.RPS
				}
				return nil
			})
			l := fmt.Sprintf("%s = %s (target ≥ %.2f: %s)", head, v, d.target, verdict)
			if c.CPU != nil {
				l += fmt.Sprintf("; proxy CPU/req on ÷ off = %.2f", *c.CPU)
			}
			out = append(out, l)
		case res.has(d.off) || (res.has(d.on) && res.row(d.on) == nil):
			// Not when only a successful on row ran: baton-2hop is the on row
			// of two pairs, and -rows may have asked for the other one.
			out = append(out, fmt.Sprintf("%s = n/a (needs %s and %s to succeed)", head, d.on, d.off))
		}
	}
	if s.NginxOverFloor != nil {
		v := res.ratio(*s.NginxOverFloor, func(x *Summary) *float64 { return x.NginxOverFloor })
		out = append(out, fmt.Sprintf("nginx CPU/req ÷ go-floor CPU/req = %s", v))
	}
	if s.HAProxyOverFloor != nil {
		v := res.ratio(*s.HAProxyOverFloor, func(x *Summary) *float64 { return x.HAProxyOverFloor })
		out = append(out, fmt.Sprintf("haproxy CPU/req ÷ go-floor CPU/req = %s", v))
	}
	if c := s.MTLS; c != nil {
		l := fmt.Sprintf("mutual TLS on ÷ off throughput (baton-2hop-mtls ÷ baton-2hop) = %.2f", c.RPS)
		if c.CPU != nil {
			l += fmt.Sprintf("; proxy CPU/req on ÷ off = %.2f (handshakes amortised over kept-alive connections)", *c.CPU)
		}
		out = append(out, l)
	}
	for _, r := range res.Rows {
		name := r.label()
		switch {
		case r.Status != statusOK:
			out = append(out, fmt.Sprintf("%s %s: %s", name, r.Status, r.Note))
		case r.Non2xx+r.SocketErrors > 0:
			out = append(out, fmt.Sprintf("%s: %d non-2xx responses and %d socket errors during the run: its numbers are suspect",
				name, r.Non2xx, r.SocketErrors))
		}
		if res.Meta.WarmupS > 0 && r.WarmupS > float64(res.Meta.WarmupS)+settleRound.Seconds() {
			out = append(out, fmt.Sprintf("%s: warmed up %.0fs, until its RSS stopped growing", name, r.WarmupS))
		}
		for _, w := range r.Warnings {
			out = append(out, fmt.Sprintf("%s: WARNING: %s", name, w))
		}
		if len(r.Profiles) > 0 {
			out = append(out, fmt.Sprintf("%s: profiles of the measured run: %s", name, strings.Join(r.Profiles, " ")))
		}
		for _, sv := range r.Services {
			if r.Status == statusOK {
				svc := sv.Name
				if sv.Role != "" {
					svc += " (" + sv.Role + ")"
				}
				out = append(out, fmt.Sprintf("%s: %s used %.1f CPU µs/req, not counted in proxy CPU", name, svc, sv.CPUUsPerReq))
			}
		}
		if r.Status == statusOK && r.OtherCPUPct > noiseWarnPct {
			out = append(out, fmt.Sprintf("%s: NOISY: other processes took %.0f%% of the machine's CPU during the run (machine %.0f%% busy); rerun on a quiet machine",
				name, r.OtherCPUPct, r.MachineBusyPct))
		}
	}
	return out
}

// ratio renders the summary's value v of a ratio that get reads from a
// summary. With several rounds v is a median, and the line says so and
// gives each round's value in round order, n/a where a round has none.
func (res *results) ratio(v float64, get func(*Summary) *float64) string {
	if len(res.Rounds) < 2 {
		return fmt.Sprintf("%.2f", v)
	}
	each := make([]string, len(res.Rounds))
	n := 0
	for i := range res.Rounds {
		each[i] = "n/a"
		if x := get(&res.Rounds[i]); x != nil {
			each[i] = fmt.Sprintf("%.2f", *x)
			n++
		}
	}
	rounds := "rounds"
	if n == 1 {
		rounds = "round"
	}
	return fmt.Sprintf("%.2f, median of %d %s (%s)", v, n, rounds, strings.Join(each, ", "))
}

// printTable writes the aligned table.
func printTable(w io.Writer, res *results) {
	for _, l := range res.Meta.lines() {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for i := range res.Rows {
		fmt.Fprintln(tw, strings.Join(res.Rows[i].cells(), "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, l := range res.findings() {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, "CPU is utime+stime from /proc/<pid>/stat over the measured run ÷ requests; 2hop = Baton A + B, nginx = master + worker; RSS is VmRSS (A / B for 2hop); errors = non-2xx + socket errors.")
}

// printMarkdown writes the same results as a markdown table for notes.
func printMarkdown(w io.Writer, res *results) {
	for _, l := range res.Meta.lines() {
		fmt.Fprintf(w, "%s  \n", l)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| "+strings.Join(columns, " | ")+" |")
	seps := make([]string, len(columns))
	for i := range seps {
		seps[i] = "---:"
	}
	seps[0] = "---"
	fmt.Fprintln(w, "| "+strings.Join(seps, " | ")+" |")
	for i := range res.Rows {
		fmt.Fprintln(w, "| "+strings.Join(res.Rows[i].cells(), " | ")+" |")
	}
	fmt.Fprintln(w)
	for _, l := range res.findings() {
		// Notes may carry multi-line process output; keep each a list item.
		fmt.Fprintln(w, "- "+strings.ReplaceAll(l, "\n", "\n  "))
	}
}

// writeJSON writes the results to path.
func writeJSON(path string, res *results) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

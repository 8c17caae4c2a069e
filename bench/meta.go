package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// meta describes the machine and the settings of the run.
func (h *harness) meta(ctx context.Context) Meta {
	m := Meta{
		Time:       time.Now().UTC().Format(time.RFC3339),
		CPUs:       runtime.NumCPU(),
		GoVersion:  runtime.Version(),
		Threads:    h.o.threads,
		Conns:      h.o.conns,
		DurationS:  int(h.o.dur / time.Second),
		WarmupS:    int(h.o.warmup / time.Second),
		WarmupMaxS: int(h.o.warmupMax / time.Second),
		BodyBytes:  len(requestBody(h.o.bodyBytes)),
		GOGC:       os.Getenv("GOGC"),
		GOMAXPROCS: os.Getenv("GOMAXPROCS"),
		BatonLog:   h.o.batonLog,
	}
	if h.o.repeat > 1 {
		m.Repeat = h.o.repeat
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, h.wrk, "-v").CombinedOutput(); len(out) > 0 || err == nil {
		m.Wrk = strings.TrimSpace(strings.SplitN(string(out), "Copyright", 2)[0])
	}
	if bin, err := exec.LookPath("nginx"); err == nil {
		m.Nginx = nginxVersion(bin)
	}
	if bin, err := exec.LookPath("haproxy"); err == nil {
		m.HAProxy = haproxyVersion(bin)
	}
	// Read-only: the commit the Baton rows were built from.
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return m
}

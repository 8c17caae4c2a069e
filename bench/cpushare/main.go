// Command cpushare reads CPU profiles of BenchmarkModelCall (in proxy) and
// reports what understanding a model call costs Baton: the CPU samples
// under Baton's genai and modelcall frames, as a share of the CPU Baton
// spends on the call.
//
// Usage:
//
//	go test ./proxy -run XXX -bench 'BenchmarkModelCall/trace=ids/understood=true/stream=true$' \
//	    -benchtime=150000x -cpuprofile /tmp/m.prof -o /tmp/proxy.test
//	go run ./bench/cpushare -binary /tmp/proxy.test -calls 150000 /tmp/m.prof [more.prof ...]
//
// The benchmark runs the agent, Baton and the model server in one process,
// so every sample is given to one of them by the goroutine it was taken in:
// the server (its HTTP/2 connection and handler), the agent (the
// benchmark's loop and its HTTP/1.1 client), the runtime's own (the garbage
// collector, the scheduler), or Baton (the rest: its listeners, middleware
// and reverse proxy, its HTTP/2 client to the server). The runtime's share
// is divided among the three in proportion to their own.
//
// Understanding is a Baton sample whose stack holds a genai or modelcall
// frame with no transport frame (net/http, crypto, the journal, the proxy,
// the poller) below the innermost of them: the work Baton does to read the
// call, not the transport it calls on the way (the round trip it wraps,
// the reading of the answer it passes on, the reading of the request's body
// from the agent's connection, which a call not understood reads in its
// transport instead).
//
// Each share is given with its standard error from sampling alone: the
// profiler samples at 100 Hz, so a share of 5% of a 150,000-call profile
// stands on about 160 samples, ±0.4 points. Given several profiles, it
// also reports them together (their samples added, each profile weighed by
// its CPU), the figure to compare with a target.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	binary := flag.String("binary", "", "the test binary the profiles were taken with (go test -o)")
	calls := flag.Int("calls", 0, "the calls each profile measured (-benchtime=Nx), for per-call figures")
	top := flag.Int("top", 12, "the frames of understanding to list, by cost")
	flag.Parse()
	if *binary == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: cpushare -binary TEST_BINARY [-calls N] PROFILE...")
		os.Exit(2)
	}
	all := shares{by: map[string]float64{}, byFrame: map[string]float64{}}
	for _, prof := range flag.Args() {
		out, err := exec.Command("go", "tool", "pprof", "-traces", *binary, prof).Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "cpushare: go tool pprof %s: %v\n", prof, err)
			os.Exit(1)
		}
		s := share(parseTraces(string(out)))
		s.print(os.Stdout, prof, *calls, *top)
		all.add(s)
	}
	if n := flag.NArg(); n > 1 {
		all.print(os.Stdout, fmt.Sprintf("all %d profiles", n), *calls*n, 0)
	}
}

// sample is one stack of a profile, innermost frame first, with its CPU
// time in milliseconds.
type sample struct {
	ms     float64
	frames []string
}

// parseTraces reads the output of go tool pprof -traces.
func parseTraces(out string) []sample {
	var samples []sample
	for _, block := range strings.Split(out, "-----------+-------------------------------------------------------") {
		var s sample
		for _, line := range strings.Split(block, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			if s.frames == nil {
				// The first line: "     10ms   innermost.frame"
				f := strings.Fields(line)
				if len(f) < 2 {
					break
				}
				ms, ok := duration(f[0])
				if !ok {
					break
				}
				s.ms, s.frames = ms, []string{f[1]}
				continue
			}
			s.frames = append(s.frames, strings.TrimSpace(line))
		}
		if s.frames != nil {
			samples = append(samples, s)
		}
	}
	return samples
}

// duration reads pprof's "10ms", "1.20s", "500us" as milliseconds.
func duration(v string) (float64, bool) {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"ms", 1}, {"us", 1e-3}, {"µs", 1e-3}, {"ns", 1e-6}, {"s", 1000}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			var f float64
			if _, err := fmt.Sscanf(n, "%g", &f); err != nil {
				return 0, false
			}
			return f * u.ms, true
		}
	}
	return 0, false
}

// Who a sample's goroutine works for.
const (
	runtimeOwn = "runtime"
	server     = "server"
	agent      = "agent"
	baton      = "baton"
)

func owner(frames []string) string {
	stack := strings.Join(frames, " ")
	outer := frames[len(frames)-1]
	switch {
	case strings.Contains(stack, "gcBgMarkWorker"), strings.Contains(stack, "runtime.bgsweep"),
		strings.Contains(stack, "runtime.bgscavenge"), strings.HasPrefix(outer, "runtime."), outer == "gogo":
		return runtimeOwn
	case strings.Contains(stack, "BenchmarkModelCall.func1"), strings.Contains(stack, "http2serverConn"):
		return server
	case strings.Contains(stack, "BenchmarkModelCall"), strings.Contains(stack, "persistConn"),
		strings.Contains(stack, "testing.(*B)"):
		return agent
	}
	return baton
}

// transport marks the frames that are not understanding when below it.
var transport = []string{"net/http.", "golang.org/x/net", "crypto/", "internal/poll", "syscall.",
	"github.com/batonproxy/baton/proxy", "github.com/batonproxy/baton/middleware",
	"github.com/batonproxy/baton/journal", "github.com/batonproxy/baton/tlsintercept",
	"github.com/batonproxy/baton/state"}

func understanding(frames []string) (frame string, ok bool) {
	for i, f := range frames {
		if !strings.Contains(f, "baton/genai.") && !strings.Contains(f, "baton/modelcall.") {
			continue
		}
		for _, below := range frames[:i] {
			for _, t := range transport {
				if strings.HasPrefix(below, t) {
					return "", false
				}
			}
		}
		return f[strings.Index(f, "baton/")+len("baton/"):], true
	}
	return "", false
}

// shares is a profile's CPU by owner and the understanding's, by frame.
type shares struct {
	by      map[string]float64
	under   float64
	byFrame map[string]float64
}

func share(samples []sample) shares {
	s := shares{by: map[string]float64{}, byFrame: map[string]float64{}}
	for _, smp := range samples {
		o := owner(smp.frames)
		s.by[o] += smp.ms
		if o != baton {
			continue
		}
		if f, ok := understanding(smp.frames); ok {
			s.under += smp.ms
			s.byFrame[f] += smp.ms
		}
	}
	return s
}

// add counts another profile's samples in s: the share of several
// profiles is their samples' together, each profile weighed by its CPU.
func (s *shares) add(o shares) {
	for k, v := range o.by {
		s.by[k] += v
	}
	for k, v := range o.byFrame {
		s.byFrame[k] += v
	}
	s.under += o.under
}

// samplePeriod is the profiler's period at its default rate (100 Hz), in
// milliseconds: the CPU one sample stands for.
const samplePeriod = 10.0

// stderr is the standard error of the share of understanding that comes
// from sampling alone: its samples are a Poisson count, whose relative
// error is one over the count's square root.
func (s shares) stderr() float64 {
	b, u := s.scaled(s.by[baton]), s.scaled(s.under)
	if n := s.under / samplePeriod; n > 0 {
		return pct(u, b) / math.Sqrt(n)
	}
	return 0
}

// scaled is x with the runtime's share in proportion added.
func (s shares) scaled(x float64) float64 {
	own := s.by[server] + s.by[agent] + s.by[baton]
	if own == 0 {
		return 0
	}
	return x * (1 + s.by[runtimeOwn]/own)
}

func (s shares) print(w io.Writer, name string, calls, top int) {
	b, u := s.scaled(s.by[baton]), s.scaled(s.under)
	all := s.by[server] + s.by[agent] + s.by[baton] + s.by[runtimeOwn]
	fmt.Fprintf(w, "%s: understanding %.2f%% ± %.2f of Baton's CPU (%.2f%% of the whole call's)", name, pct(u, b), s.stderr(), pct(u, all))
	if calls > 0 {
		per := 1000 / float64(calls)
		fmt.Fprintf(w, "; per call: Baton %.1f µs, understanding %.2f µs", b*per, u*per)
	}
	fmt.Fprintf(w, "\n  CPU ms: baton %.0f, agent %.0f, server %.0f, runtime %.0f\n", s.by[baton], s.by[agent], s.by[server], s.by[runtimeOwn])
	frames := make([]string, 0, len(s.byFrame))
	for f := range s.byFrame {
		frames = append(frames, f)
	}
	sort.Slice(frames, func(i, j int) bool { return s.byFrame[frames[i]] > s.byFrame[frames[j]] })
	for _, f := range frames[:min(top, len(frames))] {
		fmt.Fprintf(w, "  %7.0f ms  %s\n", s.byFrame[f], f)
	}
}

func pct(x, of float64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * x / of
}

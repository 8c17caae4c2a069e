package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clkTck is sysconf(_SC_CLK_TCK), the unit of utime and stime in
// /proc/<pid>/stat. It is 100 on every Linux the harness targets.
const clkTck = 100

// rssInterval is how often VmRSS is sampled under load.
const rssInterval = 100 * time.Millisecond

// cpuTime returns the user plus system CPU time a process has used so far,
// all threads included, from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	utime, stime, _, err := parseStat(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clkTck, nil
}

// parseStat returns utime and stime (fields 14 and 15, in clock ticks) and
// the parent pid (field 4) from a /proc/<pid>/stat line. The command name
// (field 2) may hold spaces and parentheses, so fields are counted from
// the last ')'.
func parseStat(b []byte) (utime, stime int64, ppid int, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("malformed stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, 0, 0, fmt.Errorf("malformed stat line: %d fields", len(f)+2)
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, 0, fmt.Errorf("ppid: %w", err)
	}
	if utime, err = strconv.ParseInt(f[11], 10, 64); err != nil {
		return 0, 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseInt(f[12], 10, 64); err != nil {
		return 0, 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, ppid, nil
}

// sumCPU returns the CPU time of all pids together.
func sumCPU(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, p := range pids {
		d, err := cpuTime(p)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// rssKiB returns VmRSS from /proc/<pid>/status in KiB.
func rssKiB(pid int) (int64, error) { return statusKiB(pid, "VmRSS") }

// statusKiB returns a field of /proc/<pid>/status given in kB (VmRSS, or
// VmHWM, the peak resident set since the process started), in KiB.
func statusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v) // "12345 kB"
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// sumRSS returns the VmRSS of all pids together, in KiB.
func sumRSS(pids []int) (int64, error) {
	var total int64
	for _, p := range pids {
		v, err := rssKiB(p)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// childrenOf returns the pids whose parent is ppid (nginx's workers).
func childrenOf(ppid int) []int {
	ents, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		_, _, pp, err := parseStat(b)
		if err != nil || pp != ppid {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(e))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// rssSampler records the peak VmRSS of each group of pids, sampled every
// rssInterval until stopped.
type rssSampler struct {
	groups [][]int
	stopc  chan struct{}
	done   chan struct{}

	mu   sync.Mutex
	peak []int64
}

func startRSSSampler(groups [][]int) *rssSampler {
	s := &rssSampler{
		groups: groups,
		stopc:  make(chan struct{}),
		done:   make(chan struct{}),
		peak:   make([]int64, len(groups)),
	}
	go s.loop()
	return s
}

func (s *rssSampler) loop() {
	defer close(s.done)
	t := time.NewTicker(rssInterval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stopc:
			s.sample()
			return
		case <-t.C:
		}
	}
}

func (s *rssSampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, g := range s.groups {
		if v, err := sumRSS(g); err == nil && v > s.peak[i] {
			s.peak[i] = v
		}
	}
}

// stop ends sampling and returns the peak of each group in KiB.
func (s *rssSampler) stop() []int64 {
	close(s.stopc)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.peak...)
}

// machineBusy returns the CPU time all CPUs of the machine have spent not
// idle (user, nice, system, irq, softirq, steal) from the first line of
// /proc/stat. Its delta over a run, less what the harness's own processes
// used, is what other processes took: the run's noise.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	// user nice system idle iowait irq softirq steal: skip idle and iowait.
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clkTck, nil
}

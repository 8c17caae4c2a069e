package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// raiseNoFile raises this process's RLIMIT_NOFILE: the hard limit to want
// when the process may (CAP_SYS_RESOURCE; never above fs.nr_open), and the
// soft limit to the hard one. Having called setrlimit, the process hands
// its limit on to every child it starts (Go restores the limit it found at
// start-up only in the children of a process that never set it). It
// returns the limit now in force.
func raiseNoFile(want uint64) (syscall.Rlimit, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return lim, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && want > n {
			want = n
		}
	}
	if lim.Max < want {
		up := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
			return up, nil
		}
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return lim, fmt.Errorf("setrlimit(RLIMIT_NOFILE, %d): %w", lim.Max, err)
	}
	return lim, nil
}

// procNoFile returns the soft RLIMIT_NOFILE of process pid, from
// /proc/<pid>/limits.
func procNoFile(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				if f[0] == "unlimited" {
					return ^uint64(0), nil
				}
				return strconv.ParseUint(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/limits: no Max open files", pid)
}

// openFDs returns how many file descriptors process pid has open.
func openFDs(pid int) (int, error) {
	d, err := os.Open(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(4096)
		n += len(names)
		if err != nil || len(names) == 0 {
			return n, nil
		}
	}
}

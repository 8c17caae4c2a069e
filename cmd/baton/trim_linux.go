//go:build linux

package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// trimStartupPages asks the kernel to drop this process's resident pages of
// its own executable once start-up is over. Package initialisation (protocol
// buffer descriptors of the OTLP exporters, metric registries), configuration
// decoding and the envelope schema's compilation touch megabytes of code and
// read-only data that an idle sidecar never runs again, and the kernel's
// fault-around maps their neighbours too. The pages are clean copies of the
// file: what runs again (the request path) faults back in from the page
// cache on first use. It returns the bytes advised; errors (a kernel before
// 5.4 has no MADV_PAGEOUT) leave the pages as they were.
func trimStartupPages() int64 {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// The raw call: the region is not Go memory, so no slice over it.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); errno == 0 {
			total += int64(end - start)
		}
	}
	return total
}

//go:build linux

package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// trimStartupPages drops this process's mappings of the pages of its own
// executable once start-up is over. Package initialisation (protocol buffer
// descriptors, metric registries, the Kubernetes types of the injector),
// configuration decoding and the envelope schema's compilation touch
// megabytes of code and read-only data that an idle sidecar never runs
// again, and the kernel's fault-around maps their neighbours too.
// MADV_DONTNEED on these read-only, never written private mappings only
// unmaps the pages: they stay in the page cache, and what runs again (the
// request path) maps them back with a minor fault. Writable mappings (the
// program's data) are left alone. It returns the bytes advised.
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
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED); errno == 0 {
			total += int64(end - start)
		}
		// What maps back maps page by page: with MADV_RANDOM the kernel
		// does not fault in the 64 KiB around each page touched, which
		// for code scattered over a large binary is most of what a
		// request maps back.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_RANDOM)
	}
	return total
}

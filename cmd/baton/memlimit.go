package main

import (
	"os"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/config"
)

// workingSet is the room memoryLimit leaves for requests in flight beside
// the in-memory store. An open stream through Baton holds about 100 KiB of
// the runtime's memory (its goroutines' stacks, the 32 KiB copy buffer, the
// connections' buffers, the answer kept for the dedupe window), 60–70 KiB
// of it resident, so 2 GiB is 10,000 concurrent streams before the
// collector has to run more often than GOGC asks. `go run ./bench -sse
// 10000 -sse-h2c -sse-hops 1` measures it: with a 1.1 GiB limit the
// collector took two thirds of Baton's CPU, 9 ms a stream instead of 3.
const workingSet = 2 << 30

// gcPercent is the collector's target (GOGC) for baton serve when GOGC is
// not set. main sets 400 for every command: a proxy's heap is mostly
// short-lived buffers, and fewer, larger collections cost less. A Baton
// whose in-memory store keeps its handoff records (records on, no Redis: the
// defaults) also holds up to store.memory.max_bytes of records and
// checkpoints for their retention, and at 400 its heap grows to five times
// what is live (440 MiB resident at the 64 MiB default under load) for no
// less CPU per request: the collector marks the store's values (byte
// slices) without scanning them, and the larger heap costs the caches more
// than the extra collections cost. `go run ./bench -rows baton-1hop` with
// GOGC=100 against 400, three alternating pairs: 2.39–2.50 against
// 2.59–2.69 of the agent's CPU per request, 190 against 440 MiB at peak;
// baton-2hop likewise. So then it is the runtime's default, 100. Without
// records the store holds little for long, and 400 stays (baton-1hop-core:
// 2.25–2.41 of the agent's CPU at 400, 2.36–2.49 at 100).
func gcPercent(c *config.Config) int {
	if c.Store.Redis == nil && c.RecordsOn() {
		return 100
	}
	return 400
}

// memoryLimit is the Go runtime's soft memory limit when GOMEMLIMIT is not
// set. In a container with a memory limit (containerMax > 0) it is 90% of
// that limit, so that the collector works harder before the kernel's OOM
// killer would act, and not before. Elsewhere it is room for the in-memory
// store's bound twice over (what GOGC 100 lets the heap grow to over the
// records it keeps, gcPercent) plus the working set.
//
// A limit below what is live makes the collector run all the time (up to
// half the CPU), which is why it is never set from the store's bound alone.
func memoryLimit(c *config.Config, containerMax int64) int64 {
	if containerMax > 0 {
		return containerMax / 10 * 9
	}
	if c.Store.Redis != nil || c.Store.Memory.MaxBytes == 0 {
		return workingSet
	}
	return 2*c.Store.Memory.MaxBytes + workingSet
}

// containerMemoryMax returns the memory limit of the cgroup this process
// runs in (cgroup v2's memory.max, or v1's memory.limit_in_bytes), or 0
// when there is none or it cannot be read. A container runtime mounts the
// container's own cgroup at /sys/fs/cgroup.
func containerMemoryMax(root string) int64 {
	for _, f := range []string{root + "/memory.max", root + "/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 says "no limit" with a number near the largest int64,
		// rounded down to a page.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}

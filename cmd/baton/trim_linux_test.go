//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile reads this process's resident pages of mapped files, in kB.
func rssFile(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestTrimStartupPagesDropsExecutablePages(t *testing.T) {
	before := rssFile(t)
	n := trimStartupPages()
	after := rssFile(t)
	if n <= 0 {
		t.Fatalf("trimStartupPages advised %d bytes: no read-only mapping of the executable found, or madvise refused", n)
	}
	if after >= before {
		t.Fatalf("RssFile %d kB before, %d kB after: nothing was dropped", before, after)
	}
	// What runs again faults back in: the process carries on.
	if got := strconv.Itoa(42); got != "42" {
		t.Fatal(got)
	}
	t.Logf("advised %d MiB; RssFile %d kB -> %d kB", n>>20, before, after)
}

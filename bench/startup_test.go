package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsStartup(t *testing.T) {
	t.Parallel()
	if o, err := parseFlags([]string{"-startup", "30"}, io.Discard); err != nil || o.startup != 30 {
		t.Fatalf("-startup 30: got %v, %v", o, err)
	}
	if _, err := parseFlags([]string{"-startup", "-1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-startup: must be >= 0, got -1") {
		t.Fatalf("-startup -1: got error %v", err)
	}
}

func TestPrintStartup(t *testing.T) {
	t.Parallel()
	var ready []time.Duration
	for i := 10; i >= 1; i-- { // out of order: the report sorts
		ready = append(ready, time.Duration(i)*time.Millisecond)
	}
	rows := []*startupRow{
		{store: "memory", ready: ready, readyKB: 20 << 10, idleKB: 12 << 10},
		{store: "redis", skipped: "no Redis answering PING"},
		{store: "other", err: errors.New("boom")},
	}
	var b strings.Builder
	printStartup(&b, 10, rows)
	out := b.String()
	for _, want := range []string{
		"memory      10     1.0     5.0     9.0    10.0           20.0          12.0",
		"redis store skipped: no Redis answering PING",
		"other store FAILED: boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

package main

import (
	"strings"
	"testing"
	"time"
)

func TestLogWriterFlushesOnIntervalAndClose(t *testing.T) {
	t.Parallel()
	out := &lockedBuffer{}
	w := newLogWriter(out, 10*time.Millisecond)
	w.Write([]byte("one\n"))
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "one\n" {
		if time.Now().After(deadline) {
			t.Fatalf("not flushed on the interval: %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	slow := newLogWriter(out, time.Hour)
	slow.Write([]byte("two\n"))
	slow.Close()
	if !strings.HasSuffix(out.String(), "two\n") {
		t.Errorf("not flushed on Close: %q", out.String())
	}
	w.Close()
}

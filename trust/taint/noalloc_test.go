//go:build !race

package taint

// The race detector makes sync.Pool drop items at random, so allocation
// counts of code that uses a pool mean nothing under -race: these tests are
// built without it, and make test runs them in a pass of their own.

import (
	"bytes"
	"testing"
)

func TestScanNoAllocOnCleanText(t *testing.T) {
	text := []byte(mixedText(8192))
	Scan(text)
	if allocs := testing.AllocsPerRun(20, func() { Scan(text) }); allocs != 0 {
		t.Errorf("Scan of clean text allocated %.1f times", allocs)
	}
}

func TestSpansNoAllocWithoutEscapes(t *testing.T) {
	body := []byte(`{"a":{"b":["plain text value", 1, true], "c": "another plain value"}, "d": [["x"]]}`)
	esc := []byte(`{"a":"with \"escapes\" \u00e9 and \n newline","b":["more\tescapes"]}`)
	fn := func(string, []byte) {}
	_ = Spans(body, 1000, fn)
	if n := testing.AllocsPerRun(50, func() { _ = Spans(body, 1000, fn) }); n != 0 {
		t.Errorf("Spans allocated %.1f times for strings without escapes", n)
	}
	_ = Spans(esc, 1000, fn)
	if n := testing.AllocsPerRun(50, func() { _ = Spans(esc, 1000, fn) }); n != 0 {
		t.Errorf("Spans allocated %.1f times for escaped strings once its buffers grew", n)
	}
	// Each reported span allocates its pointer, nothing else.
	if n := testing.AllocsPerRun(50, func() { _ = Spans(body, 0, fn) }); n > 4 {
		t.Errorf("Spans allocated %.1f times for 4 spans", n)
	}
}

func TestDetectNoAllocOnCleanText(t *testing.T) {
	text := []byte(mixedText(8192))
	Detect(text)
	if allocs := testing.AllocsPerRun(20, func() { Detect(text) }); allocs != 0 {
		t.Errorf("Detect of clean text allocated %.1f times", allocs)
	}
	// A long span, scored on its head and tail, and a blob that decodes.
	long := bytes.Repeat(text, (DetectHead+DetectTail)/len(text)+2)
	Detect(long)
	if allocs := testing.AllocsPerRun(5, func() { Detect(long) }); allocs != 0 {
		t.Errorf("Detect of a long text allocated %.1f times", allocs)
	}
}

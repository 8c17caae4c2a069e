//go:build !race

package taint

// The race detector makes sync.Pool drop items at random, so allocation
// counts of code that uses a pool mean nothing under -race: these tests are
// built without it, and make test runs them in a pass of their own.

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// steadyAllocs is testing.AllocsPerRun's least of three rounds: a
// collection between rounds empties the pool Detect's buffers come from,
// and the one round after it counts their growing again; an allocation
// made every call shows in all three.
func steadyAllocs(runs int, f func()) float64 {
	n := testing.AllocsPerRun(runs, f)
	for range 2 {
		n = min(n, testing.AllocsPerRun(runs, f))
	}
	return n
}

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

// TestDetectNoAllocOnCleanText: Detect allocates nothing for text that
// scores below ReasonScore, however long, once its pooled buffers have
// grown; and for text that scores higher, only its reason, as many times
// for a long text as for a short one (nothing per word).
func TestDetectNoAllocOnCleanText(t *testing.T) {
	table, err := os.ReadFile(filepath.Join("testdata", "injection", "benign", "table-sales.txt"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(filepath.Join("testdata", "injection", "benign", "code-go-handler.txt"))
	if err != nil {
		t.Fatal(err)
	}
	low := bytes.Repeat(append(append(table, '\n'), code...), 8192/(len(table)+len(code))+1)
	if p := Detect(low).Model; p >= ReasonScore {
		t.Fatalf("the low text scores %.2f", p)
	}
	if allocs := steadyAllocs(20, func() { Detect(low) }); allocs != 0 {
		t.Errorf("Detect of clean text allocated %.1f times", allocs)
	}
	// A long span, scored on its head and tail.
	long := bytes.Repeat(low, (DetectHead+DetectTail)/len(low)+2)
	Detect(long)
	if allocs := steadyAllocs(5, func() { Detect(long) }); allocs != 0 {
		t.Errorf("Detect of a long text allocated %.1f times", allocs)
	}
	// Mixed prose, with or without a reason: as many allocations for 8 KiB
	// as for 256 KiB.
	text := []byte(mixedText(8192))
	longer := bytes.Repeat(text, 32)
	Detect(text)
	Detect(longer)
	short := steadyAllocs(20, func() { Detect(text) })
	if allocs := steadyAllocs(5, func() { Detect(longer) }); allocs != short || short > 8 {
		t.Errorf("Detect allocated %.1f times for 8 KiB of prose, %.1f for 256 KiB", short, allocs)
	}
}

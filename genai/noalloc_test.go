//go:build !race

package genai

import "testing"

// Allocation counts mean nothing under -race; make test runs this file in
// its pass without it.

func TestReasonOfNoAlloc(t *testing.T) {
	v := []byte(`"tool_calls"`)
	if n := testing.AllocsPerRun(100, func() { _, _ = reasonOf(v) }); n != 0 {
		t.Errorf("reasonOf of a usual reason allocates %v times", n)
	}
}

func TestSetModelNoAlloc(t *testing.T) {
	v := []byte(`"gpt-4.1-mini-2025-04-14"`)
	var m string
	setModel(&m, v)
	if n := testing.AllocsPerRun(100, func() { m = ""; setModel(&m, v) }); n != 0 || m != "gpt-4.1-mini-2025-04-14" {
		t.Errorf("setModel of the name read last allocates %v times (read %q)", n, m)
	}
}

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

//go:build !race

package record

import "testing"

// The race detector allocates on its own, so these run without it.

func TestAppendJSONNoAllocRecord(t *testing.T) {
	for name, r := range map[string]*Record{"bench": benchRecord(), "full": fullRecord()} {
		buf := make([]byte, 0, 4096)
		if n := testing.AllocsPerRun(100, func() { buf = r.AppendJSON(buf[:0]) }); n != 0 {
			t.Errorf("%s: %v allocations per AppendJSON, want 0", name, n)
		}
	}
}

func TestAppendJSONNoAllocRequest(t *testing.T) {
	for name, q := range map[string]*Request{"bench": benchRequest(), "most headers": manyHeaders(sortedKeysOnStack)} {
		buf := make([]byte, 0, 16<<10)
		if n := testing.AllocsPerRun(100, func() { buf = q.AppendJSON(buf[:0]) }); n != 0 {
			t.Errorf("%s: %v allocations per AppendJSON, want 0", name, n)
		}
	}
}

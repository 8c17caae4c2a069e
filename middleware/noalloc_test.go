//go:build !race

package middleware

import "testing"

// The race detector drops pooled items and allocates on its own, so these
// run without it (make test runs them in a pass of their own).

// TestJSONStringsNoAllocPerBody: reading a body's strings allocates what it
// returns (each string's text, its pointer, which jsontext builds in two,
// and the slice holding them), not a decoder and its buffer per body.
func TestJSONStringsNoAllocPerBody(t *testing.T) {
	body := []byte(`{"task":"summarise the page","context":{"notes":["first","second"]},"n":3}`)
	jsonStrings(body) // the pool's first reader
	n := testing.AllocsPerRun(100, func() {
		if _, ok := jsonStrings(body); !ok {
			t.Fatal("not read")
		}
	})
	const strs = 3
	if n > 4*strs+3 {
		t.Fatalf("%.0f allocations to read %d strings", n, strs)
	}
	t.Logf("%.0f allocations to read %d strings", n, strs)
}

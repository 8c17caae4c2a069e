package modelcall

import (
	"net/http"
	"testing"
	"unsafe"

	"github.com/batonproxy/baton/middleware"
)

// header reads keys as they are: each must be in canonical form, as
// net/http stores them.
func TestHeaderKeysCanonical(t *testing.T) {
	for _, k := range []string{"Upgrade", "Content-Type", "Content-Encoding", middleware.HeaderJournalReplayed} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q): header would not find it", k, c)
		}
	}
	h := http.Header{}
	h.Set("content-type", "text/event-stream")
	if got := header(h, "Content-Type"); got != "text/event-stream" {
		t.Errorf("header = %q", got)
	}
	if got := header(h, "Content-Encoding"); got != "" {
		t.Errorf("header of a missing key = %q", got)
	}
}

// A call is allocated for every model call: it must stay within the
// allocator's 1 KiB size class (the next is 1152 bytes), which a field added
// or a bool put between wider ones can push it out of.
func TestCallSize(t *testing.T) {
	if n := unsafe.Sizeof(call{}); n > 1024 {
		t.Errorf("a call is %d bytes, over the 1024-byte size class: group its small fields at its end, or shrink genai.Stream", n)
	}
}

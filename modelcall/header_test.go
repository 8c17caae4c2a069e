package modelcall

import (
	"net/http"
	"testing"

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

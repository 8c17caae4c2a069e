package tokens_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryIsNotLinked: the package, as Baton builds it, links nothing
// of github.com/tiktoken-go/tokenizer, whose vocabularies as Go map
// literals would add some 11 MB to the binary. Only the generator and the
// tests use it.
func TestLibraryIsNotLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/tiktoken-go/") {
			t.Errorf("handoff/tokens links %s", pkg)
		}
	}
}

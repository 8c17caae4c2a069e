package tokens_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/batonproxy/baton/handoff/tokens"
)

func TestFor(t *testing.T) {
	for _, c := range []struct {
		model, name, want string
		estimated         bool
	}{
		{"gpt-4o", "", "o200k_base", false},
		{"gpt-4.1-mini", "", "o200k_base", false},
		{"GPT-4", "", "cl100k_base", false},
		{"claude-sonnet-4", "", tokens.Estimate, true},
		{"", "cl100k_base", "cl100k_base", false},
		{"", "", tokens.Estimate, true},
		{"", "bytes/4", tokens.Estimate, true},
	} {
		got, err := tokens.For(c.model, c.name)
		if err != nil || got.Name != c.want || got.Estimated() != c.estimated {
			t.Errorf("For(%q, %q) = %+v, %v; want %s (estimated %v)", c.model, c.name, got, err, c.want, c.estimated)
		}
		if c.model == "claude-sonnet-4" && !strings.Contains(got.Note, "claude-sonnet-4") {
			t.Errorf("an unknown model's estimate says %q, want it named", got.Note)
		}
	}
	if _, err := tokens.For("", "llama3"); err == nil {
		t.Error("an unknown tokenizer name was accepted")
	}
}

// TestCount checks counts against the encodings' known values (OpenAI's
// tiktoken gives "hello world" 2 tokens in cl100k_base and o200k_base) and
// the estimate's rounding, from several goroutines at once.
func TestCount(t *testing.T) {
	o200k, _ := tokens.For("gpt-4o", "")
	cl100k, _ := tokens.For("", "cl100k_base")
	est, _ := tokens.For("", "")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if n := o200k.Count([]byte("hello world")); n != 2 {
				t.Errorf("o200k_base: %d tokens, want 2", n)
			}
			if n := cl100k.Count([]byte("hello world")); n != 2 {
				t.Errorf("cl100k_base: %d tokens, want 2", n)
			}
			if n := est.Count([]byte("hello")); n != 2 {
				t.Errorf("bytes/4 of 5 bytes: %d, want 2", n)
			}
		})
	}
	wg.Wait()
	long := []byte(strings.Repeat("The checkout latency doubled after Tuesday's deploy. ", 200))
	if n, e := o200k.Count(long), est.Count(long); n < e/3 || n > e {
		t.Errorf("o200k_base counts %d tokens for %d bytes of English (estimate %d): implausible", n, len(long), e)
	}
}

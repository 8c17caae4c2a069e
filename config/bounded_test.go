package config

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestBoundedNames: each bounded pattern accepts exactly what the regexp
// with the bound written in it does.
func TestBoundedNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		got  bounded
		want *regexp.Regexp
	}{
		{"agentName", agentName, regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)},
		{"routeName", routeName, regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)},
		{"trustDomain", trustDomain, regexp.MustCompile(`^[a-z0-9._-]{1,255}$`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inputs := []string{"", "a", "-", "a-", "-a", "a.b", "a_b", "A", "a\n", "é"}
			for _, n := range []int{61, 62, 63, 64, 65, 254, 255, 256, 300} {
				inputs = append(inputs, strings.Repeat("a", n), "a"+strings.Repeat(".", n-2)+"a", strings.Repeat("-", n))
			}
			r := rand.New(rand.NewPCG(1, 2))
			const alphabet = "az09._-A/ "
			for range 20000 {
				b := make([]byte, r.IntN(260))
				for i := range b {
					b[i] = alphabet[r.IntN(len(alphabet))]
					if r.IntN(4) > 0 { // mostly valid bytes, so that long strings can match
						b[i] = alphabet[r.IntN(7)]
					}
				}
				inputs = append(inputs, string(b))
			}
			for _, s := range inputs {
				if g, w := tt.got.MatchString(s), tt.want.MatchString(s); g != w {
					t.Fatalf("%q (%d bytes): got %v, the bounded regexp says %v", s, len(s), g, w)
				}
			}
		})
	}
}

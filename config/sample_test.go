package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestSample(t *testing.T) {
	t.Parallel()
	c, err := Parse(strings.NewReader(Sample), nil)
	if err != nil {
		t.Fatalf("Sample does not parse: %v", err)
	}
	if c.Agent != "analyst" || c.Store.Redis != nil {
		t.Errorf("Sample: agent %q, redis %+v; want analyst on the memory store", c.Agent, c.Store.Redis)
	}
}

// The reference must not drift from the code: it shows Sample verbatim and
// names every key the decoder accepts.
func TestDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{name: "shows Sample verbatim", check: func(t *testing.T) {
			if !strings.Contains(doc, "```yaml\n"+Sample+"```\n") {
				t.Error("docs/config.md does not hold Sample verbatim in a ```yaml block; copy it from config/sample.go")
			}
		}},
		{name: "every yaml example parses", check: func(t *testing.T) {
			blocks := strings.Split(doc, "```yaml\n")[1:]
			if len(blocks) == 0 {
				t.Fatal("docs/config.md has no ```yaml blocks")
			}
			for i, b := range blocks {
				src, _, _ := strings.Cut(b, "```")
				if _, err := Parse(strings.NewReader(src), nil); err != nil {
					t.Errorf("yaml block %d does not parse: %v\n%s", i+1, err, src)
				}
			}
		}},
		{name: "names every key", check: func(t *testing.T) {
			for _, k := range keyPaths("", reflect.TypeFor[Config]()) {
				if !strings.Contains(doc, "`"+k+"`") {
					t.Errorf("docs/config.md does not describe `%s`", k)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t)
		})
	}
}

// keyPaths lists the leaf keys under t as the reference writes them:
// peers.<name>.url, edges[].max_hops.
func keyPaths(prefix string, t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct:
		names, types := fields(t)
		var out []string
		for _, n := range names {
			out = append(out, keyPaths(joinPath(prefix, n), types[n])...)
		}
		return out
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct:
		return keyPaths(prefix+".<name>", t.Elem())
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return keyPaths(prefix+"[]", t.Elem())
	default:
		return []string{prefix}
	}
}

package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseNotYAML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "unclosed flow sequence", in: "agent: [\n", want: "config: yaml: line 1: did not find expected node content"},
		{name: "tab indentation", in: "listen:\n\tegress: x\n", want: "config: yaml: line 2: found character that cannot start any token"},
		{name: "undefined alias", in: "agent: *nobody\n", want: `config: yaml: unknown anchor 'nobody' referenced`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(strings.NewReader(tt.in), nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDecodeEmpty(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, in string }{
		{name: "no bytes", in: ""},
		{name: "only whitespace", in: "\n  \n"},
		{name: "only comments", in: "# nothing yet\n"},
		{name: "an empty document", in: "---\n"},
		{name: "null", in: "~\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Decode(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(*c, Config{}) {
				t.Errorf("Decode = %+v, want the zero Config", c)
			}
		})
	}
}

func TestDecodeLimits(t *testing.T) {
	t.Parallel()
	// Each anchor merges the previous one twice: 2^30 mappings if expanded.
	var b strings.Builder
	b.WriteString("edges:\n  - &a0 {from: x}\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "  - &a%d {<<: [*a%d, *a%d]}\n", i, i-1, i-1)
	}
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "merge keys that expand exponentially", in: b.String(), want: "config: the file expands to more than 100000 values (through aliases or merge keys)"},
		{name: "a file over 1 MiB", in: "# " + strings.Repeat("x", 1<<20), want: "config: file is larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode(strings.NewReader(tt.in))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Decode error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestProblemsAreCapped(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader(strings.Repeat("agent: a\n", 61)), nil)
	got := lines(err)
	if len(got) != maxProblems+1 || got[maxProblems] != "and 10 more problems" {
		t.Errorf("got %d lines ending %q, want %d ending %q", len(got), got[len(got)-1], maxProblems+1, "and 10 more problems")
	}
	assertFieldErrors(t, err)
}

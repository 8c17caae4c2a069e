//go:build !sidecar

package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/batonproxy/baton/bench/chaos"
)

func TestChaosHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"chaos", "--help"}, &out, io.Discard, noEnv); err != nil {
		t.Fatalf("chaos --help: %v", err)
	}
	want := []string{"Usage:\n  baton chaos [--short]", "-fault-for", "-recover"}
	want = append(want, chaos.FaultNames...)
	want = append(want, chaos.ClusterFaultNames...)
	for _, s := range want {
		if !strings.Contains(out.String(), s) {
			t.Errorf("chaos --help lacks %q:\n%s", s, out.String())
		}
	}
}

func TestWrap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, want string
	}{
		{"short", "a  b", "  x a b\n"},
		{"broken at the width", "aaa bbb ccc", "  x aaa\n    bbb\n    ccc\n"},
		{"a long word", "aa aaaaaaaaaaaa b", "  x aa\n    aaaaaaaaaaaa\n    b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := wrap("  x ", tt.text, 10, "    "); got != tt.want {
				t.Errorf("wrap(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

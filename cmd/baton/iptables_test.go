package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestIptablesFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string // in the printed rules
		not  []string
	}{
		{
			name: "defaults",
			args: nil,
			want: []string{"-A BATON_OUTPUT -m owner --uid-owner 1337 -j RETURN", "-A BATON_OUTPUT -m owner --gid-owner 1337 -j RETURN",
				"REDIRECT --to-ports 15001", "REDIRECT --to-ports 15006", "-A BATON_INBOUND -p tcp -j BATON_IN_REDIRECT",
				"-C OUTPUT -p tcp -j BATON_OUTPUT", "-C PREROUTING -p tcp -j BATON_INBOUND"},
		},
		{
			name: "UID, GID defaulting to it, ports",
			args: []string{"--proxy-uid", "4242", "--egress-port", "16001", "--ingress-port", "16006", "--admin-port", "16000"},
			want: []string{"--uid-owner 4242", "--gid-owner 4242", "--to-ports 16001", "--to-ports 16006", "--dport 16000 -j RETURN"},
		},
		{
			name: "no GID rule, listed inbound ports, exclusions",
			args: []string{"--proxy-gid=-1", "--inbound-ports", "8080", "--exclude-inbound-ports", "22",
				"--exclude-outbound-ports", "5432", "--exclude-outbound-cidrs", "10.96.0.0/12", "--ipv6=false"},
			want: []string{"--dport 8080 -j BATON_IN_REDIRECT", "--dport 22 -j RETURN", "-A BATON_OUTPUT -p tcp -m tcp --dport 5432 -j RETURN",
				"-A BATON_OUTPUT -d 10.96.0.0/12 -j RETURN"},
			not: []string{"--gid-owner", "-A BATON_INBOUND -p tcp -j BATON_IN_REDIRECT", "IPv6"},
		},
		{
			name: "no inbound interception",
			args: []string{"--inbound-ports", ""},
			not:  []string{"-j BATON_IN_REDIRECT\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"iptables", "--dry-run"}, tt.args...), &out, io.Discard, noEnv)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("output has %q:\n%s", n, out.String())
				}
			}
		})
	}
}

func TestIptablesUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--backend", "iptables"},
		{"--inbound-ports", "all"},
		{"--exclude-inbound-ports", "0"},
		{"--exclude-outbound-cidrs", "nope"},
		{"--ipv6=maybe"},
		{"--proxy-uid", "-5"},
		{"--ingress-port", "15001"},
		{"rules"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), append([]string{"iptables", "--dry-run"}, args...), io.Discard, &stderr, noEnv)
		var ue usageError
		if !errors.As(err, &ue) || exitCode(err) != 2 || !strings.Contains(stderr.String(), "--exclude-outbound-cidrs") {
			t.Errorf("%v: err %v (exit %d), stderr %q; want a usage error listing the flags", args, err, exitCode(err), stderr.String())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"iptables", "--help"}, &out, io.Discard, noEnv); err != nil ||
		!strings.Contains(out.String(), "--proxy-uid") || !strings.Contains(out.String(), "--cleanup") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"help"}, &out, io.Discard, noEnv); err != nil || !strings.Contains(out.String(), "baton iptables") {
		t.Errorf("baton help does not list iptables: %v", err)
	}
}

package trust_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/batonproxy/baton/trust"
)

func TestAddressGuard(t *testing.T) {
	t.Parallel()
	g := trust.NewAddressGuard([]string{"169.254.10.10:80", "api.example.com:443", "[fe80::1]:80"})
	tests := []struct {
		name string
		addr string
		deny bool
	}{
		{"metadata v4", "169.254.169.254:80", true},
		{"metadata v4 mapped in v6", "[::ffff:169.254.169.254]:80", true},
		{"aws metadata v6", "[fd00:ec2::254]:80", true},
		{"alibaba metadata", "100.100.100.200:80", true},
		{"link-local v6", "[fe80::2]:80", true},
		{"unspecified", "0.0.0.0:80", true},
		{"multicast", "224.0.0.1:80", true},
		{"listed link-local literal", "169.254.10.10:80", false},
		{"listed link-local v6 literal", "[fe80::1]:443", false},
		{"public", "93.184.216.34:443", false},
		{"loopback", "127.0.0.1:8080", true},
		{"loopback v6", "[::1]:8080", true},
		{"loopback mapped in v6", "[::ffff:127.0.0.1]:8080", true},
		{"private 10/8", "10.1.2.3:80", true},
		{"private 192.168/16", "192.168.1.1:80", true},
		{"private v6 ULA", "[fd12::1]:80", true},
		{"carrier-grade NAT", "100.64.0.1:80", true},
		{"this network", "0.1.2.3:80", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := g.Control("tcp", tc.addr, nil)
			if got := errors.Is(err, trust.ErrDeniedAddress); got != tc.deny {
				t.Errorf("Control(%s) = %v, want denied=%v", tc.addr, err, tc.deny)
			}
		})
	}
}

func TestNumericHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"2130706433": true, "0x7f000001": true, "0177.0.0.1": true, "127.1": true, "0x7f.1": true,
		"127.0.0.1": false, "::1": false, "api.example.com": false, "1e100.net": false, "": false, "a.0x1": false,
	} {
		if got := trust.NumericHost(host); got != want {
			t.Errorf("NumericHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestDialerRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	// The guard runs as the dialler's Control hook, i.e. on the resolved
	// address just before connect(2): no packet leaves for a refused one.
	g := trust.NewAddressGuard(nil)
	d := &net.Dialer{Timeout: time.Second, Control: g.Control}
	_, err := d.DialContext(context.Background(), "tcp", "169.254.169.254:80")
	if !errors.Is(err, trust.ErrDeniedAddress) {
		t.Fatalf("dial metadata: %v", err)
	}
	if trust.Sensitive(netip.MustParseAddr("8.8.8.8")) {
		t.Error("a public address is sensitive")
	}
}

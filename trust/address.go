package trust

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// ErrDeniedAddress reports a destination address egress refuses to dial.
var ErrDeniedAddress = errors.New("destination address refused")

// metadata lists the cloud instance-metadata addresses outside link-local
// ranges (AWS IPv6, Alibaba Cloud).
var metadata = [...]netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// internal lists ranges that reach inside the cluster or the host beyond
// what the standard library classifies: "this network" and carrier-grade NAT.
var internal = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
}

// Sensitive reports whether ip is an address an agent must not reach through
// egress unless the operator lists it explicitly: loopback, private
// (RFC 1918, fc00::/7), carrier-grade NAT, link-local (which holds the
// 169.254.169.254 metadata service), cloud metadata, unspecified and
// multicast addresses. IPv4-mapped IPv6 addresses count as their IPv4 form.
func Sensitive(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range internal {
		if p.Contains(ip) {
			return true
		}
	}
	for _, m := range metadata {
		if ip == m {
			return true
		}
	}
	return false
}

// AddressGuard checks dialled addresses after DNS resolution, so that a name
// resolving to a sensitive address is refused as an IP literal would be.
type AddressGuard struct {
	allowed map[netip.Addr]bool
}

// NewAddressGuard builds a guard that lets through the sensitive addresses
// that appear as IP literals in allow (host:port entries).
func NewAddressGuard(allow []string) *AddressGuard {
	g := &AddressGuard{allowed: map[netip.Addr]bool{}}
	for _, a := range allow {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			g.allowed[ip.Unmap()] = true
		}
	}
	return g
}

// Check returns ErrDeniedAddress for a sensitive address not listed.
func (g *AddressGuard) Check(ip netip.Addr) error {
	ip = ip.Unmap()
	if Sensitive(ip) && !g.allowed[ip] {
		return fmt.Errorf("%w: %s is loopback, private, link-local, metadata or otherwise internal; list it in external.allow as an IP to allow it", ErrDeniedAddress, ip)
	}
	return nil
}

// NumericHost reports whether host is an IPv4 address written in a form other
// than dotted decimal (2130706433, 0x7f000001, 0177.0.0.1, 127.1): resolvers
// disagree on such forms, so egress refuses them rather than guess.
func NumericHost(host string) bool {
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	for _, part := range strings.Split(host, ".") {
		if part == "" {
			return false
		}
		p := strings.ToLower(part)
		if strings.HasPrefix(p, "0x") {
			p = p[2:]
			if p == "" || strings.Trim(p, "0123456789abcdef") != "" {
				return false
			}
			continue
		}
		if strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// Control is a net.Dialer Control function applying Check to the address
// about to be dialled.
func (g *AddressGuard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address %q", ErrDeniedAddress, address)
	}
	return g.Check(ap.Addr())
}

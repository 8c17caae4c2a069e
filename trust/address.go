package trust

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
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

// Sensitive reports whether ip is an address an agent must not reach through
// egress unless the operator lists it explicitly: link-local (which holds
// the 169.254.169.254 metadata service), cloud metadata, unspecified and
// multicast addresses.
func Sensitive(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() ||
		ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
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
		return fmt.Errorf("%w: %s is link-local, metadata or otherwise reserved", ErrDeniedAddress, ip)
	}
	return nil
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

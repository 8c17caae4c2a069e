package proxy

import (
	"net"
	"net/netip"
)

// SetOriginalDst replaces how a transparent Server finds a connection's
// original destination, so that tests can redirect without iptables. Call
// it before Start.
func SetOriginalDst(s *Server, f func(net.Conn) (netip.AddrPort, bool, error)) {
	s.tp.origDst = f
}

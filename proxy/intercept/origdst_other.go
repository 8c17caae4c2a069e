//go:build !linux

package intercept

import (
	"net"
	"net/netip"
)

// originalDst needs Linux's netfilter: elsewhere no connection is ever
// redirected.
func originalDst(net.Conn, bool) (netip.AddrPort, error) {
	return netip.AddrPort{}, ErrNoOriginalDst
}

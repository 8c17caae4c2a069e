package intercept

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// SO_ORIGINAL_DST (linux/netfilter_ipv4.h) and IP6T_SO_ORIGINAL_DST
// (linux/netfilter_ipv6/ip6_tables.h) share the number 80; the level
// (SOL_IP or SOL_IPV6) tells them apart.
const (
	soOriginalDst     = 80
	ip6tSoOriginalDst = 80
)

// ErrNoOriginalDst reports a connection the kernel holds no NAT record for
// (conntrack is not loaded, or the connection was not redirected).
var ErrNoOriginalDst = errors.New("intercept: no original destination for this connection")

type ctxKey struct{}

// WithOriginalDst returns ctx carrying a redirected connection's original
// destination.
func WithOriginalDst(ctx context.Context, dst netip.AddrPort) context.Context {
	return context.WithValue(ctx, ctxKey{}, dst)
}

// OriginalDstFromContext returns the original destination of the
// connection a request arrived on, when it was redirected by the rules
// (transparent interception); ok is false for a connection made to the
// listener itself (explicit proxy mode).
func OriginalDstFromContext(ctx context.Context) (dst netip.AddrPort, ok bool) {
	dst, ok = ctx.Value(ctxKey{}).(netip.AddrPort)
	return dst, ok
}

// OriginalDst returns the destination c had before a nat REDIRECT rule
// rewrote it to the listener, and whether it differs from c's local address
// (whether c was redirected at all). A connection that was not redirected
// has its local address as original destination, or no NAT record at all
// (ErrNoOriginalDst is then reported as redirected=false, err=nil).
func OriginalDst(c net.Conn) (dst netip.AddrPort, redirected bool, err error) {
	local, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false, fmt.Errorf("intercept: %T is not a TCP connection", c.LocalAddr())
	}
	la := local.AddrPort()
	dst, err = originalDst(c, la.Addr().Unmap().Is4())
	if errors.Is(err, ErrNoOriginalDst) {
		return la, false, nil
	}
	if err != nil {
		return netip.AddrPort{}, false, err
	}
	return dst, !sameAddrPort(dst, la), nil
}

func sameAddrPort(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// parseSockaddrIn decodes a struct sockaddr_in as getsockopt(SOL_IP,
// SO_ORIGINAL_DST) writes it: family in host order, then port and address in
// network order.
func parseSockaddrIn(b []byte, family uint16) (netip.AddrPort, error) {
	if len(b) < 8 {
		return netip.AddrPort{}, fmt.Errorf("intercept: sockaddr_in of %d bytes", len(b))
	}
	if f := binary.NativeEndian.Uint16(b[0:2]); f != family {
		return netip.AddrPort{}, fmt.Errorf("intercept: original destination has address family %d, want %d", f, family)
	}
	port := binary.BigEndian.Uint16(b[2:4])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), nil
}

// parseSockaddrIn6 decodes a struct sockaddr_in6 as getsockopt(SOL_IPV6,
// IP6T_SO_ORIGINAL_DST) writes it: family, port, flow info, address, scope.
func parseSockaddrIn6(b []byte, family uint16) (netip.AddrPort, error) {
	if len(b) < 24 {
		return netip.AddrPort{}, fmt.Errorf("intercept: sockaddr_in6 of %d bytes", len(b))
	}
	if f := binary.NativeEndian.Uint16(b[0:2]); f != family {
		return netip.AddrPort{}, fmt.Errorf("intercept: original destination has address family %d, want %d", f, family)
	}
	port := binary.BigEndian.Uint16(b[2:4])
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), nil
}

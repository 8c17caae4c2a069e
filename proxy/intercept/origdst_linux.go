package intercept

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// originalDst asks conntrack, through the socket, for c's destination
// before NAT: SOL_IP for an IPv4 connection (an IPv4-mapped one on a
// dual-stack socket included), SOL_IPV6 for an IPv6 one.
func originalDst(c net.Conn, v4 bool) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("intercept: %T has no file descriptor", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("intercept: %w", err)
	}
	var (
		buf  [unix.SizeofSockaddrInet6]byte
		n    uint32
		serr error
	)
	err = rc.Control(func(fd uintptr) {
		level, opt := unix.SOL_IP, soOriginalDst
		n = unix.SizeofSockaddrInet4
		if !v4 {
			level, opt = unix.SOL_IPV6, ip6tSoOriginalDst
			n = unix.SizeofSockaddrInet6
		}
		serr = getsockopt(int(fd), level, opt, buf[:], &n)
	})
	if err == nil {
		err = serr
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return netip.AddrPort{}, ErrNoOriginalDst
	case err != nil:
		return netip.AddrPort{}, fmt.Errorf("intercept: getsockopt SO_ORIGINAL_DST: %w", err)
	case v4:
		return parseSockaddrIn(buf[:n], unix.AF_INET)
	default:
		return parseSockaddrIn6(buf[:n], unix.AF_INET6)
	}
}

// getsockopt fills b with the option's value; x/sys/unix has no getter for
// a sockaddr-valued option.
func getsockopt(fd, level, opt int, b []byte, n *uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(n)), 0)
	if e != 0 {
		return e
	}
	return nil
}

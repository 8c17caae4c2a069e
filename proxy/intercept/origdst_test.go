package intercept

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

// sockaddr builds what the kernel writes for SO_ORIGINAL_DST: family in
// host order, then port and address in network order.
func sockaddr(family uint16, ap netip.AddrPort) []byte {
	b := make([]byte, 28)
	binary.NativeEndian.PutUint16(b[0:2], family)
	binary.BigEndian.PutUint16(b[2:4], ap.Port())
	if ap.Addr().Is4() {
		a := ap.Addr().As4()
		copy(b[4:8], a[:])
		return b[:16]
	}
	binary.BigEndian.PutUint32(b[4:8], 0x12345) // flow info, ignored
	a := ap.Addr().As16()
	copy(b[8:24], a[:])
	binary.NativeEndian.PutUint32(b[24:28], 3) // scope id, ignored
	return b
}

func TestParseSockaddr(t *testing.T) {
	t.Parallel()
	const inet, inet6 = 2, 10
	v4 := netip.MustParseAddrPort("10.77.0.2:8080")
	if got, err := parseSockaddrIn(sockaddr(inet, v4), inet); err != nil || got != v4 {
		t.Errorf("IPv4: %v %v", got, err)
	}
	v6 := netip.MustParseAddrPort("[2001:db8::2]:443")
	if got, err := parseSockaddrIn6(sockaddr(inet6, v6), inet6); err != nil || got != v6 {
		t.Errorf("IPv6: %v %v", got, err)
	}
	if _, err := parseSockaddrIn(sockaddr(inet6, v6), inet); err == nil {
		t.Error("an IPv6 address read as IPv4")
	}
	if _, err := parseSockaddrIn(make([]byte, 4), inet); err == nil {
		t.Error("a short sockaddr_in accepted")
	}
	if _, err := parseSockaddrIn6(sockaddr(inet, v4), inet6); err == nil {
		t.Error("a sockaddr_in read as sockaddr_in6")
	}
}

func TestOriginalDstContext(t *testing.T) {
	t.Parallel()
	if _, ok := OriginalDstFromContext(context.Background()); ok {
		t.Error("an empty context has an original destination")
	}
	want := netip.MustParseAddrPort("[2001:db8::2]:8080")
	if got, ok := OriginalDstFromContext(WithOriginalDst(context.Background(), want)); !ok || got != want {
		t.Errorf("got %v %v", got, ok)
	}
}

// A connection made to the listener itself was not redirected, whether or
// not conntrack tracks it.
func TestOriginalDstNotRedirected(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dst, redirected, err := OriginalDst(s)
	if err != nil || redirected || dst.String() != l.Addr().String() {
		t.Errorf("OriginalDst = %v, %v, %v; want %s, not redirected", dst, redirected, err, l.Addr())
	}
	if _, _, err := OriginalDst(&net.UnixConn{}); err == nil {
		t.Error("a non-TCP connection has an original destination")
	}
}

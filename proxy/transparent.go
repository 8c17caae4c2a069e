package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/proxy/intercept"
	"github.com/batonproxy/baton/trust"
)

// Transparent interception (intercept.mode: transparent): the nat rules of
// `baton iptables` redirect the agent's outbound TCP to egress and inbound
// TCP to ingress. Each listener asks the kernel for a redirected
// connection's original destination and carries it on the connection's
// context (intercept.OriginalDstFromContext); a connection made to the
// listener itself carries none and is served exactly as in proxy mode.
//
// Egress looks at a redirected connection's first bytes: HTTP goes to the
// usual chain, where the resolver maps Host to a peer or an external host
// (viaOriginal); a TLS ClientHello is spliced, as raw TCP, to the original
// destination when its server name is allowed by external.allow; anything
// else only when the original IP:port is listed there exactly. Ingress
// delivers a redirected connection to the agent's port it was sent to, on
// upstream's host, when that port is upstream's or listed in
// intercept.inbound_ports.

// serverFirstWait is how long egress waits for the first bytes of a
// redirected connection to an exactly listed IP:port before tunnelling it
// anyway: protocols where the server speaks first (SMTP, MySQL) send
// nothing until then.
const serverFirstWait = 300 * time.Millisecond

// maxSniff bounds the bytes read to decide what a connection speaks.
const maxSniff = 64<<10 + 5

// transparent holds what the listeners of a transparent Baton need.
type transparent struct {
	log    *slog.Logger
	rs     *resolver // external.allow
	guard  *trust.AddressGuard
	dialer *net.Dialer
	// exact holds the external.allow entries that are IP:port literals:
	// the only destinations non-HTTP, non-TLS bytes may be tunnelled to.
	exact map[netip.AddrPort]bool
	// detect bounds the wait for a redirected connection's first bytes.
	detect time.Duration
	// upstream and ports are where ingress delivers, by original port.
	upstream *url.URL
	upPort   uint16
	ports    map[uint16]*url.URL
	// terminator terminates the TLS of listed server names (connect.go).
	terminator *terminator
	// origDst finds a connection's original destination; tests replace it.
	origDst func(net.Conn) (netip.AddrPort, bool, error)
}

// newTransparent returns nil in proxy mode. In transparent mode it makes
// the external transport dial a redirected request's original destination
// instead of resolving its Host again.
func newTransparent(c *config.Config, guard *trust.AddressGuard, external *http.Transport, log *slog.Logger) *transparent {
	if !c.Transparent() {
		return nil
	}
	tp := &transparent{
		log: log, rs: newResolver(c), guard: guard,
		dialer:  &net.Dialer{Timeout: c.Timeouts.Dial.D(), KeepAlive: 30 * time.Second, Control: guard.Control},
		exact:   map[netip.AddrPort]bool{},
		detect:  c.Timeouts.ReadHeader.D(),
		origDst: intercept.OriginalDst,
		ports:   map[uint16]*url.URL{},
	}
	if tp.detect <= 0 {
		tp.detect = config.DefaultReadHeader
	}
	for _, a := range c.External.Allow {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			tp.exact[unmap(ap)] = true
		}
	}
	if u := c.UpstreamURL; u != nil {
		tp.upstream, tp.upPort = u, urlPort(u)
		for _, p := range c.Intercept.InboundPorts {
			v := *u
			v.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(p))
			tp.ports[uint16(p)] = &v
		}
	}
	dial := external.DialContext
	external.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dst, ok := intercept.OriginalDstFromContext(ctx); ok {
			// Where the agent connected, as its own resolver chose: the
			// Host was checked against external.allow, the address is
			// checked by the guard when dialled.
			addr = dst.String()
		}
		return dial(ctx, network, addr)
	}
	return tp
}

func urlPort(u *url.URL) uint16 {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return uint16(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// redirectedConn is a connection the rules redirected, with its original
// destination and the bytes egress read to tell what it speaks.
type redirectedConn struct {
	net.Conn
	dst    netip.AddrPort
	prefix []byte
}

func (c *redirectedConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// connContext is every listener's http.Server.ConnContext: a redirected
// connection's original destination goes on its context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*redirectedConn); ok {
		return intercept.WithOriginalDst(ctx, rc.dst)
	}
	return withTarget(ctx, c) // a terminated TLS connection (connect.go)
}

// upstreamFor is where ingress delivers: upstream, or, for a connection
// redirected from another of the agent's allowed ports, that port on
// upstream's host. A nil receiver (proxy mode) always gives upstream.
func (tp *transparent) upstreamFor(ctx context.Context, upstream *url.URL) *url.URL {
	if tp == nil {
		return upstream
	}
	if dst, ok := intercept.OriginalDstFromContext(ctx); ok && dst.Port() != tp.upPort {
		if u := tp.ports[dst.Port()]; u != nil {
			return u
		}
	}
	return upstream
}

// listen binds listener i (egress, ingress, admin) at addr; in transparent
// mode egress and ingress serve redirected connections.
func (s *Server) listen(i int, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil || s.tp == nil {
		return l, err
	}
	switch i {
	case 0:
		ls := []net.Listener{l}
		// Locally made IPv6 connections are redirected to ::1, IPv4 ones
		// to 127.0.0.1: a loopback egress listens on both.
		if other := otherLoopback(l.Addr()); other != "" {
			if l6, err := net.Listen("tcp", other); err == nil {
				ls = append(ls, l6)
			} else {
				s.log.Warn("transparent: egress not listening on the other loopback address; that family is not intercepted",
					"addr", other, "error", err)
			}
		}
		return newEgressListener(s.tp, ls), nil
	case 1:
		return &ingressListener{Listener: l, tp: s.tp}, nil
	}
	return l, nil
}

// otherLoopback returns ::1 with a's port when a is 127.0.0.1, and the
// reverse.
func otherLoopback(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	ap := unmap(ta.AddrPort())
	switch ap.Addr() {
	case netip.MustParseAddr("127.0.0.1"):
		return netip.AddrPortFrom(netip.IPv6Loopback(), ap.Port()).String()
	case netip.IPv6Loopback():
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String()
	}
	return ""
}

// ingressListener hands redirected connections to the agent's allowed
// ports on, with their original destination, and closes the others.
type ingressListener struct {
	net.Listener
	tp *transparent
}

func (l *ingressListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		dst, redirected, err := l.tp.origDst(c)
		switch {
		case err != nil:
			l.tp.log.Warn("transparent: ingress connection closed: no original destination", "remote", c.RemoteAddr().String(), "error", err)
			c.Close()
		case !redirected:
			return c, nil
		case dst.Port() != l.tp.upPort && l.tp.ports[dst.Port()] == nil:
			l.tp.log.Warn("transparent: ingress connection refused: port is neither upstream's nor in intercept.inbound_ports",
				"remote", c.RemoteAddr().String(), "original", dst.String())
			c.Close()
		default:
			return &redirectedConn{Conn: c, dst: dst}, nil
		}
	}
}

// egressListener accepts on one or two listeners (127.0.0.1 and ::1).
// A connection made to it directly is handed on at once; a redirected one
// is read from in its own goroutine, so that a slow client holds up no
// other, until it is known to be HTTP (handed on), or TLS or other bytes
// (tunnelled or refused here).
type egressListener struct {
	tp    *transparent
	ls    []net.Listener
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

func newEgressListener(tp *transparent, ls []net.Listener) *egressListener {
	l := &egressListener{tp: tp, ls: ls, conns: make(chan net.Conn), errs: make(chan error, len(ls)), done: make(chan struct{})}
	for _, inner := range ls {
		go l.acceptLoop(inner)
	}
	return l
}

func (l *egressListener) acceptLoop(inner net.Listener) {
	for {
		c, err := inner.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(10 * time.Millisecond) // as http.Server backs off
				continue
			}
			select {
			case l.errs <- err:
			case <-l.done:
			}
			return
		}
		dst, redirected, err := l.tp.origDst(c)
		switch {
		case err != nil:
			l.tp.log.Warn("transparent: egress connection closed: no original destination", "error", err)
			c.Close()
		case !redirected:
			l.hand(c)
		default:
			go l.tp.sniff(c, dst, l.hand)
		}
	}
}

// hand passes c to Accept, or closes it once the listener is closed.
func (l *egressListener) hand(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *egressListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *egressListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		for _, inner := range l.ls {
			if e := inner.Close(); e != nil && err == nil {
				err = e
			}
		}
	})
	return err
}

func (l *egressListener) Addr() net.Addr { return l.ls[0].Addr() }

// sniff reads a redirected connection's first bytes and serves it by what
// they are.
func (tp *transparent) sniff(c net.Conn, dst netip.AddrPort, hand func(net.Conn)) {
	listed := tp.exact[unmap(dst)]
	wait := tp.detect
	if listed {
		wait = serverFirstWait
	}
	buf := make([]byte, 0, 2048)
	proto, sni := intercept.NeedMore, ""
	c.SetReadDeadline(time.Now().Add(wait))
	for proto == intercept.NeedMore && len(buf) < maxSniff {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if proto, sni = intercept.Sniff(buf); proto != intercept.NeedMore {
			break
		}
		if err != nil {
			timeout := errors.Is(err, os.ErrDeadlineExceeded)
			switch {
			case timeout && listed:
				proto = intercept.Other // the server speaks first, or a slow client: listed anyway
			case timeout && len(buf) == 0:
				tp.refuse(dst, "", "the client sent nothing within "+wait.String()+" (a protocol where the server speaks first needs its IP:port in external.allow)")
			case timeout:
				tp.refuse(dst, "", "the first bytes are neither HTTP nor a complete TLS ClientHello within "+wait.String())
			default:
				tp.log.Debug("transparent: egress connection ended before its first bytes were read", "original", dst.String(), "error", err)
			}
			if proto == intercept.NeedMore {
				c.Close()
				return
			}
		}
	}
	c.SetReadDeadline(time.Time{})
	if proto == intercept.NeedMore {
		proto = intercept.Other // more than maxSniff undecided
	}
	switch {
	case proto == intercept.HTTP:
		hand(&redirectedConn{Conn: c, dst: dst, prefix: buf})
	case proto == intercept.TLS && sni != "":
		hostport := net.JoinHostPort(strings.ToLower(strings.TrimSuffix(sni, ".")), strconv.Itoa(int(dst.Port())))
		if !tp.rs.allowed(hostport) {
			tp.refuse(dst, sni, "TLS server name "+hostport+" is not in external.allow")
			c.Close()
			return
		}
		if name, _ := splitHost(hostport); tp.terminator.listed(name, dst.Port()) {
			tp.terminator.terminate(&redirectedConn{Conn: c, dst: dst, prefix: buf}, name, dst.Port())
			return
		}
		tp.tunnel(c, dst, buf, "tls", sni)
	case proto == intercept.TLS && tp.terminator.listed(dst.Addr().String(), dst.Port()):
		// No server name: a client addressing the server by IP, which
		// intercept.tls lists.
		tp.terminator.terminate(&redirectedConn{Conn: c, dst: dst, prefix: buf}, dst.Addr().String(), dst.Port())
	case listed:
		tp.tunnel(c, dst, buf, proto.String(), sni)
	default:
		reason := "non-HTTP bytes to an address not listed exactly (IP:port) in external.allow"
		if proto == intercept.TLS {
			reason = "TLS without a server name to an address not listed exactly (IP:port) in external.allow"
		}
		tp.refuse(dst, sni, reason)
		c.Close()
	}
}

func (tp *transparent) refuse(dst netip.AddrPort, sni, reason string) {
	attrs := []any{"side", "egress", "original", dst.String(), "reason", reason}
	if sni != "" {
		attrs = append(attrs, "sni", sni)
	}
	tp.log.Warn("transparent: connection refused", attrs...)
}

// tunnel splices c to its original destination as raw TCP, prefix first;
// the address guard vets the destination as for any external fetch.
func (tp *transparent) tunnel(c net.Conn, dst netip.AddrPort, prefix []byte, proto, sni string) {
	up, err := tp.dialer.Dial("tcp", dst.String())
	if err != nil {
		if errors.Is(err, trust.ErrDeniedAddress) {
			tp.refuse(dst, sni, err.Error())
		} else {
			tp.log.Warn("transparent: tunnel destination unreachable", "original", dst.String(), "sni", sni, "error", err)
		}
		c.Close()
		return
	}
	start := time.Now()
	var sent, received int64
	if len(prefix) > 0 {
		n, err := up.Write(prefix)
		sent += int64(n)
		if err != nil {
			c.Close()
			up.Close()
			return
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, _ := io.Copy(up, c) // *net.TCPConn on both sides: splice(2)
		sent += n
		closeWrite(up)
	}()
	received, _ = io.Copy(c, up)
	closeWrite(c)
	wg.Wait()
	c.Close()
	up.Close()
	tp.log.Info("transparent: tunnel", "side", "egress", "original", dst.String(), "protocol", proto, "sni", sni,
		"bytes_sent", sent, "bytes_received", received, "duration_ms", time.Since(start).Milliseconds())
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// peersByHost indexes peers by their URL's host (a name, lowercased, or an
// IP literal in its canonical form), for calls redirected to a peer's
// address.
func peersByHost(c *config.Config) map[string][]string {
	m := map[string][]string{}
	for name, p := range c.Peers {
		if p.ParsedURL == nil {
			continue
		}
		h := hostKey(p.ParsedURL.Hostname())
		m[h] = append(m[h], name)
	}
	return m
}

func hostKey(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

// viaOriginal resolves a request that arrived on a redirected connection:
// a handoff when Host names a peer, or a peer's URL host, or (Host being an
// IP or absent) the original destination is a peer's URL host; otherwise an
// external fetch sent to the original destination, allowed by Host name and
// the original port.
func (rs *resolver) viaOriginal(w http.ResponseWriter, r *http.Request, in *middleware.Info, name string, dst netip.AddrPort, next http.Handler) {
	dst = unmap(dst)
	ip, err := netip.ParseAddr(name)
	isIP := err == nil
	if isIP && ip.Unmap() != dst.Addr() {
		problem.New(r, problem.DeniedAddress, "Host names "+name+" but the connection was made to "+dst.Addr().String()).
			With("destination", dst.String()).Write(w)
		return
	}
	peer, ok := "", false
	if _, named := rs.peers[name]; named {
		peer, ok = name, true
	} else if name != "" && !isIP {
		peer, ok = rs.peerAt(name, dst.Port())
	} else {
		peer, ok = rs.peerAt(dst.Addr().String(), dst.Port())
	}
	if ok {
		p := rs.peers[peer]
		in.From, in.To, in.Target, in.MaxHops = rs.agent, peer, p.url, p.maxHops
		next.ServeHTTP(w, r)
		return
	}
	if name == "" {
		name = dst.Addr().String()
	}
	if trust.NumericHost(name) {
		problem.New(r, problem.DeniedAddress, "destination "+name+" is an IP address in a non-standard form; write it as an IP literal").
			With("destination", name).Write(w)
		return
	}
	port := strconv.Itoa(int(dst.Port()))
	hostport := net.JoinHostPort(name, port)
	if !rs.allowed(hostport) {
		problem.New(r, problem.UnknownDestination, "destination "+hostport+
			" is neither a configured peer nor in external.allow").With("destination", hostport).Write(w)
		return
	}
	rs.external(in, hostport)
	in.Target = &url.URL{Scheme: externalScheme(r, port), Host: hostport}
	next.ServeHTTP(w, r)
}

// peerAt finds the peer whose URL host is host and that has port: its
// URL's port or one of its ports (peers.<name>.ports). A call to a peer's
// host on a port it does not have is no handoff.
func (rs *resolver) peerAt(host string, port uint16) (string, bool) {
	for _, n := range rs.byHost[hostKey(host)] {
		p := rs.peers[n]
		if urlPort(p.url) == port || slices.Contains(p.ports, port) {
			return n, true
		}
	}
	return "", false
}

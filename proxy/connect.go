package proxy

// HTTPS through the egress: CONNECT tunnels, and TLS terminated for the
// destinations the TLS interceptor lists (Plugins.TLSIntercept).
//
// An agent with Baton as its HTTPS proxy asks CONNECT host:port. For a
// listed destination the agent's TLS ends here, with a certificate for the
// host that this Baton's CA minted, and each request inside is served by the
// egress listener's own server as an external call to https://host:port:
// the same chain as a plain-HTTP call (policy, the journal,
// untrusted-content labels, records, metrics); Baton originates TLS to the
// real server and verifies it. In transparent mode a redirected TLS
// connection whose server name is listed is terminated the same way. Any
// other allowed destination is tunnelled as raw bytes; a destination that is
// neither a peer nor allowed is refused like any other.

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust"
)

// connect serves CONNECT requests, once destination resolution has
// resolved and allowed them; other requests go on to next.
func (s *Server) connect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			next.ServeHTTP(w, r)
			return
		}
		in := middleware.InfoFromContext(r.Context())
		switch {
		case in.External == "":
			problem.New(r, problem.BadRequest, "CONNECT to a peer: a handoff goes to the egress in plain HTTP, for its Baton to carry").
				With("destination", r.Host).Write(w)
			return
		case r.ProtoMajor != 1:
			problem.Write(w, r, problem.BadRequest, "CONNECT is served over HTTP/1.1")
			return
		}
		in.Delivered = true
		host, port := splitHost(in.External)
		n, _ := strconv.ParseUint(port, 10, 16)
		if s.terminator.listed(host, uint16(n)) {
			c, err := establish(w)
			if err != nil {
				in.Err = err
				return
			}
			s.terminator.terminate(c, host, uint16(n))
			return
		}
		s.tunnel(w, r, in)
	})
}

// establish takes the connection over from the server and answers the
// CONNECT: the tunnel is open. Bytes the client sent ahead stay first.
func establish(w http.ResponseWriter) (net.Conn, error) {
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{}) // the server's read timeout was for the CONNECT, not the tunnel
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	if n := rw.Reader.Buffered(); n > 0 {
		ahead, _ := rw.Reader.Peek(n)
		return &prefixedConn{Conn: c, prefix: ahead}, nil
	}
	return c, nil
}

// tunnel splices the agent's connection to the destination as raw bytes:
// Baton sees none of what passes (TLS the agent speaks end to end). The
// address guard vets the destination as for any external call.
func (s *Server) tunnel(w http.ResponseWriter, r *http.Request, in *middleware.Info) {
	up, err := s.dialer.DialContext(r.Context(), "tcp", in.External)
	if err != nil {
		in.Err = err
		c := problem.UpstreamUnavailable
		if errors.Is(err, trust.ErrDeniedAddress) {
			c = problem.DeniedAddress
		}
		problem.New(r, c, "external host "+in.External+" could not be reached: "+reason(err)).
			With("destination", in.External).Write(w)
		return
	}
	c, err := establish(w)
	if err != nil {
		up.Close()
		in.Err = err
		return
	}
	splice(c, up)
}

// splice copies both ways until both sides are done.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, a)
		closeWrite(b)
	}()
	_, _ = io.Copy(a, b)
	closeWrite(a)
	wg.Wait()
	a.Close()
	b.Close()
}

// prefixedConn reads prefix before the connection's own bytes.
type prefixedConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixedConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// handshakeTimeout bounds an agent's TLS handshake with Baton.
const handshakeTimeout = 10 * time.Second

// terminator terminates the TLS of listed destinations and hands the
// connections to the egress listener's server.
type terminator struct {
	ic      TLSInterceptor // nil: nothing is listed
	conns   *connQueue
	timeout time.Duration // for the handshake
}

func (t *terminator) listed(host string, port uint16) bool {
	return t != nil && t.ic != nil && t.ic.Listed(host, port)
}

// terminate completes the agent's TLS handshake with a certificate for
// host, then serves the connection's requests as calls to host:port. A
// client that refuses the certificate is counted and closed.
func (t *terminator) terminate(c net.Conn, host string, port uint16) {
	tc := tls.Server(&interceptedConn{Conn: c, target: net.JoinHostPort(host, strconv.Itoa(int(port)))},
		t.ic.ServerConfig(host, port))
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		t.ic.Refused(host, port, err)
		tc.Close()
		return
	}
	t.conns.hand(tc)
}

// interceptedConn is the agent's side of a terminated connection, and the
// destination it asked for.
type interceptedConn struct {
	net.Conn
	target string
}

type targetKey struct{}

// withTarget puts a terminated connection's destination on its context
// (connContext).
func withTarget(ctx context.Context, c net.Conn) context.Context {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ctx
	}
	ic, ok := tc.NetConn().(*interceptedConn)
	if !ok {
		return ctx
	}
	ctx = context.WithValue(ctx, targetKey{}, ic.target)
	if rc, ok := ic.Conn.(*redirectedConn); ok {
		ctx = connContext(ctx, rc)
	}
	return ctx
}

// terminated makes each request of a terminated connection absolute, to
// https://its destination, before anything else sees it: it is an external
// call, never one of the agent's paths on the egress nor a base-URL route,
// and goes where the agent's TLS was going whatever its Host says.
func terminated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if target, ok := r.Context().Value(targetKey{}).(string); ok {
			r.URL.Scheme, r.URL.Host = "https", target
		}
		next.ServeHTTP(w, r)
	})
}

// connQueue is a listener of the connections handed to it: the egress
// server serves terminated connections from it beside its own listener.
type connQueue struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand passes c to Accept, or closes it once the queue is closed.
func (q *connQueue) hand(c net.Conn) {
	select {
	case q.conns <- c:
	case <-q.done:
		c.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

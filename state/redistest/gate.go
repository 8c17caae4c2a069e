package redistest

import (
	"net"
	"sync"
	"testing"
)

// Gate is a TCP proxy in front of a Redis server that can hold the
// server's replies: commands still reach the server and run, but their
// clients do not hear of it until the gate opens. A test uses it to stop a
// client in the moment after its write was made and before it knows.
type Gate struct {
	Addr string

	mu     sync.Mutex
	held   bool
	opened *sync.Cond
}

// NewGate starts a gate in front of the server at addr, open; the test's
// cleanup closes it.
func NewGate(t testing.TB, addr string) *Gate {
	t.Helper()
	g := &Gate{}
	g.opened = sync.NewCond(&g.mu)
	g.Addr = relay(t, addr, g.pipe)
	t.Cleanup(g.Open) // before relay's cleanup waits for the connections
	return g
}

// relay listens on a loopback port and relays each connection to the
// server at addr, each way through pipe (replies: the server's side). It
// returns the address it listens on; the test's cleanup closes it and waits
// for its connections.
func relay(t testing.TB, addr string, pipe func(dst, src net.Conn, replies bool)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		conns.Wait()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			conns.Add(2)
			go func() { defer conns.Done(); pipe(s, c, false) }()
			go func() { defer conns.Done(); pipe(c, s, true) }()
		}
	}()
	return l.Addr().String()
}

// Hold keeps the replies read from now on in the gate.
func (g *Gate) Hold() {
	g.mu.Lock()
	g.held = true
	g.mu.Unlock()
}

// Open passes the replies held, and every one after.
func (g *Gate) Open() {
	g.mu.Lock()
	g.held = false
	g.mu.Unlock()
	g.opened.Broadcast()
}

// pipe copies from src to dst; replies (the server's side) wait while the
// gate holds them.
func (g *Gate) pipe(dst, src net.Conn, replies bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if replies {
				g.mu.Lock()
				for g.held {
					g.opened.Wait()
				}
				g.mu.Unlock()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

package redistest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Distant starts a TCP proxy in front of the Redis server at url that
// delivers every chunk of bytes, each way, oneWay after it read it: a Redis
// across a network, for benchmarks of what a round trip costs a request.
// It returns the proxy's redis:// URL; the test's cleanup closes it. The
// round trip it adds is 2×oneWay and the timer's lateness (Go's timers wake
// within tens of microseconds on Linux).
func Distant(t testing.TB, url string, oneWay time.Duration) string {
	t.Helper()
	addr := url[len("redis://"):]
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
			go func() { defer conns.Done(); delayed(s, c, oneWay) }()
			go func() { defer conns.Done(); delayed(c, s, oneWay) }()
		}
	}()
	return "redis://" + l.Addr().String()
}

// delayed copies from src to dst, each chunk written d after it was read,
// in order.
func delayed(dst, src net.Conn, d time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	chunks := make(chan chunk, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer dst.Close()
		for c := range chunks {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.b); err != nil {
				src.Close() // the reader below stops
				for range chunks {
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunks <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now().Add(d)}
		}
		if err != nil {
			break
		}
	}
	close(chunks)
	<-done
	src.Close()
}

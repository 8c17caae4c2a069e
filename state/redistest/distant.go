package redistest

import (
	"net"
	"strings"
	"testing"
	"time"
)

// Distant starts a TCP proxy in front of the Redis server at url that
// delivers every chunk of bytes, each way, oneWay after it read it: a Redis
// across a network, for benchmarks of what a round trip costs a request.
// It returns the proxy's redis:// URL; the test's cleanup closes it. The
// round trip it adds is 2×oneWay and the timers' lateness, which can be most
// of a millisecond each way (250µs asked made 2.4 ms a round trip on a
// 2-core Linux machine): measure the round trip rather than assume it.
func Distant(t testing.TB, url string, oneWay time.Duration) string {
	t.Helper()
	return "redis://" + relay(t, strings.TrimPrefix(url, "redis://"), func(dst, src net.Conn, _ bool) {
		delayed(dst, src, oneWay)
	})
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

package proxy

import (
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// TransportOptions tunes the shared outbound transport.
type TransportOptions struct {
	Dial           time.Duration // connect timeout
	UpstreamHeader time.Duration // time to response headers; past it, 504
	// Control, when set, vets each address after DNS resolution, before
	// the connection is made.
	Control func(network, address string, c syscall.RawConn) error
}

// NewTransport returns the tuned *http.Transport that every outbound hop of a
// Baton shares: keep-alive pools sized for a sidecar fanning out to a handful
// of peers at high concurrency, no transparent compression (bodies pass
// through as the agent sent them), and no proxy from the environment (Baton
// is the proxy).
func NewTransport(o TransportOptions) *http.Transport {
	d := &net.Dialer{Timeout: o.Dial, KeepAlive: 30 * time.Second, Control: o.Control}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    512,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  o.UpstreamHeader,
		ExpectContinueTimeout:  time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		DisableCompression:     true,
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: 1 << 20,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
}

// BufferPool hands httputil.ReverseProxy reusable 32 KiB copy buffers so that
// a response does not allocate its own.
type BufferPool struct{ p sync.Pool }

// NewBufferPool returns an empty pool.
func NewBufferPool() *BufferPool {
	return &BufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

// Get returns a buffer.
func (b *BufferPool) Get() []byte { return *(b.p.Get().(*[]byte)) }

// Put returns a buffer to the pool.
func (b *BufferPool) Put(buf []byte) {
	if cap(buf) < 32<<10 {
		return
	}
	buf = buf[:32<<10]
	b.p.Put(&buf)
}

package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/batonproxy/baton/middleware"
)

// TransportOptions tunes the shared outbound transport.
type TransportOptions struct {
	Dial           time.Duration // connect timeout
	UpstreamHeader time.Duration // time to response headers; past it, 504
	// Control, when set, vets each address after DNS resolution, before
	// the connection is made.
	Control func(network, address string, c syscall.RawConn) error
	// Roots verify the servers it reaches over TLS; nil: the system roots.
	Roots *x509.CertPool
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
		TLSClientConfig:        &tls.Config{RootCAs: o.Roots, MinVersion: tls.VersionTLS12},
	}
}

// ExternalRoots returns the system roots with the CA certificates of the
// PEM file at path added (external.ca_file); nil for no path.
func ExternalRoots(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("external.ca_file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("external.ca_file: %s holds no PEM certificate", path)
	}
	return roots, nil
}

// withMemoryBody returns a copy of r, for one try, that carries the buffered
// body as a reader net/http recognises as in memory. The transport then
// writes the request line, the headers and the body with one write: any
// other reader (the ReverseProxy's wrapper around the incoming body
// included) makes it flush the headers first, one more system call and one
// more packet per handoff. body is nil, or does not match the declared
// length, when the request streams; r is then returned as it is.
func withMemoryBody(r *http.Request, body []byte) *http.Request {
	if len(body) == 0 || int64(len(body)) != r.ContentLength {
		return r
	}
	m := &memoryRequest{req: *r}
	m.body.Reset(body)
	m.req.Body = io.NopCloser(&m.body)
	return &m.req
}

// memoryRequest is a request copy and its body's reader, allocated as one.
type memoryRequest struct {
	req  http.Request
	body bytes.Reader
}

// memoryBody is the RoundTripper of a ReverseProxy whose requests carry the
// middleware Info: a request whose body the middleware buffered goes out
// with it as an in-memory reader (see withMemoryBody).
type memoryBody struct{ next http.RoundTripper }

func (t memoryBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if in := middleware.InfoFromContext(r.Context()); in != nil && in.Buffered &&
		len(in.Body) > 0 && int64(len(in.Body)) == r.ContentLength && !in.FirstSend(r) {
		r = withMemoryBody(r, in.Body)
	}
	return t.next.RoundTrip(r)
}

// BufferPool hands httputil.ReverseProxy reusable 32 KiB copy buffers so that
// a response does not allocate its own. It pools the buffers' arrays: a
// pointer to an array goes into the pool as it is, where a pointer to a
// slice header would have to be allocated on every Put.
type BufferPool struct{ p sync.Pool }

// bufferSize is the size of a pooled buffer.
const bufferSize = 32 << 10

// NewBufferPool returns an empty pool.
func NewBufferPool() *BufferPool {
	return &BufferPool{p: sync.Pool{New: func() any { return new([bufferSize]byte) }}}
}

// Get returns a buffer.
func (b *BufferPool) Get() []byte { return b.p.Get().(*[bufferSize]byte)[:] }

// Put returns a buffer to the pool.
func (b *BufferPool) Put(buf []byte) {
	if cap(buf) < bufferSize {
		return
	}
	b.p.Put((*[bufferSize]byte)(buf[:bufferSize]))
}

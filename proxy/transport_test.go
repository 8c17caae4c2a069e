package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// writeCounter is a Transport whose connections count their writes.
type writeCounter struct {
	*http.Transport
	writes atomic.Int64
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) { c.n.Add(1); return c.Conn.Write(p) }

func newWriteCounter() *writeCounter {
	wc := &writeCounter{}
	d := &net.Dialer{Timeout: 5 * time.Second}
	wc.Transport = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{Conn: c, n: &wc.writes}, nil
	}}
	return wc
}

// streamed is a body net/http cannot know is in memory, as the
// ReverseProxy's wrapper around the incoming body is.
type streamed struct{ io.Reader }

func (streamed) Close() error { return nil }

// outbound is a request as the ReverseProxy hands it to the transport: the
// middleware buffered the body into Info, the request still carries a reader
// the transport cannot see through.
func outbound(t *testing.T, url, body string) *http.Request {
	t.Helper()
	in := &middleware.Info{Body: []byte(body), Buffered: true}
	req, err := http.NewRequestWithContext(middleware.WithInfo(context.Background(), in), http.MethodPost, url,
		streamed{strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	return req
}

func echoServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func roundTrip(t *testing.T, rt http.RoundTripper, req *http.Request, want string) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != want {
		t.Fatalf("the server got %q, want %q", got, want)
	}
}

// A buffered handoff leaves in one write (request line, headers and body
// together), through the ingress transport and through an edge's tries.
func TestBufferedBodyLeavesInOneWrite(t *testing.T) {
	srv := echoServer(t)
	body := `{"task":"summarise the quarter"}`

	t.Run("plain transport writes twice", func(t *testing.T) {
		wc := newWriteCounter()
		roundTrip(t, wc, outbound(t, srv.URL, body), body)
		if n := wc.writes.Load(); n != 2 {
			t.Fatalf("a streamed body took %d writes; this test expects the transport to flush headers first (2)", n)
		}
	})
	t.Run("ingress", func(t *testing.T) {
		wc := newWriteCounter()
		roundTrip(t, memoryBody{wc}, outbound(t, srv.URL, body), body)
		if n := wc.writes.Load(); n != 1 {
			t.Fatalf("%d writes, want 1", n)
		}
	})
	t.Run("edge", func(t *testing.T) {
		c, err := config.Decode(strings.NewReader("agent: a\nupstream: http://127.0.0.1:1\npeers: {b: {url: " + srv.URL + "}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		c.ApplyDefaults()
		book := record.NewBook(nil, time.Hour, slog.New(slog.DiscardHandler))
		t.Cleanup(book.Close)
		wc := newWriteCounter()
		e := newEdge(c, "b", wc, book, slog.New(slog.DiscardHandler), nil)
		roundTrip(t, e, outbound(t, srv.URL, body), body)
		if n := wc.writes.Load(); n != 1 {
			t.Fatalf("%d writes, want 1", n)
		}
	})
	t.Run("through the reverse proxy, the request itself", func(t *testing.T) {
		// The middleware buffered the inbound body; the ReverseProxy wraps
		// it; Rewrite hands its copy the buffered body back, and the
		// transport sends the proxy's own copy of the request, no other.
		inbound := httptest.NewRequest(http.MethodPost, "/task", strings.NewReader(body))
		in := &middleware.Info{}
		inbound = inbound.WithContext(middleware.WithInfo(inbound.Context(), in))
		if whole, err := middleware.BufferBody(inbound, in, 1<<10); !whole || err != nil {
			t.Fatalf("BufferBody = %v, %v", whole, err)
		}
		target, _ := neturl.Parse(srv.URL)
		wc := newWriteCounter()
		var given, sent *http.Request
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				in.ProxyBody(pr.Out, pr.In)
			},
			Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				given = r
				return memoryBody{roundTripFunc(func(r *http.Request) (*http.Response, error) {
					sent = r
					return wc.RoundTrip(r)
				})}.RoundTrip(r)
			}),
		}
		w := httptest.NewRecorder()
		rp.ServeHTTP(w, inbound)
		if w.Body.String() != body {
			t.Fatalf("the server got %q", w.Body.String())
		}
		if n := wc.writes.Load(); n != 1 {
			t.Errorf("%d writes, want 1", n)
		}
		if sent != given {
			t.Error("the transport was given a copy of the proxy's request: its body was not the buffered one")
		}
	})
	t.Run("a body that does not match its length streams as it came", func(t *testing.T) {
		wc := newWriteCounter()
		req := outbound(t, srv.URL, body)
		req.ContentLength = -1
		roundTrip(t, memoryBody{wc}, req, body)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

package middleware

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// TestBufferBody: a body of declared length within the bound is kept in
// Info and sent again as many times as the transport asks; a body already
// kept, an empty one, one that streams and one over the bound are not read.
func TestBufferBody(t *testing.T) {
	t.Parallel()
	read := func(rc io.ReadCloser) string {
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(`{"model":"m"}`))
	in := &Info{}
	if whole, err := BufferBody(r, in, 64); !whole || err != nil || !in.Buffered || string(in.Body) != `{"model":"m"}` {
		t.Fatalf("BufferBody = %v, %v; in.Body %q", whole, err, in.Body)
	}
	if got := read(r.Body); got != `{"model":"m"}` {
		t.Errorf("the request's body is %q", got)
	}
	for range 2 {
		b, err := r.GetBody()
		if err != nil || read(b) != `{"model":"m"}` {
			t.Errorf("GetBody: %v", err)
		}
	}
	// Kept already: the request is left as it is.
	r2, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("other"))
	if whole, err := BufferBody(r2, in, 64); !whole || err != nil || string(in.Body) != `{"model":"m"}` || read(r2.Body) != "other" {
		t.Errorf("a body already kept was read again")
	}
	// Empty: kept as nothing.
	r3, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	in3 := &Info{}
	if whole, err := BufferBody(r3, in3, 64); !whole || err != nil || !in3.Buffered || in3.Body != nil {
		t.Errorf("an empty body: %v, %v, %+v", whole, err, in3)
	}
	// Streaming, or over the bound: not read.
	for _, tc := range []struct {
		name   string
		length int64
	}{{"streaming", -1}, {"over the bound", 65}} {
		r4, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(strings.Repeat("x", 65)))
		r4.ContentLength = tc.length
		in4 := &Info{}
		if whole, err := BufferBody(r4, in4, 64); whole || err != nil || in4.Buffered || in4.Body != nil || len(read(r4.Body)) != 65 {
			t.Errorf("%s: %v, %v, %+v", tc.name, whole, err, in4)
		}
	}
	// A body that fails as it is read: the error, nothing kept.
	r5, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	r5.Body, r5.ContentLength = io.NopCloser(iotest.ErrReader(errors.New("reset"))), 10
	in5 := &Info{}
	if whole, err := BufferBody(r5, in5, 64); whole || err == nil || in5.Buffered {
		t.Errorf("a failing body: %v, %v, %+v", whole, err, in5)
	}
}

// TestFirstSend: the body buffering gave a request is sent as it is once,
// by whichever copy of the request goes first; a reverse proxy's copy gets
// it in place of its wrapper; a body replaced since, or already sent, is
// not handed out again, and GetBody still opens the whole body.
func TestFirstSend(t *testing.T) {
	t.Parallel()
	const body = `{"task":"plan the offsite"}`
	buffered := func() (*http.Request, *Info) {
		r, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(body))
		in := &Info{}
		if whole, err := BufferBody(r, in, 1<<10); !whole || err != nil {
			t.Fatalf("BufferBody = %v, %v", whole, err)
		}
		return r, in
	}

	r, in := buffered()
	if !in.FirstSend(r) {
		t.Fatal("the buffered request's first send was not its own body")
	}
	if in.FirstSend(r) {
		t.Error("the body was handed out twice")
	}
	if got, _ := io.ReadAll(r.Body); string(got) != body {
		t.Errorf("the first send read %q", got)
	}
	if rc, err := r.GetBody(); err != nil {
		t.Fatal(err)
	} else if got, _ := io.ReadAll(rc); string(got) != body {
		t.Errorf("GetBody after the first send read %q", got)
	}

	// A copy made before the first send shares the body: whichever goes
	// first takes it.
	r, in = buffered()
	clone := r.Clone(r.Context())
	if !in.FirstSend(clone) || in.FirstSend(r) {
		t.Error("a copy and its original both took the body")
	}

	// A reverse proxy's copy: its wrapper is replaced by the body.
	r, in = buffered()
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(io.MultiReader(r.Body))
	in.ProxyBody(out, r)
	if out.Body != r.Body || !in.FirstSend(out) {
		t.Error("the proxy's copy did not get the buffered body")
	}
	// ...but not once the body went out, nor when it was replaced.
	out2 := r.Clone(r.Context())
	wrapper := io.NopCloser(strings.NewReader(body))
	out2.Body = wrapper
	in.ProxyBody(out2, r)
	if out2.Body != wrapper {
		t.Error("a body already sent was handed to another copy")
	}
	r, in = buffered()
	r.Body = io.NopCloser(strings.NewReader(`{"task":"rewritten"}`))
	out3 := r.Clone(r.Context())
	out3.Body = wrapper
	in.ProxyBody(out3, r)
	if out3.Body != wrapper || in.FirstSend(r) {
		t.Error("a body replaced after buffering was taken for the buffered one")
	}

	// An empty body: nothing to hand out.
	r, _ = http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(""))
	r.ContentLength = 0
	in = &Info{}
	if _, err := readBody(r, in); err != nil || in.FirstSend(r) || r.Body != http.NoBody {
		t.Errorf("an empty body: %v, body %T", err, r.Body)
	}
}

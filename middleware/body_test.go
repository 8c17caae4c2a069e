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

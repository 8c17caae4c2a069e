package main

import (
	"math"
	"testing"
)

const traces = `File: proxy.test
Type: cpu
-----------+-------------------------------------------------------
      30ms   runtime.madvise
             runtime.bgscavenge
-----------+-------------------------------------------------------
      20ms   indexbytebody
             github.com/batonproxy/baton/genai.stringEnd
             github.com/batonproxy/baton/genai.(*shape).match
             github.com/batonproxy/baton/modelcall.(*answer).Read
             net/http/httputil.(*ReverseProxy).ServeHTTP
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      40ms   crypto/tls.(*Conn).Read
             net/http.(*body).Read
             io.ReadFull (inline)
             github.com/batonproxy/baton/modelcall.(*Calls).requestBody
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      1.5s   crypto/aes.gcmAesEnc
             net/http.(*conn).serve
-----------+-------------------------------------------------------
     500ms   net/http.(*http2serverConn).serve
             net/http.(*conn).serve
-----------+-------------------------------------------------------
     450ms   net/http.(*persistConn).readLoop
`

func TestShare(t *testing.T) {
	s := share(parseTraces(traces))
	want := map[string]float64{runtimeOwn: 30, baton: 1560, server: 500, agent: 450}
	for k, v := range want {
		if math.Abs(s.by[k]-v) > 1e-9 {
			t.Errorf("%s: %v ms, want %v", k, s.by[k], v)
		}
	}
	// The stream's scan is understanding; the request body's read from the
	// connection, below requestBody, is the transport's.
	if s.under != 20 || s.byFrame["genai.stringEnd"] != 20 {
		t.Errorf("understanding %v ms by %v, want 20 ms in genai.stringEnd", s.under, s.byFrame)
	}
	if got, want := s.scaled(s.by[baton]), 1560*(1+30.0/2510); math.Abs(got-want) > 1e-9 {
		t.Errorf("Baton with the runtime's share: %v, want %v", got, want)
	}
}

// TestAdd: profiles together weigh each by its CPU, and the sampling's
// error shrinks with the samples counted.
func TestAdd(t *testing.T) {
	one := share(parseTraces(traces))
	all := shares{by: map[string]float64{}, byFrame: map[string]float64{}}
	for range 4 {
		all.add(one)
	}
	if all.under != 4*one.under || all.by[baton] != 4*one.by[baton] || all.byFrame["genai.stringEnd"] != 80 {
		t.Errorf("four profiles: understanding %v ms of %v, want %v of %v", all.under, all.by[baton], 4*one.under, 4*one.by[baton])
	}
	share := pct(all.scaled(all.under), all.scaled(all.by[baton]))
	// 20 ms is two samples in one profile, eight in four.
	if got, want := one.stderr(), share/math.Sqrt(2); math.Abs(got-want) > 1e-9 {
		t.Errorf("one profile's error %v, want %v", got, want)
	}
	if got, want := all.stderr(), share/math.Sqrt(8); math.Abs(got-want) > 1e-9 {
		t.Errorf("four profiles' error %v, want %v", got, want)
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[string]float64{"10ms": 10, "1.20s": 1200, "500us": 0.5, "500µs": 0.5, "20ns": 2e-5} {
		if got, ok := duration(in); !ok || math.Abs(got-want) > 1e-12 {
			t.Errorf("duration(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := duration("File:"); ok {
		t.Error("a header line read as a duration")
	}
}

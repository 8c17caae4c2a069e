package contextref

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestToBaton(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, host string
		want       bool
	}{
		{name: "no host", host: "", want: true},
		{name: "localhost", host: "localhost", want: true},
		{name: "localhost with port", host: "LocalHost:7001", want: true},
		{name: "loopback v4", host: "127.0.0.1:7001", want: true},
		{name: "loopback v4 elsewhere in 127/8", host: "127.3.2.1", want: true},
		{name: "loopback v6", host: "[::1]:7001", want: true},
		{name: "a peer's name", host: "analyst:8080", want: false},
		{name: "a routable address", host: "10.0.0.7:7001", want: false},
		{name: "unspecified", host: "0.0.0.0:7001", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := toBaton(tt.host); got != tt.want {
				t.Errorf("toBaton(%q) = %v, want %v", tt.host, got, tt.want)
			}
		})
	}
}

func TestTraceOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, traceparent, want string
	}{
		{name: "valid", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", want: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{name: "spaces around", traceparent: " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ", want: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{name: "empty", traceparent: "", want: ""},
		{name: "too few parts", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-01", want: ""},
		{name: "long version", traceparent: "000-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := traceOf(tt.traceparent); got != tt.want {
				t.Errorf("traceOf(%q) = %q, want %q", tt.traceparent, got, tt.want)
			}
		})
	}
}

// TestServePassesPeerOn: a request on the context path whose Host names a
// peer is the agent's call to it, and goes on through the egress chain.
func TestServePassesPeerOn(t *testing.T) {
	t.Parallel()
	var passed bool
	egress := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		passed = true
		w.WriteHeader(http.StatusTeapot)
	})
	x := &Refs{o: Options{Egress: func() http.Handler { return egress }}}
	r := httptest.NewRequest(http.MethodGet, "/v1/context/sha-256:00", nil)
	r.Host = "analyst:8080"
	w := httptest.NewRecorder()
	x.Serve(w, r)
	if !passed || w.Code != http.StatusTeapot {
		t.Fatalf("a read naming a peer was not passed on: passed %v, status %d", passed, w.Code)
	}
}

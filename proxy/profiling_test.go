package proxy_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	rpprof "runtime/pprof"
	"runtime/trace"
	"strings"
	"testing"

	"github.com/batonproxy/baton/problem"
)

// TestProfiling serves the runtime's profiles on the admin listener when
// profiling is on, behind the admin token, in the formats go tool pprof and
// go tool trace read; and nothing under /debug/pprof/ when it is off.
func TestProfiling(t *testing.T) {
	const token = "profiling-token"
	b := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\nprofiling: true\nadmin_token: "+token+"\n", nil)
	bearer := "Bearer " + token

	t.Run("the token guards every profile", func(t *testing.T) {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/pprof/cmdline"} {
			resp, _ := adminGetAs(t, b, path, "")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s without the token: status %d, want 401", path, resp.StatusCode)
			}
			if p := readProblem(t, resp); p.Type != problem.Unauthorized.Type() {
				t.Errorf("%s: problem type %q", path, p.Type)
			}
		}
		if resp, _ := adminGetAs(t, b, "/debug/pprof/", "Bearer wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a wrong token: status %d, want 401", resp.StatusCode)
		}
	})
	t.Run("index", func(t *testing.T) {
		resp, body := adminGetAs(t, b, "/debug/pprof/", bearer)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("goroutine")) || !bytes.Contains(body, []byte("heap")) {
			t.Fatalf("index: status %d, body %.300s", resp.StatusCode, body)
		}
	})
	t.Run("heap as text", func(t *testing.T) {
		resp, body := adminGetAs(t, b, "/debug/pprof/heap?debug=1", bearer)
		if resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte("heap profile:")) {
			t.Fatalf("heap: status %d, body %.200s", resp.StatusCode, body)
		}
	})
	t.Run("goroutines name Baton's own", func(t *testing.T) {
		resp, body := adminGetAs(t, b, "/debug/pprof/goroutine?debug=2", bearer)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("github.com/batonproxy/baton/")) {
			t.Fatalf("goroutine: status %d, body %.200s", resp.StatusCode, body)
		}
	})
	t.Run("cpu profile", func(t *testing.T) {
		resp, body := adminGetAs(t, b, "/debug/pprof/profile?seconds=1", bearer)
		if resp.StatusCode != 200 {
			t.Fatalf("profile: status %d, body %.200s", resp.StatusCode, body)
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("the CPU profile is not gzipped protobuf: %v", err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		// The profile's string table names its sample types.
		if !bytes.Contains(raw, []byte("nanoseconds")) || !bytes.Contains(raw, []byte("cpu")) {
			t.Errorf("the CPU profile names no cpu/nanoseconds sample type (%d bytes)", len(raw))
		}
	})
	t.Run("execution trace", func(t *testing.T) {
		resp, body := adminGetAs(t, b, "/debug/pprof/trace?seconds=0.2", bearer)
		if resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte("go 1.")) {
			t.Fatalf("trace: status %d, body starts %q", resp.StatusCode, body[:min(len(body), 16)])
		}
	})
	t.Run("one cpu profile and one trace at a time", func(t *testing.T) {
		// The Baton runs in this process: holding the runtime's profiler
		// here is what another profile being taken looks like to it.
		if err := rpprof.StartCPUProfile(io.Discard); err != nil {
			t.Fatalf("holding the CPU profiler: %v", err)
		}
		resp, _ := adminGetAs(t, b, "/debug/pprof/profile?seconds=1", bearer)
		rpprof.StopCPUProfile()
		if err := trace.Start(io.Discard); err != nil {
			t.Fatalf("holding the tracer: %v", err)
		}
		tresp, _ := adminGetAs(t, b, "/debug/pprof/trace?seconds=1", bearer)
		trace.Stop()
		for _, c := range []struct {
			resp *http.Response
			what string
		}{{resp, "CPU profile"}, {tresp, "execution trace"}} {
			if c.resp.StatusCode != http.StatusConflict {
				t.Fatalf("%s while one is being taken: status %d, want 409", c.what, c.resp.StatusCode)
			}
			if p := readProblem(t, c.resp); p.Type != problem.ProfilerBusy.Type() || !strings.Contains(p.Detail, "another "+c.what) {
				t.Errorf("%s: problem %+v", c.what, p)
			}
			if c.resp.Header.Get("X-Go-Pprof") != "" || c.resp.Header.Get("Content-Disposition") != "" {
				t.Errorf("%s: the problem keeps pprof's headers %v", c.what, c.resp.Header)
			}
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for _, c := range []struct {
			path   string
			status int
			class  problem.Class
			detail string
		}{
			{"/debug/pprof/heap?seconds=soon", http.StatusBadRequest, problem.BadRequest, "seconds"},
			{"/debug/pprof/nosuch", http.StatusNotFound, problem.NotFound, "nosuch"},
		} {
			resp, _ := adminGetAs(t, b, c.path, bearer)
			if resp.StatusCode != c.status {
				t.Fatalf("%s: status %d, want %d", c.path, resp.StatusCode, c.status)
			}
			if p := readProblem(t, resp); p.Type != c.class.Type() || !strings.Contains(p.Detail, c.detail) {
				t.Errorf("%s: problem %+v", c.path, p)
			}
		}
	})
	t.Run("the index without its slash", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "http://"+b.AdminAddr()+"/debug/pprof", nil)
		req.Header.Set("Authorization", bearer)
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/debug/pprof/" {
			t.Errorf("status %d, Location %q; want 301 to /debug/pprof/", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("without a token, on loopback", func(t *testing.T) {
		open := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\nprofiling: true\n", nil)
		resp, body := adminGetAs(t, open, "/debug/pprof/heap?debug=1", "")
		if resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte("heap profile:")) {
			t.Fatalf("heap: status %d, body %.200s", resp.StatusCode, body)
		}
	})
	t.Run("off by default", func(t *testing.T) {
		off := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n", nil)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
			resp, _ := adminGetAs(t, off, path, "")
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("%s with profiling off: status %d, want 404", path, resp.StatusCode)
			}
			if p := readProblem(t, resp); p.Type != problem.NotFound.Type() {
				t.Errorf("%s: problem type %q", path, p.Type)
			}
		}
	})
}

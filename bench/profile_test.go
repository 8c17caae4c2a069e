package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonproxy/baton/config"
)

// TestProfiles takes a CPU profile and an execution trace of a process
// serving its profiles (the floor's --pprof) into the -profile directory,
// and reports a process that cannot be profiled as warnings of the row,
// without files.
func TestProfiles(t *testing.T) {
	t.Parallel()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if err := servePprof(addr); err != nil {
		t.Fatal(err)
	}
	// A process that refuses to be profiled (as a Baton whose CPU profiler
	// is taken does).
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "profiler busy", http.StatusConflict)
	}))
	defer refusing.Close()
	refusingAddr := strings.TrimPrefix(refusing.URL, "http://")

	dir := t.TempDir()
	h := &harness{o: &options{profileDir: dir, repeat: 2}, round: 2}
	ep := &endpoint{instances: []instance{
		{name: "floor", pprof: addr},
		{name: "refusing", pprof: refusingAddr},
		{name: "nginx"}, // serves no profiles
	}}
	row := &Row{Name: "go-floor"}
	got := awaitProfiles(h.startProfiles(context.Background(), ep, h.profileLabel(row.Name), 3), row)

	want := filepath.Join(dir, "go-floor-r2-floor.pprof")
	wantTrace := filepath.Join(dir, "go-floor-r2-floor.trace")
	if len(got) != 2 || got[0] != want || got[1] != wantTrace {
		t.Fatalf("profiles %q, want [%s %s]", got, want, wantTrace)
	}
	if tr, err := os.ReadFile(wantTrace); err != nil || !bytes.HasPrefix(tr, []byte("go 1.")) {
		t.Errorf("%s is not an execution trace (%v)", wantTrace, err)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s is not a gzipped profile: %v", want, err)
	}
	if raw, err := io.ReadAll(zr); err != nil || !bytes.Contains(raw, []byte("nanoseconds")) {
		t.Errorf("%s names no CPU sample type (%v)", want, err)
	}
	if len(row.Warnings) != 2 {
		t.Errorf("warnings %q, want the refused profile's and trace's", row.Warnings)
	}
	for _, w := range row.Warnings {
		if !strings.Contains(w, refusingAddr) || !strings.Contains(w, "409") {
			t.Errorf("warning %q does not name %s and its answer", w, refusingAddr)
		}
	}
	for _, ext := range []string{".pprof", ".trace"} {
		if _, err := os.Stat(filepath.Join(dir, "go-floor-r2-refusing"+ext)); !os.IsNotExist(err) {
			t.Errorf("a %s file for the process that could not be profiled: %v", ext, err)
		}
	}
	// A run too short for a trace beside its profile takes none.
	short := awaitProfiles(h.startProfiles(context.Background(), &endpoint{instances: ep.instances[:1]}, "short", 1), &Row{})
	if len(short) != 1 || !strings.HasSuffix(short[0], "short-floor.pprof") {
		t.Errorf("a one-second run: profiles %q, want its CPU profile only", short)
	}

	// Without -profile, nothing is asked for.
	none := &harness{o: &options{}}
	if ps := none.startProfiles(context.Background(), ep, "x", 1); ps != nil {
		t.Errorf("without -profile: %d profiles started", len(ps))
	}
}

// TestProfilingConfig turns profiling on in a Baton's generated config.
func TestProfilingConfig(t *testing.T) {
	t.Parallel()
	s := batonSpec{
		agent: "bench-a", upstream: "http://127.0.0.1:9000",
		egress: "127.0.0.1:9001", ingress: "127.0.0.1:9002", admin: "127.0.0.1:9003", profiling: true,
	}
	c, err := config.Parse(strings.NewReader(s.yaml()), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config.Parse:\n%s\nerror: %v", s.yaml(), err)
	}
	if !c.Profiling {
		t.Errorf("profiling off in\n%s", s.yaml())
	}
	s.profiling = false
	if c, err := config.Parse(strings.NewReader(s.yaml()), func(string) string { return "" }); err != nil || c.Profiling {
		t.Errorf("profiling %v without it (%v)", c != nil && c.Profiling, err)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// With -profile DIR, every Baton runs with profiling on and the Go floor
// serves the same profiles on a listener of its own (--pprof), and during
// each measured run the harness takes a CPU profile of each of them, as
// long as the run, and a one-second execution trace from the middle of it:
// DIR/<row>[-r<round>]-<process>.pprof, which `go tool pprof` reads and
// `-diff_base` compares (a Baton against the floor, one build against
// another), and .trace beside it, for `go tool trace` (whose -pprof=sched,
// net, sync and syscall profiles say where requests wait). Sampling and
// tracing cost each process some of its CPU while they run, so the CPU
// figures of a profiled run are compared with those of other profiled runs
// only.

// profiling is a CPU profile or a trace being taken of one process of a row.
type profiling struct {
	path string
	done chan error
}

// traceSecs is how long the execution trace of a measured run is: a second
// holds thousands of requests, in a few megabytes.
const traceSecs = 1

// startProfiles asks every process of ep that serves profiles for a CPU
// profile of secs seconds and, from the middle of them, an execution trace
// of traceSecs, each written to a file under the -profile directory named
// after label and the process. It returns at once.
func (h *harness) startProfiles(ctx context.Context, ep *endpoint, label string, secs int) []*profiling {
	if h.o.profileDir == "" {
		return nil
	}
	var out []*profiling
	for _, in := range ep.instances {
		if in.pprof == "" {
			continue
		}
		base := filepath.Join(h.o.profileDir, label+"-"+in.name)
		out = append(out, takeProfile(ctx, in.pprof, "profile", secs, 0, base+".pprof"))
		if secs > traceSecs {
			wait := time.Duration(secs-traceSecs) * time.Second / 2
			out = append(out, takeProfile(ctx, in.pprof, "trace", traceSecs, wait, base+".trace"))
		}
	}
	return out
}

// takeProfile GETs /debug/pprof/<kind>?seconds=secs from addr after wait,
// into path, in the background.
func takeProfile(ctx context.Context, addr, kind string, secs int, wait time.Duration, path string) *profiling {
	p := &profiling{path: path, done: make(chan error, 1)}
	url := "http://" + addr + "/debug/pprof/" + kind + "?seconds=" + strconv.Itoa(secs)
	go func() {
		select {
		case <-time.After(wait):
			p.done <- fetchProfile(ctx, url, path, time.Duration(secs)*time.Second)
		case <-ctx.Done():
			p.done <- ctx.Err()
		}
	}()
	return p
}

// fetchProfile GETs a CPU profile or a trace and writes it to path.
func fetchProfile(ctx context.Context, url, path string, secs time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, secs+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile: %s answered %d: %s", url, resp.StatusCode, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		os.Remove(path) // no partial profile left behind
		return fmt.Errorf("profile: reading %s: %w", url, err)
	}
	return f.Close()
}

// awaitProfiles waits for the profiles and returns the files written; a
// profile that failed is a warning of the row, not its failure.
func awaitProfiles(ps []*profiling, row *Row) []string {
	var paths []string
	for _, p := range ps {
		if err := <-p.done; err != nil {
			row.Warnings = append(row.Warnings, err.Error())
			continue
		}
		paths = append(paths, p.path)
	}
	return paths
}

// pprofOf is where a Baton whose admin listener is admin serves its
// profiles: there with -profile, nowhere without.
func (h *harness) pprofOf(admin string) string {
	if h.o.profileDir == "" {
		return ""
	}
	return admin
}

// profileLabel names a row's profiles: the row, and its round when there
// are several.
func (h *harness) profileLabel(row string) string {
	if h.o.repeat > 1 {
		return fmt.Sprintf("%s-r%d", row, h.round)
	}
	return row
}

// servePprof serves the Go runtime's profiles on addr for the floor
// subcommand, as a Baton's admin listener does with profiling on.
func servePprof(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) // for the life of the process
	return nil
}

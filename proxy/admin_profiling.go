package proxy

import (
	"bytes"
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/problem"
)

// ProfilingRoutes serves the Go runtime's profiles, for the admin
// listener when the configuration turns profiling on (sidecar/routes.go
// mounts them behind the admin token, as Envoy's admin interface and
// Dapr's profiling port offer them): GET /debug/pprof/ lists them, and
// /debug/pprof/profile?seconds=N (CPU), /debug/pprof/trace?seconds=N (the
// execution trace), /debug/pprof/heap, /allocs, /goroutine, /block,
// /mutex, /threadcreate, /cmdline and /symbol serve them in the formats `go
// tool pprof` and `go tool trace` read. Importing net/http/pprof also
// registers these handlers on http.DefaultServeMux, which no Baton
// listener serves.
func ProfilingRoutes(r chi.Router) {
	// pprof.Index serves a named profile by the path's last element
	// under /debug/pprof/, which a chi route leaves in r.URL.Path.
	r.Get("/debug/pprof/", pprof.Index)
	r.Get("/debug/pprof/cmdline", pprof.Cmdline)
	r.Get("/debug/pprof/profile", pprofProblems(pprof.Profile, "CPU profile"))
	r.Get("/debug/pprof/symbol", pprof.Symbol)
	r.Post("/debug/pprof/symbol", pprof.Symbol)
	r.Get("/debug/pprof/trace", pprofProblems(pprof.Trace, "execution trace"))
	r.Get("/debug/pprof/{profile}", func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "profile")
		if rpprof.Lookup(name) == nil {
			problem.Write(w, r, problem.NotFound, "no profile "+name+": /debug/pprof/ lists this process's profiles")
			return
		}
		pprofProblems(pprof.Index, "")(w, r)
	})
	r.Get("/debug/pprof", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/debug/pprof/", http.StatusMovedPermanently)
	})
}

// pprofProblems answers what a pprof handler refuses as a problem instead
// of its plain text, by its status: 400 (a malformed seconds parameter) is
// bad-request, 404 not-found; a 500 from the handler that takes one of the
// runtime's exclusive recordings (holds, "CPU profile" or "execution
// trace": the runtime takes one of each at a time) is profiler-busy, any
// other internal. A client that left is answered nothing.
func pprofProblems(h http.HandlerFunc, holds string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pw := &pprofWriter{ResponseWriter: w}
		h(pw, r)
		if pw.status == 0 || r.Context().Err() != nil {
			return
		}
		w.Header().Del("X-Go-Pprof")
		w.Header().Del("Content-Disposition")
		detail := strings.TrimSpace(pw.msg.String())
		switch {
		case pw.status == http.StatusBadRequest:
			problem.Write(w, r, problem.BadRequest, detail)
		case pw.status == http.StatusNotFound:
			problem.Write(w, r, problem.NotFound, detail)
		case pw.status == http.StatusInternalServerError && holds != "":
			problem.Write(w, r, problem.ProfilerBusy, detail+": another "+holds+" is being taken in this process; retry once it ends")
		default:
			problem.Write(w, r, problem.Internal, detail)
		}
	}
}

// pprofWriter passes a pprof handler's answer through unless it is a
// refusal (a status of 400 or more), which it keeps for pprofProblems.
type pprofWriter struct {
	http.ResponseWriter
	status int // the refusal's, or 0
	msg    bytes.Buffer
}

func (w *pprofWriter) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *pprofWriter) Write(p []byte) (int, error) {
	if w.status != 0 {
		return w.msg.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (pprof extends
// the write deadline of a long profile through it).
func (w *pprofWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

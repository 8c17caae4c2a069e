package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
)

// adminRouter serves the admin listener: /healthz (the process is up),
// /readyz (the listeners are up and the store answers), /metrics, and the
// capabilities' routes (with profiling on, /debug/pprof/ among them).
func (s *Server) adminRouter() http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	if s.plug.Admin != nil {
		s.plug.Admin(r) // the capabilities' routes (sidecar/routes.go)
	}
	s.metricsRoute(r)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, r, problem.NotFound, "no admin endpoint "+r.URL.Path)
	})
	return r
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if !ready {
		problem.Write(w, r, problem.NotReady, "listeners are not serving")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.log.Warn("readiness: store unreachable", "error", err.Error())
		problem.Write(w, r, problem.StoreUnavailable, "the state store does not answer")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "agent": s.cfg.Agent})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	records.WriteJSON(w, status, v)
}

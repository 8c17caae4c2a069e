package proxy

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/problem"
)

// adminRouter serves the admin listener: /healthz (the process is up) and
// /readyz (the listeners are up and the store answers).
func (s *Server) adminRouter() http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	r.Group(func(r chi.Router) {
		if s.cfg.AdminToken != "" {
			r.Use(bearer(s.cfg.AdminToken))
		}
		s.recordRoutes(r)
		s.abandonRoutes(r)
	})
	// The console (console.go) signs in on its own: the admin token, then
	// a session cookie.
	s.consoleRoutes(r)
	s.approvalRoutes(r) // approvers too: its own authentication
	s.metricsRoute(r)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, r, problem.NotFound, "no admin endpoint "+r.URL.Path)
	})
	return r
}

// bearer requires "Authorization: Bearer <token>" (compared in constant
// time) on the admin API; health probes stay open.
func bearer(token string) func(http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="baton-admin"`)
				problem.Write(w, r, problem.Unauthorized, "the admin API needs Authorization: Bearer <admin_token>")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
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
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

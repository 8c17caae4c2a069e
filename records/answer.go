package records

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/problem"
)

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// StoreProblem answers a failed store read: 404 for an unknown record, 503
// when the store does not answer.
func StoreProblem(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if errors.Is(err, record.ErrNotFound) {
		problem.Write(w, r, problem.NotFound, "no such record (unknown, or past retention)")
		return
	}
	log.Warn("admin: store error", "path", r.URL.Path, "error", err.Error())
	w.Header().Set("Retry-After", "1")
	problem.Write(w, r, problem.StoreUnavailable, "the state store does not answer")
}

// Page reads a list's offset and limit (default 50, at most 500) from r's
// query, answering 400 when they are not numbers in range.
func Page(w http.ResponseWriter, r *http.Request) (offset, limit int, ok bool) {
	q := r.URL.Query()
	offset, err1 := atoiDefault(q.Get("offset"), 0)
	limit, err2 := atoiDefault(q.Get("limit"), 50)
	if err1 != nil || err2 != nil || offset < 0 || limit < 1 || limit > 500 {
		problem.Write(w, r, problem.BadRequest, "offset must be >= 0 and limit between 1 and 500")
		return 0, 0, false
	}
	return offset, limit, true
}

func atoiDefault(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

// NotOwnerError reports a record (a dead letter, a held handoff) of another
// agent: only the Baton of the agent whose handoff it is may act on it.
type NotOwnerError struct {
	ID    string
	Owner string // the agent whose record it is
}

func (e *NotOwnerError) Error() string {
	return e.ID + " belongs to agent " + e.Owner + ": act on it at " + e.Owner + "'s Baton"
}

// Owned returns nil when rec is a record of agent's own handoffs (its
// delegation record, or its receipt), and a *NotOwnerError otherwise.
func Owned(agent string, rec *record.Record) error {
	owner := rec.From
	if rec.Side == record.Ingress {
		owner = rec.To
	}
	if owner != agent {
		return &NotOwnerError{ID: rec.ID, Owner: owner}
	}
	return nil
}

// NotThisAgent answers a request about another agent's records with 421
// not-this-agent, naming the owner.
func NotThisAgent(w http.ResponseWriter, r *http.Request, what, owner string) {
	problem.New(r, problem.NotThisAgent, what+" belong to agent "+owner+": ask "+owner+"'s Baton").
		With("owner", owner).Write(w)
}

// Operator names who acts through the admin API (which the admin token
// guards when set): "admin", or "admin (<Baton-Operator>)" when the request
// says who.
func Operator(r *http.Request) string {
	if by := r.Header.Get("Baton-Operator"); by != "" && len(by) <= 64 {
		return "admin (" + by + ")"
	}
	return "admin"
}

// AdminToken requires "Authorization: Bearer <token>" (compared in
// constant time) on the admin API's routes it guards.
func AdminToken(token string) func(http.Handler) http.Handler {
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

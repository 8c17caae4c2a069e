// Package records serves the admin API over handoff records: a trace as
// its chain (GET /v1/traces/{trace_id}) and one record with its checkpoint
// (GET /v1/records/{id}), whoever wrote them (Batons sharing a store see
// one chain per trace). It also holds what every admin API over records
// shares: JSON answers, pages, store problems, and whose a record is. It
// uses handoff/record and problem; the capabilities' admin APIs use it.
package records

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/problem"
)

// API serves records from a book.
type API struct {
	Book *record.Book
	Log  *slog.Logger
}

// TraceView is the JSON of GET /v1/traces/{trace_id}.
type TraceView struct {
	TraceID string          `json:"trace_id"`
	Records []record.Record `json:"records"`
	// Entries are the chain's stored entries, for verification, and Tail
	// names the last one.
	Entries []string `json:"entries"`
	Tail    string   `json:"tail"`
}

// Trace serves GET /v1/traces/{trace_id}: the trace's records and chain.
func (a *API) Trace(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "trace_id")
	if len(id) != 32 || record.TraceOf(id+".0000000000000000") == "" {
		problem.Write(w, r, problem.BadRequest, "a trace id is 32 lowercase hex digits")
		return
	}
	t, err := a.Book.Trace(r.Context(), id)
	if err != nil {
		StoreProblem(w, r, a.Log, err)
		return
	}
	if len(t.Entries) == 0 && t.Tail == "" {
		problem.Write(w, r, problem.NotFound, "no records for trace "+id+" (unknown, or past retention)")
		return
	}
	v := TraceView{TraceID: id, Records: t.Records, Tail: t.Tail, Entries: make([]string, len(t.Entries))}
	for i, e := range t.Entries {
		v.Entries[i] = string(e)
	}
	WriteJSON(w, http.StatusOK, v)
}

// Record serves GET /v1/records/{id}: one record with its checkpoint.
func (a *API) Record(w http.ResponseWriter, r *http.Request) {
	rec, err := a.Book.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		StoreProblem(w, r, a.Log, err)
		return
	}
	WriteJSON(w, http.StatusOK, rec)
}

package deadletter

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
)

// This agent's dead letters on the admin listener (sidecar/routes.go
// lists them):
//
//	GET    /v1/deadletters?edge=&offset=&limit=   this agent's, or one of its edges'
//	GET    /v1/deadletters/{id}             one of them with its checkpoint
//	POST   /v1/deadletters/{id}/replay
//	DELETE /v1/deadletters/{id}
//
// Dead letters are acted on only by the Baton of the agent whose handoffs
// they are: another agent's id is answered 421 not-this-agent, naming the
// owner.

// Page is the JSON of GET /v1/deadletters.
type Page struct {
	Total   int64           `json:"total"`
	Offset  int             `json:"offset"`
	Limit   int             `json:"limit"`
	Records []record.Record `json:"records"`
}

// List serves GET /v1/deadletters.
func (d *DeadLetters) List(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, limit, ok := records.Page(w, r)
	if !ok {
		return
	}
	list := record.AgentDeadLetters(d.agent)
	if a := q.Get("agent"); a != "" && a != d.agent {
		records.NotThisAgent(w, r, "dead letters of agent "+a, a)
		return
	}
	if edge := q.Get("edge"); edge != "" {
		from, _, ok := strings.Cut(edge, "→")
		if !ok {
			problem.Write(w, r, problem.BadRequest, "edge is from→to, like "+d.agent+"→peer")
			return
		}
		if from != d.agent {
			records.NotThisAgent(w, r, "dead letters of edge "+edge, from)
			return
		}
		list = record.EdgeDeadLetters(edge)
	}
	recs, total, err := d.o.Book.DeadLetters(r.Context(), list, offset, limit)
	if err != nil {
		records.StoreProblem(w, r, d.o.Log, err)
		return
	}
	for i := range recs {
		recs[i].Request = nil // the list stays small; GET /v1/records/{id} has it
	}
	records.WriteJSON(w, http.StatusOK, Page{Total: total, Offset: offset, Limit: limit, Records: recs})
}

// owned reads a record of this agent's own handoffs, answering the problem
// when it cannot.
func (d *DeadLetters) owned(w http.ResponseWriter, r *http.Request) (*record.Record, bool) {
	rec, err := d.o.Book.Get(r.Context(), chi.URLParam(r, "id"))
	if err == nil {
		err = records.Owned(d.agent, rec)
	}
	if err != nil {
		d.Problem(w, r, err)
		return nil, false
	}
	return rec, true
}

// Get serves GET /v1/deadletters/{id}.
func (d *DeadLetters) Get(w http.ResponseWriter, r *http.Request) {
	if rec, ok := d.owned(w, r); ok {
		records.WriteJSON(w, http.StatusOK, rec)
	}
}

// ReplayHTTP serves POST /v1/deadletters/{id}/replay.
func (d *DeadLetters) ReplayHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := d.Replay(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		d.Problem(w, r, err)
		return
	}
	records.WriteJSON(w, http.StatusOK, res)
}

// Problem answers a failed read of, or action on, a dead letter.
func (d *DeadLetters) Problem(w http.ResponseWriter, r *http.Request, err error) {
	var other *records.NotOwnerError
	switch {
	case errors.As(err, &other):
		problem.New(r, problem.NotThisAgent, err.Error()).With("owner", other.Owner).Write(w)
	case errors.Is(err, ErrNotDead):
		problem.Write(w, r, problem.NotDeadLetter, err.Error())
	case errors.Is(err, ErrNotReplayable), errors.Is(err, record.ErrUnknownPeer):
		problem.Write(w, r, problem.NotReplayable, err.Error())
	case errors.Is(err, ErrAbandoned):
		problem.Write(w, r, problem.TraceAbandoned, err.Error())
	default:
		records.StoreProblem(w, r, d.o.Log, err)
	}
}

// DropHTTP serves DELETE /v1/deadletters/{id}.
func (d *DeadLetters) DropHTTP(w http.ResponseWriter, r *http.Request) {
	rec, ok := d.owned(w, r)
	if !ok {
		return
	}
	if err := d.Drop(r, rec, records.Operator(r)); err != nil {
		d.Problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Drop takes the dead letter rec off the lists (its record stays in its
// trace), by who.
func (d *DeadLetters) Drop(r *http.Request, rec *record.Record, who string) error {
	if rec.State != record.Dead {
		return fmt.Errorf("%w: %s is %s", ErrNotDead, rec.ID, rec.State)
	}
	if err := d.o.Book.Undead(r.Context(), rec); err != nil {
		return err
	}
	if d.Dropped != nil {
		d.Dropped(r.Context(), rec, who)
	}
	return nil
}

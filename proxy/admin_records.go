package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/problem"
)

// recordRoutes serves records, traces and dead letters on the admin
// listener:
//
//	GET    /v1/traces/{trace_id}            the chain, ordered, with states
//	GET    /v1/records/{id}                 one record with its checkpoint
//	GET    /v1/deadletters?edge=&offset=&limit=   this agent's, or one of its edges'
//	GET    /v1/deadletters/{id}             one of them with its checkpoint
//	POST   /v1/deadletters/{id}/replay
//	DELETE /v1/deadletters/{id}
//
// Traces and records are read whoever wrote them (Batons sharing a store
// see one chain per trace); dead letters are acted on only by the Baton of
// the agent whose handoffs they are: another agent's id is answered 421
// not-this-agent, naming the owner.
func (s *Server) recordRoutes(r chi.Router) {
	r.Get("/v1/traces/{trace_id}", s.getTrace)
	r.Get("/v1/records/{id}", s.getRecord)
	r.Get("/v1/deadletters", s.listDeadLetters)
	r.Get("/v1/deadletters/{id}", s.getDeadLetter)
	r.Post("/v1/deadletters/{id}/replay", s.replayDeadLetter)
	r.Delete("/v1/deadletters/{id}", s.dropDeadLetter)
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

func (s *Server) getTrace(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "trace_id")
	if len(id) != 32 || record.TraceOf(id+".0000000000000000") == "" {
		problem.Write(w, r, problem.BadRequest, "a trace id is 32 lowercase hex digits")
		return
	}
	t, err := s.book.Trace(r.Context(), id)
	if err != nil {
		s.storeProblem(w, r, err)
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
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) getRecord(w http.ResponseWriter, r *http.Request) {
	rec, err := s.book.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		s.storeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// DeadLetterPage is the JSON of GET /v1/deadletters.
type DeadLetterPage struct {
	Total   int64           `json:"total"`
	Offset  int             `json:"offset"`
	Limit   int             `json:"limit"`
	Records []record.Record `json:"records"`
}

func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, limit, ok := pageOf(w, r)
	if !ok {
		return
	}
	list := record.AgentDeadLetters(s.cfg.Agent)
	if a := q.Get("agent"); a != "" && a != s.cfg.Agent {
		notThisAgent(w, r, "dead letters of agent "+a, a)
		return
	}
	if edge := q.Get("edge"); edge != "" {
		from, _, ok := strings.Cut(edge, "→")
		if !ok {
			problem.Write(w, r, problem.BadRequest, "edge is from→to, like "+s.cfg.Agent+"→peer")
			return
		}
		if from != s.cfg.Agent {
			notThisAgent(w, r, "dead letters of edge "+edge, from)
			return
		}
		list = record.EdgeDeadLetters(edge)
	}
	recs, total, err := s.book.DeadLetters(r.Context(), list, offset, limit)
	if err != nil {
		s.storeProblem(w, r, err)
		return
	}
	for i := range recs {
		recs[i].Request = nil // the list stays small; GET /v1/records/{id} has it
	}
	writeJSON(w, http.StatusOK, DeadLetterPage{Total: total, Offset: offset, Limit: limit, Records: recs})
}

// notThisAgent answers a request about another agent's dead letters.
func notThisAgent(w http.ResponseWriter, r *http.Request, what, owner string) {
	problem.New(r, problem.NotThisAgent, what+" belong to agent "+owner+": ask "+owner+"'s Baton").
		With("owner", owner).Write(w)
}

// ownedRecord reads a record of this agent's own handoffs, answering the
// problem when it cannot.
func (s *Server) ownedRecord(w http.ResponseWriter, r *http.Request) (*record.Record, bool) {
	rec, err := s.book.Get(r.Context(), chi.URLParam(r, "id"))
	if err == nil {
		err = s.owned(rec)
	}
	if err != nil {
		s.recordProblem(w, r, err)
		return nil, false
	}
	return rec, true
}

func (s *Server) getDeadLetter(w http.ResponseWriter, r *http.Request) {
	if rec, ok := s.ownedRecord(w, r); ok {
		writeJSON(w, http.StatusOK, rec)
	}
}

func (s *Server) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	res, err := s.Replay(r.Context(), chi.URLParam(r, "id"))
	switch {
	case err != nil:
		s.recordProblem(w, r, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// recordProblem answers a failed read of or action on a record.
func (s *Server) recordProblem(w http.ResponseWriter, r *http.Request, err error) {
	var other *NotOwnerError
	switch {
	case errors.As(err, &other):
		problem.New(r, problem.NotThisAgent, err.Error()).With("owner", other.Owner).Write(w)
	case errors.Is(err, ErrNotDead):
		problem.Write(w, r, problem.NotDeadLetter, err.Error())
	case errors.Is(err, ErrNotReplayable), errors.Is(err, ErrUnknownPeer):
		problem.Write(w, r, problem.NotReplayable, err.Error())
	case errors.Is(err, ErrAbandoned):
		problem.Write(w, r, problem.TraceAbandoned, err.Error())
	default:
		s.storeProblem(w, r, err)
	}
}

func (s *Server) dropDeadLetter(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.ownedRecord(w, r)
	if !ok {
		return
	}
	if rec.State != record.Dead {
		problem.Write(w, r, problem.NotDeadLetter, rec.ID+" is "+string(rec.State))
		return
	}
	if err := s.book.Undead(r.Context(), rec); err != nil {
		s.storeProblem(w, r, err)
		return
	}
	s.dropped(r.Context(), rec, adminCaller(r))
	w.WriteHeader(http.StatusNoContent)
}

// storeProblem answers a failed store read: 404 for an unknown record, 503
// when the store does not answer.
func (s *Server) storeProblem(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, record.ErrNotFound) {
		problem.Write(w, r, problem.NotFound, "no such record (unknown, or past retention)")
		return
	}
	s.log.Warn("admin: store error", "path", r.URL.Path, "error", err.Error())
	w.Header().Set("Retry-After", "1")
	problem.Write(w, r, problem.StoreUnavailable, "the state store does not answer")
}

// pageOf reads a list's offset and limit (default 50, at most 500) from
// r's query, answering 400 when they are not numbers in range.
func pageOf(w http.ResponseWriter, r *http.Request) (offset, limit int, ok bool) {
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

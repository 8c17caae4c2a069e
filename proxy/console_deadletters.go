package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/handoff/record"
)

// consoleDeadLetterPage is how many dead letters a page lists unless the
// query says (limit, at most consoleDeadLetterMax).
const (
	consoleDeadLetterPage = 20
	consoleDeadLetterMax  = 200
)

// consoleDeadLettersView is a page of this agent's dead letters, oldest
// first.
type consoleDeadLettersView struct {
	Records    []record.Record
	Total      int64
	Offset     int
	Limit      int
	First      int // 1-based position of the first shown
	Last       int
	Prev, Next int // offsets of the neighbouring pages; -1 when none
	RecordsOff bool
}

func (s *Server) consoleDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err1 := atoiDefault(q.Get("offset"), 0)
	limit, err2 := atoiDefault(q.Get("limit"), consoleDeadLetterPage)
	if err1 != nil || err2 != nil || offset < 0 || limit < 1 || limit > consoleDeadLetterMax {
		s.consoleError(w, r, http.StatusBadRequest, "Bad request",
			fmt.Sprintf("offset must be >= 0 and limit between 1 and %d.", consoleDeadLetterMax))
		return
	}
	v := consoleDeadLettersView{Offset: offset, Limit: limit, Prev: -1, Next: -1, RecordsOff: !s.book.Enabled()}
	recs, total, err := s.book.DeadLetters(r.Context(), record.AgentDeadLetters(s.cfg.Agent), offset, limit)
	if err != nil {
		s.consoleStoreError(w, r, err, "dead letters")
		return
	}
	v.Records, v.Total = recs, total
	if len(recs) > 0 {
		v.First, v.Last = offset+1, offset+len(recs)
	}
	if offset > 0 {
		v.Prev = max(offset-limit, 0)
	}
	if int64(offset+limit) < total {
		v.Next = offset + limit
	}
	s.consoleRender(w, r, http.StatusOK, "deadletters.html", "deadletters", v)
}

// consoleBack is the dead-letter page an action came from: its form's
// offset field.
func consoleBack(r *http.Request) string {
	if n, err := strconv.Atoi(r.PostFormValue("offset")); err == nil && n > 0 {
		return "/console/deadletters?offset=" + strconv.Itoa(n)
	}
	if r.PostFormValue("from") == "record" {
		return consoleRecordURL(chi.URLParam(r, "id"))
	}
	return "/console/deadletters"
}

// consoleReplay replays a dead letter (Server.Replay, as POST
// /v1/deadletters/{id}/replay does) and says what happened.
func (s *Server) consoleReplay(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	res, err := s.Replay(r.Context(), id)
	switch {
	case err != nil:
		s.consoleFlash(w, r, consoleBack(r), false, "Replay of "+id+" refused: "+s.consoleActionError(err))
	case res.Error != "":
		status := ""
		if res.Status != 0 {
			status = fmt.Sprintf(" (status %d)", res.Status)
		}
		s.consoleFlash(w, r, consoleBack(r), false,
			fmt.Sprintf("Replay of %s failed again%s: %s. It is %s.", id, status, res.Error, res.Record.State))
	default:
		s.log.Info("console: dead letter replayed", "record_id", id, "status", res.Status, "by", s.consoleWho(r))
		s.consoleFlash(w, r, consoleBack(r), true,
			fmt.Sprintf("Replayed %s: %s, status %d.", id, res.Record.State, res.Status))
	}
}

// consoleDrop takes a dead letter off the lists (as DELETE
// /v1/deadletters/{id} does); its record stays in its trace.
func (s *Server) consoleDrop(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	rec, err := s.book.Get(r.Context(), id)
	if err == nil {
		err = s.owned(rec)
	}
	if err == nil && rec.State != record.Dead {
		err = fmt.Errorf("%w: %s is %s", ErrNotDead, id, rec.State)
	}
	if err == nil {
		err = s.book.Undead(r.Context(), rec)
	}
	if err != nil {
		s.consoleFlash(w, r, consoleBack(r), false, "Drop of "+id+" refused: "+s.consoleActionError(err))
		return
	}
	s.log.Info("console: dead letter dropped", "record_id", id, "by", s.consoleWho(r))
	s.dropped(r.Context(), rec, s.consoleWho(r))
	s.consoleFlash(w, r, consoleBack(r), true,
		"Dropped "+id+": it is no longer listed; its record stays in trace "+rec.TraceID+".")
}

// consoleActionError says why an action on a record failed.
func (s *Server) consoleActionError(err error) string {
	var other *NotOwnerError
	switch {
	case errors.As(err, &other), errors.Is(err, ErrNotDead), errors.Is(err, ErrNotReplayable), errors.Is(err, ErrUnknownPeer):
		return err.Error()
	case errors.Is(err, record.ErrNotFound):
		return "no such record (unknown, or past retention)"
	}
	s.log.Warn("console: store error", "error", err.Error())
	return "the state store does not answer; try again in a moment"
}

// consoleWho names who makes a signed-in console request, for the log.
func (s *Server) consoleWho(r *http.Request) string {
	who, _ := s.consoleIdentity(r)
	return who
}

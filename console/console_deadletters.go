package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/deadletter"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
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

func (con *Console) consoleDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err1 := atoi(q.Get("offset"), 0)
	limit, err2 := atoi(q.Get("limit"), consoleDeadLetterPage)
	if err1 != nil || err2 != nil || offset < 0 || limit < 1 || limit > consoleDeadLetterMax {
		con.consoleError(w, r, http.StatusBadRequest, "Bad request",
			fmt.Sprintf("offset must be >= 0 and limit between 1 and %d.", consoleDeadLetterMax))
		return
	}
	v := consoleDeadLettersView{Offset: offset, Limit: limit, Prev: -1, Next: -1, RecordsOff: !con.o.Book.Enabled()}
	recs, total, err := con.o.Book.DeadLetters(r.Context(), record.AgentDeadLetters(con.o.Config.Agent), offset, limit)
	if err != nil {
		con.consoleStoreError(w, r, err, "dead letters")
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
	con.consoleRender(w, r, http.StatusOK, "deadletters.html", "deadletters", v)
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
func (con *Console) consoleReplay(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	res, err := con.o.DeadLetters.Replay(r.Context(), id)
	switch {
	case err != nil:
		con.consoleFlash(w, r, consoleBack(r), false, "Replay of "+id+" refused: "+con.consoleActionError(err))
	case res.Error != "":
		status := ""
		if res.Status != 0 {
			status = fmt.Sprintf(" (status %d)", res.Status)
		}
		con.consoleFlash(w, r, consoleBack(r), false,
			fmt.Sprintf("Replay of %s failed again%s: %s. It is %s.", id, status, res.Error, res.Record.State))
	default:
		con.o.Log.Info("console: dead letter replayed", "record_id", id, "status", res.Status, "by", con.consoleWho(r))
		con.consoleFlash(w, r, consoleBack(r), true,
			fmt.Sprintf("Replayed %s: %s, status %d.", id, res.Record.State, res.Status))
	}
}

// consoleDrop takes a dead letter off the lists (as DELETE
// /v1/deadletters/{id} does); its record stays in its trace.
func (con *Console) consoleDrop(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	rec, err := con.o.Book.Get(r.Context(), id)
	if err == nil {
		err = records.Owned(con.o.Config.Agent, rec)
	}
	if err == nil {
		err = con.o.DeadLetters.Drop(r, rec, con.consoleWho(r))
	}
	if err != nil {
		con.consoleFlash(w, r, consoleBack(r), false, "Drop of "+id+" refused: "+con.consoleActionError(err))
		return
	}
	con.o.Log.Info("console: dead letter dropped", "record_id", id, "by", con.consoleWho(r))
	con.consoleFlash(w, r, consoleBack(r), true,
		"Dropped "+id+": it is no longer listed; its record stays in trace "+rec.TraceID+".")
}

// consoleActionError says why an action on a record failed.
func (con *Console) consoleActionError(err error) string {
	var other *records.NotOwnerError
	switch {
	case errors.As(err, &other), errors.Is(err, deadletter.ErrNotDead), errors.Is(err, deadletter.ErrNotReplayable),
		errors.Is(err, record.ErrUnknownPeer), errors.Is(err, deadletter.ErrAbandoned):
		return err.Error()
	case errors.Is(err, record.ErrNotFound):
		return "no such record (unknown, or past retention)"
	}
	con.o.Log.Warn("console: store error", "error", err.Error())
	return "the state store does not answer; try again in a moment"
}

// consoleWho names who makes a signed-in console request, for the log.
func (con *Console) consoleWho(r *http.Request) string {
	who, _ := con.consoleIdentity(r)
	return who
}

// atoi reads a number of the query, def when it is absent.
func atoi(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/handoff/record"
)

// consoleApprovalsView is a page of the handoffs confirmation gates hold
// for this agent, soonest to expire first (docs/gates.md).
type consoleApprovalsView struct {
	Records []record.Record
	Total   int64
	// CanDecide is false when nobody is signed in as an identity that may
	// decide (an open console: no admin token).
	CanDecide bool
}

// consoleApprovalsMax is how many held handoffs the page lists.
const consoleApprovalsMax = 200

func (s *Server) consoleApprovals(w http.ResponseWriter, r *http.Request) {
	recs, total, err := s.book.Pending(r.Context(), s.cfg.Agent, 0, consoleApprovalsMax)
	if err != nil {
		s.consoleStoreError(w, r, err, "approvals")
		return
	}
	who, _ := s.consoleIdentity(r)
	s.consoleRender(w, r, http.StatusOK, "approvals.html", "approvals",
		consoleApprovalsView{Records: recs, Total: total, CanDecide: who != consoleAnonymous})
}

// consoleDecide approves or denies a held handoff as the signed-in
// identity (Server.Decide, as the approvals API does) and says what
// happened.
func (s *Server) consoleDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		who, _ := s.consoleIdentity(r)
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		const back = "/console/approvals"
		switch {
		case who == consoleAnonymous:
			s.consoleFlash(w, r, back, false, "Deciding needs an approver: sign in with the admin token or an approver's token.")
			return
		case !approve && reason == "":
			s.consoleFlash(w, r, back, false, "A denial needs a reason: the agent is told it.")
			return
		}
		res, err := s.Decide(r.Context(), id, who, approve, reason)
		var np *NotPendingError
		switch {
		case errors.As(err, &np):
			s.consoleFlash(w, r, back, false, "Not decided: "+err.Error()+".")
		case errors.Is(err, ErrSelfApproval), errors.Is(err, ErrNotHeld):
			s.consoleFlash(w, r, back, false, "Not decided: "+err.Error()+".")
		case err != nil:
			s.consoleFlash(w, r, back, false, "Not decided: "+s.consoleActionError(err))
		case !approve:
			s.log.Info("console: handoff denied", "record_id", id, "by", who)
			s.consoleFlash(w, r, back, true, "Denied "+id+": the agent is told "+fmt.Sprintf("%q", reason)+".")
		case res.Error != "":
			s.consoleFlash(w, r, back, false, fmt.Sprintf("Approved %s, and sending it failed: %s. It is a dead letter now.", id, res.Error))
		default:
			s.log.Info("console: handoff approved", "record_id", id, "by", who)
			s.consoleFlash(w, r, back, true, fmt.Sprintf("Approved %s: %s, status %d.", id, res.Record.State, res.Status))
		}
	}
}

package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/approval"
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

func (con *Console) consoleApprovals(w http.ResponseWriter, r *http.Request) {
	recs, total, err := con.o.Book.Pending(r.Context(), con.o.Config.Agent, 0, consoleApprovalsMax)
	if err != nil {
		con.consoleStoreError(w, r, err, "approvals")
		return
	}
	who, _ := con.consoleIdentity(r)
	con.consoleRender(w, r, http.StatusOK, "approvals.html", "approvals",
		consoleApprovalsView{Records: recs, Total: total, CanDecide: who != consoleAnonymous})
}

// consoleDecide approves or denies a held handoff as the signed-in
// identity (Server.Decide, as the approvals API does) and says what
// happened.
func (con *Console) consoleDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		who, _ := con.consoleIdentity(r)
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		const back = "/console/approvals"
		switch {
		case who == consoleAnonymous:
			con.consoleFlash(w, r, back, false, "Deciding needs an approver: sign in with the admin token or an approver's token.")
			return
		case !approve && reason == "":
			con.consoleFlash(w, r, back, false, "A denial needs a reason: the agent is told it.")
			return
		}
		res, err := con.o.Approvals.Decide(r.Context(), id, who, approve, reason)
		var np *approval.NotPendingError
		switch {
		case errors.As(err, &np):
			con.consoleFlash(w, r, back, false, "Not decided: "+err.Error()+".")
		case errors.Is(err, approval.ErrSelfApproval), errors.Is(err, approval.ErrNotHeld):
			con.consoleFlash(w, r, back, false, "Not decided: "+err.Error()+".")
		case err != nil:
			con.consoleFlash(w, r, back, false, "Not decided: "+con.consoleActionError(err))
		case !approve:
			con.o.Log.Info("console: handoff denied", "record_id", id, "by", who)
			con.consoleFlash(w, r, back, true, "Denied "+id+": the agent is told "+fmt.Sprintf("%q", reason)+".")
		case res.Error != "":
			con.consoleFlash(w, r, back, false, fmt.Sprintf("Approved %s, and sending it failed: %s. It is a dead letter now.", id, res.Error))
		default:
			con.o.Log.Info("console: handoff approved", "record_id", id, "by", who)
			con.consoleFlash(w, r, back, true, fmt.Sprintf("Approved %s: %s, status %d.", id, res.Record.State, res.Status))
		}
	}
}

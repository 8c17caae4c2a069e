package approval

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/records"
)

// The approvals on the admin listener (sidecar/routes.go lists them):
//
//	GET  /v1/approvals?offset=&limit=    this agent's pending approvals, soonest to expire first
//	GET  /v1/approvals/{id}              one approval (any state) with its checkpoint
//	POST /v1/approvals/{id}/approve      {"reason": "..."} optional
//	POST /v1/approvals/{id}/deny         {"reason": "..."} required
//
// Reading needs what the rest of the admin API needs (the admin token, when
// one is set) or an approver's token; deciding needs an approver identity
// (docs/gates.md), and the agent's own identity is refused.

// List serves GET /v1/approvals.
func (a *Approvals) List(w http.ResponseWriter, r *http.Request) {
	a.readApprovals(a.listApprovals)(w, r)
}

// Get serves GET /v1/approvals/{id}.
func (a *Approvals) Get(w http.ResponseWriter, r *http.Request) { a.readApprovals(a.getApproval)(w, r) }

// Approve serves POST /v1/approvals/{id}/approve.
func (a *Approvals) Approve(w http.ResponseWriter, r *http.Request) { a.decideHTTP(w, r, true) }

// Deny serves POST /v1/approvals/{id}/deny.
func (a *Approvals) Deny(w http.ResponseWriter, r *http.Request) { a.decideHTTP(w, r, false) }

// readApprovals lets a reader through: anyone when the admin API is open,
// else the admin or an approver.
func (a *Approvals) readApprovals(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.o.Config.AdminToken != "" {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if _, ok := a.Identity(tok); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="baton-admin"`)
				problem.Write(w, r, problem.Unauthorized, "the approvals API needs Authorization: Bearer <admin or approver token>")
				return
			}
		}
		h(w, r)
	}
}

// PendingPage is the JSON of GET /v1/approvals.
type PendingPage struct {
	Total   int64           `json:"total"`
	Offset  int             `json:"offset"`
	Limit   int             `json:"limit"`
	Records []record.Record `json:"records"`
}

func (a *Approvals) listApprovals(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := records.Page(w, r)
	if !ok {
		return
	}
	recs, total, err := a.o.Book.Pending(r.Context(), a.o.Config.Agent, offset, limit)
	if err != nil {
		records.StoreProblem(w, r, a.o.Log, err)
		return
	}
	for i := range recs {
		if recs[i].Request != nil {
			recs[i].Request.Body = nil // the list stays small; GET /v1/approvals/{id} has it
			redactCredentials(&recs[i])
		}
	}
	records.WriteJSON(w, http.StatusOK, PendingPage{Total: total, Offset: offset, Limit: limit, Records: recs})
}

func (a *Approvals) getApproval(w http.ResponseWriter, r *http.Request) {
	rec, ok := a.ownedRecord(w, r)
	if !ok {
		return
	}
	if rec.Approval == nil {
		problem.Write(w, r, problem.NotFound, rec.ID+" is a record no gate held")
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if who, _ := a.Identity(tok); who != "admin" {
		redactCredentials(rec)
	}
	records.WriteJSON(w, http.StatusOK, rec)
}

// credentialHeaders are the checkpoint's headers an approver never reads:
// what they decide on is the request, not the agent's secrets.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Api-Key"}

// redactCredentials replaces the credentials in rec's checkpoint.
func redactCredentials(rec *record.Record) {
	if rec.Request == nil || rec.Request.Header == nil {
		return
	}
	h := rec.Request.Header.Clone()
	for _, k := range credentialHeaders {
		if len(h[k]) > 0 {
			h[k] = []string{"[redacted]"}
		}
	}
	rec.Request.Header = h
}

// DecisionRequest is the JSON body of an approve or deny.
type DecisionRequest struct {
	Reason string `json:"reason"`
}

func (a *Approvals) decideHTTP(w http.ResponseWriter, r *http.Request, approve bool) {
	body, err := readBody(r)
	if err != nil {
		problem.Write(w, r, problem.BadRequest, "reading the body: "+err.Error())
		return
	}
	who, err := a.approverOf(r, body)
	if errors.Is(err, errNonceStore) {
		records.StoreProblem(w, r, a.o.Log, err)
		return
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="baton-approvals"`)
		problem.Write(w, r, problem.ApproverRequired, err.Error())
		return
	}
	var d DecisionRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &d); err != nil {
			problem.Write(w, r, problem.BadRequest, `the body must be JSON like {"reason": "..."}: `+err.Error())
			return
		}
	}
	if !approve && strings.TrimSpace(d.Reason) == "" {
		problem.Write(w, r, problem.BadRequest, "a denial needs a reason: the agent is told it")
		return
	}
	res, err := a.Decide(r.Context(), chi.URLParam(r, "id"), who, approve, d.Reason)
	if err != nil {
		a.decisionProblem(w, r, err)
		return
	}
	records.WriteJSON(w, http.StatusOK, res)
}

// decisionProblem answers a refused decision.
func (a *Approvals) decisionProblem(w http.ResponseWriter, r *http.Request, err error) {
	var np *NotPendingError
	switch {
	case errors.Is(err, ErrSelfApproval):
		problem.Write(w, r, problem.SelfApproval, err.Error())
	case errors.As(err, &np):
		d := problem.New(r, problem.NotPending, err.Error()).With("state", string(np.Record.State))
		if np.Record.Approval != nil && np.Record.Approval.By != "" {
			d.With("decided_by", np.Record.Approval.By)
		}
		d.Write(w)
	case errors.Is(err, ErrNotPending):
		problem.Write(w, r, problem.NotPending, err.Error())
	case errors.Is(err, ErrNotHeld):
		problem.Write(w, r, problem.NotFound, err.Error())
	default:
		a.recordProblem(w, r, err)
	}
}

// Poll serves the agent's side on the egress listener: GET
// PathPrefix+ID answers where its held handoff stands (202 while
// held, then the peer's answer, or the denial or expiry as a problem).
// Any other method there is the agent trying to decide its own handoff,
// refused.
func (a *Approvals) Poll(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, PathPrefix)
	id, action, _ := strings.Cut(rest, "/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		problem.Write(w, r, problem.SelfApproval, "an agent cannot decide its own handoffs; approvers decide them on the admin API or the console")
		return
	}
	if action != "" {
		problem.Write(w, r, problem.NotFound, "no such approval resource: GET "+PathPrefix+"{id}")
		return
	}
	rec, err := a.o.Book.Get(r.Context(), id)
	switch {
	case errors.Is(err, record.ErrNotFound) || (err == nil && (rec.Approval == nil || rec.From != a.o.Config.Agent)):
		problem.Write(w, r, problem.NotFound, "no approval "+id+" of this agent (unknown, or past retention)")
		return
	case err != nil:
		records.StoreProblem(w, r, a.o.Log, err)
		return
	}
	resp := a.answer(r, nil, rec)
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if r.Method != http.MethodHead {
		_, _ = io.Copy(w, resp.Body)
	}
}

// taskRead answers the agent's A2A task read (GetTask, tasks/get) of a task
// that is one of its approvals on this edge; nil for any other request.
func (a *Approvals) taskRead(req *http.Request, in *middleware.Info, peer string) *http.Response {
	if !isA2AGet(in) || !in.Buffered {
		return nil
	}
	var body struct {
		Params struct {
			ID   string `json:"id"`
			Name string `json:"name"` // A2A 1.0: "tasks/{id}"
		} `json:"params"`
	}
	if json.Unmarshal(in.Body, &body) != nil {
		return nil
	}
	id := body.Params.ID
	if id == "" {
		id = strings.TrimPrefix(body.Params.Name, "tasks/")
	}
	if record.TraceOf(id) == "" {
		return nil
	}
	rec, err := a.o.Book.Get(req.Context(), id)
	if err != nil || rec.Approval == nil || rec.From != a.o.Config.Agent || rec.To != peer {
		return nil
	}
	in.Call.Settle(middleware.CallAnswered)
	return a.answer(req, in, rec)
}

// ownedRecord reads the record of the path's {id}, one of this agent's own
// handoffs, answering the problem when it cannot.
func (a *Approvals) ownedRecord(w http.ResponseWriter, r *http.Request) (*record.Record, bool) {
	rec, err := a.o.Book.Get(r.Context(), chi.URLParam(r, "id"))
	if err == nil {
		err = records.Owned(a.o.Config.Agent, rec)
	}
	if err != nil {
		a.recordProblem(w, r, err)
		return nil, false
	}
	return rec, true
}

// recordProblem answers a failed read of, or action on, a record.
func (a *Approvals) recordProblem(w http.ResponseWriter, r *http.Request, err error) {
	var other *records.NotOwnerError
	if errors.As(err, &other) {
		problem.New(r, problem.NotThisAgent, err.Error()).With("owner", other.Owner).Write(w)
		return
	}
	records.StoreProblem(w, r, a.o.Log, err)
}

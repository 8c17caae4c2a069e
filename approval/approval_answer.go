package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
)

// PathPrefix is where, on the egress listener, the agent polls its
// held handoffs: the Location of a 202 answer.
const PathPrefix = "/.well-known/baton/approvals/"

// ApprovalView is the JSON the agent gets for a handoff that is held or
// being sent after approval (202), and the admin API for any approval.
type ApprovalView struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	Edge     string    `json:"edge"`
	TraceID  string    `json:"trace_id"`
	Gate     string    `json:"gate"`
	Expires  time.Time `json:"expires"`
	Decision string    `json:"decision,omitempty"`
	By       string    `json:"decided_by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Location string    `json:"location,omitempty"`
}

func approvalView(rec *record.Record, location string) ApprovalView {
	v := ApprovalView{ID: rec.ID, State: string(rec.State), Edge: rec.Edge(), TraceID: rec.TraceID, Location: location}
	if a := rec.Approval; a != nil {
		v.Gate, v.Expires, v.Decision, v.By, v.Reason = a.Gate, a.Expires, a.Decision, a.By, a.Reason
	}
	return v
}

// answer tells the agent where the approval rec stands, as the answer to
// its handoff (req) or to its poll of the approval's Location.
func (a *Approvals) answer(req *http.Request, in *middleware.Info, rec *record.Record) *http.Response {
	ctx := req.Context()
	if isA2AGet(in) {
		if resp := a.storedAnswer(ctx, req, in, rec); resp != nil {
			return resp
		}
		return a2aTaskAnswer(req, in, rec)
	}
	switch rec.State {
	case record.Denied:
		ap := rec.Approval
		d := newProblem(req, problem.ApprovalDenied, rec.Edge()+" handoff "+rec.ID+" was denied by "+ap.By+": "+ap.Reason).
			With("approval_id", rec.ID).With("decided_by", ap.By).With("reason", ap.Reason)
		return a.problem(req, in, d)
	case record.Expired:
		d := newProblem(req, problem.ApprovalExpired, rec.Edge()+" handoff "+rec.ID+" was not decided before "+
			rec.Approval.Expires.UTC().Format(time.RFC3339)+"; send it again to ask again").With("approval_id", rec.ID)
		return a.problem(req, in, d)
	case record.Delivered, record.Dead, record.Approved, record.Replayed:
		// Approved: the peer's answer is kept as soon as it came, before
		// the record's last write lands.
		if resp := a.storedAnswer(ctx, req, in, rec); resp != nil {
			return resp
		}
		if rec.State == record.Dead {
			d := newProblem(req, problem.UpstreamUnavailable, "approved, then dead-lettered: "+rec.Error).
				With("record_id", rec.ID)
			resp := a.problem(req, in, d)
			resp.Header.Set(middleware.HeaderDeadLetter, rec.ID)
			return resp
		}
	}
	// Held, or approved and being sent: ask again later.
	if isA2ASend(in) || isA2AGet(in) {
		return a2aTaskAnswer(req, in, rec)
	}
	loc := a.location(req, rec.ID)
	if in != nil && in.RPC != nil {
		// MCP has no pending state: a JSON-RPC error names the approval.
		d := newProblem(req, problem.ApprovalPending, rec.Edge()+" call held for confirmation ("+rec.Approval.Gate+
			") as "+rec.ID+"; its result will be at "+loc).
			With("approval_id", rec.ID).With("location", loc).With("expires", rec.Approval.Expires)
		return a.problem(req, in, d)
	}
	body, _ := json.Marshal(approvalView(rec, loc))
	resp := synthesized(req, http.StatusAccepted, "application/json", body)
	resp.Header.Set("Location", loc)
	resp.Header.Set("Retry-After", "5")
	resp.Header.Set(middleware.HeaderApproval, rec.ID+"; state="+string(rec.State))
	return resp
}

// location is the URL the agent polls an approval at: on the listener its
// request came in on.
func (a *Approvals) location(req *http.Request, id string) string {
	host := a.o.EgressAddr()
	if addr, ok := req.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		host = addr.String()
	}
	return "http://" + host + PathPrefix + id
}

// problem answers the agent with a problem: a JSON-RPC error on A2A and MCP
// requests.
func (a *Approvals) problem(req *http.Request, in *middleware.Info, d *problem.Details) *http.Response {
	w := newResponseBuffer()
	if in != nil && in.RPC != nil {
		d.WriteRPC(w, in.RPC.ID)
	} else {
		d.Write(w)
	}
	return w.response(req)
}

// storeDown answers a handoff a gate matched while the store cannot hold
// it: nothing is sent without approval.
func (a *Approvals) storeDown(req *http.Request, in *middleware.Info, err error) *http.Response {
	a.o.Log.Warn("approvals: store error: the gated handoff was not sent", "edge", in.Edge(), "error", err.Error())
	resp := a.problem(req, in, newProblem(req, problem.StoreUnavailable,
		"the handoff needs approval, and the state store that holds it does not answer; nothing was sent"))
	resp.Header.Set("Retry-After", "1")
	return resp
}

func newProblem(req *http.Request, c problem.Class, detail string) *problem.Details {
	return problem.New(req, c, detail)
}

func notHoldable(req *http.Request, edge string, limit int64) *problem.Details {
	return newProblem(req, problem.NotHoldable, edge+" needs approval, and its body was streamed or is over records.max_body_bytes ("+
		strconv.FormatInt(limit, 10)+"): it can be neither held nor sent")
}

// storedAnswer is the peer's answer to the approved handoff, when kept.
func (a *Approvals) storedAnswer(ctx context.Context, req *http.Request, in *middleware.Info, rec *record.Record) *http.Response {
	b, err := a.o.Store.Get(ctx, answerKey(rec.ID))
	if err != nil {
		return nil
	}
	var kept keptAnswer
	if json.Unmarshal(b, &kept) != nil {
		return nil
	}
	if isA2AGet(in) {
		return a2aTaskFromAnswer(req, in, rec, kept)
	}
	resp := synthesized(req, kept.Status, kept.ContentType, kept.Body)
	resp.Header.Set(middleware.HeaderApproval, rec.ID+"; state="+string(rec.State)+"; decision=approved")
	if rec.Key != "" {
		resp.Header.Set(middleware.HeaderIdempotencyKey, middleware.QuoteKey(rec.Key))
	}
	if rec.State == record.Dead {
		resp.Header.Set(middleware.HeaderDeadLetter, rec.ID)
	} else if kept.DeadLetter != "" {
		resp.Header.Set(middleware.HeaderDeadLetter, kept.DeadLetter)
	}
	if kept.Truncated {
		resp.Header.Set(middleware.HeaderApproval, resp.Header.Get(middleware.HeaderApproval)+"; truncated")
	}
	return resp
}

// keptAnswer is the peer's answer to an approved handoff, as stored.
type keptAnswer struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Body        []byte `json:"body,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	DeadLetter  string `json:"dead_letter,omitempty"`
}

// keepAnswer stores the peer's answer to the approved handoff id for the
// agent to poll (up to MaxAnswerBytes of its body).
func (a *Approvals) KeepAnswer(ctx context.Context, id string, resp *http.Response, body []byte) {
	k := keptAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: body}
	if resp.Header.Get(middleware.HeaderDeadLetter) != "" {
		k.DeadLetter = resp.Header.Get(middleware.HeaderDeadLetter)
	}
	if len(body) > MaxAnswerBytes {
		k.Body, k.Truncated = body[:MaxAnswerBytes], true
	}
	b, _ := json.Marshal(k)
	if err := a.o.Store.Set(context.WithoutCancel(ctx), answerKey(id), b, a.retention); err != nil {
		a.o.Log.Warn("approvals: the answer to an approved handoff was not kept: the agent's poll will not get it",
			"record_id", id, "error", err.Error())
	}
}

// responseBuffer is an http.ResponseWriter that keeps what is written, to
// answer from a RoundTripper what a handler would write.
type responseBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newResponseBuffer() *responseBuffer { return &responseBuffer{header: http.Header{}} }

func (b *responseBuffer) Header() http.Header { return b.header }
func (b *responseBuffer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
func (b *responseBuffer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

func (b *responseBuffer) response(req *http.Request) *http.Response {
	resp := synthesized(req, b.status, "", b.body.Bytes())
	for k, v := range b.header {
		resp.Header[k] = v
	}
	return resp
}

// synthesized is an answer Baton makes itself.
func synthesized(req *http.Request, status int, contentType string, body []byte) *http.Response {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	return &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}
}

// isA2ASend reports an A2A send request; isA2AGet an A2A task read.
func isA2ASend(in *middleware.Info) bool {
	if in == nil || in.RPC == nil || in.RPC.MCP != nil {
		return false
	}
	switch in.RPC.Method {
	case "SendMessage", "message/send":
		return true
	}
	return false
}

func isA2AGet(in *middleware.Info) bool {
	if in == nil || in.RPC == nil || in.RPC.MCP != nil {
		return false
	}
	switch in.RPC.Method {
	case "GetTask", "tasks/get":
		return true
	}
	return false
}

// a2aV1 reports whether the request speaks A2A 1.0 (PascalCase methods)
// rather than 0.3 (slash-separated).
func a2aV1(in *middleware.Info) bool { return !strings.Contains(in.RPC.Method, "/") }

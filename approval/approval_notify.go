package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/batonproxy/baton/handoff/record"
)

// notifier POSTs a notice to approvals.notify for each approval that starts
// pending, off the request path: a person learns there is something to
// decide. A notice that fails is retried twice (after 1 s and 2 s), then
// logged; the approval is pending all the same (the console and `baton
// approvals` list it).
type notifier struct {
	url    string
	client *http.Client
	log    *slog.Logger
}

// ApprovalNotice is the JSON body of the notification webhook.
type ApprovalNotice struct {
	Type    string    `json:"type"` // "baton.approval.pending"
	ID      string    `json:"id"`
	Agent   string    `json:"agent"` // the Baton's agent, whose handoff is held
	Edge    string    `json:"edge"`
	TraceID string    `json:"trace_id"`
	Gate    string    `json:"gate"`
	Method  string    `json:"method"`
	Target  string    `json:"target"`
	Call    string    `json:"call,omitempty"`
	Trust   []string  `json:"trust,omitempty"`
	Intent  string    `json:"intent,omitempty"`
	Expires time.Time `json:"expires"`
	// Decide says how: the CLI commands and the admin API paths.
	Decide []string `json:"decide"`
}

func newNotifier(url string, log *slog.Logger) *notifier {
	if url == "" {
		return nil
	}
	return &notifier{url: url, client: &http.Client{Timeout: 10 * time.Second}, log: log}
}

// pending sends the notice of rec in the background.
func (n *notifier) pending(rec *record.Record, agent string) {
	if n == nil {
		return
	}
	notice := ApprovalNotice{Type: "baton.approval.pending", ID: rec.ID, Agent: agent, Edge: rec.Edge(), TraceID: rec.TraceID,
		Gate: rec.Approval.Gate, Method: rec.Method, Target: rec.Target, Call: rec.Call, Trust: rec.Trust,
		Expires: rec.Approval.Expires, Decide: []string{
			"baton approve " + rec.ID, "baton deny " + rec.ID + " --reason TEXT",
			"POST /v1/approvals/" + rec.ID + "/approve", "POST /v1/approvals/" + rec.ID + "/deny",
		}}
	if rec.Envelope != nil {
		notice.Intent = rec.Envelope.Intent
	}
	body, _ := json.Marshal(notice)
	go n.send(rec.ID, body)
}

func (n *notifier) send(id string, body []byte) {
	var last string
	for try := range 3 {
		if try > 0 {
			time.Sleep(time.Duration(try) * time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := n.client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
	}
	n.log.Warn("approvals: notification not delivered", "record_id", id, "error", last)
}

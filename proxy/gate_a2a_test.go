package proxy_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/batonproxy/baton/approval"
)

// An A2A agent (the official SDK's client) whose message needs approval
// gets a task in auth-required; its GetTask of that task follows the
// approval, and after approval it gets the summarizer's reply, which the
// summarizer's executor produced once.
func TestGateA2ATaskFollowsApproval(t *testing.T) {
	exec := &a2aExecutor{reply: a2aSummarize}
	p := startA2APathWith(t, exec, a2aRoutes[0], "", "admin_token: "+adminTok+"\n"+
		"edges: [{to: summarizer, confirm: {when: [{name: refund skill, call: message/send, skill: refund}]}}]\n", nil)
	ctx, cancel := context.WithTimeout(t.Context(), a2aDeadline)
	defer cancel()

	// A message for another skill is not held.
	if _, err := p.client.SendMessage(ctx, a2aParams("m-plain", "hello", nil)); err != nil {
		t.Fatalf("SendMessage (not gated): %v", err)
	}
	params := a2aParams("m-refund", "refund order A-1042", nil)
	params.Message.ContextID = "ctx-refunds"
	params.Message.Metadata = map[string]any{"skill": "refund"}
	res, err := p.client.SendMessage(ctx, params)
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateAuthRequired || task.ContextID != "ctx-refunds" {
		t.Fatalf("SendMessage result %T %+v: want a task in auth-required in ctx-refunds", res, res)
	}
	if n := len(exec.executions()); n != 1 {
		t.Fatalf("the summarizer ran %d times, want once (the plain message)", n)
	}
	got, err := p.client.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateAuthRequired {
		t.Fatalf("GetTask while held: %+v, %v", got, err)
	}

	if st, doc := decide(t, p.sender.AdminAddr(), string(task.ID), "approve", adminTok, "ok"); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, doc)
	}
	got, err = p.client.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatalf("GetTask after approval: %v", err)
	}
	if got.Status.State != a2a.TaskStateCompleted || got.Status.Message == nil ||
		a2aText(got.Status.Message) != "summary of: refund order A-1042" {
		t.Fatalf("GetTask after approval: %+v", got)
	}
	calls := exec.executions()
	if len(calls) != 2 || calls[1].msg.ID != "m-refund" {
		t.Fatalf("the summarizer ran %d times, want twice", len(calls))
	}

	// A denied one is a rejected task.
	params = a2aParams("m-refund-2", "refund order A-2000", nil)
	params.Message.Metadata = map[string]any{"skill": "refund"}
	res, err = p.client.SendMessage(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	held := res.(*a2a.Task)
	if st, doc := decide(t, p.sender.AdminAddr(), string(held.ID), "deny", adminTok, "duplicate of A-1042"); st != http.StatusOK {
		t.Fatalf("deny: %d %v", st, doc)
	}
	got, err = p.client.GetTask(ctx, &a2a.TaskQueryParams{ID: held.ID})
	if err != nil || got.Status.State != a2a.TaskStateRejected || !strings.Contains(a2aText(got.Status.Message), "duplicate of A-1042") {
		t.Fatalf("GetTask after denial: %+v, %v", got, err)
	}
	if len(exec.executions()) != 2 {
		t.Fatal("a denied message reached the summarizer")
	}
	_ = approval.PathPrefix
}

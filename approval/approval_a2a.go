package approval

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
)

// On A2A, a held handoff is a task: the answer to the agent's SendMessage
// (message/send in A2A 0.3) is a task whose id is the approval's, in state
// auth-required, and the agent's GetTask (tasks/get) of that id is answered
// by Baton with where the approval stands: auth-required while held,
// working while the approved handoff is sent, the peer's own answer once it
// came (its task, or its message as a completed task), rejected when
// denied, failed when expired or dead-lettered.

// a2aStates maps a record's state to the A2A 0.3 and 1.0 task states.
var a2aStates = map[record.State][2]string{
	record.Held:      {"auth-required", "TASK_STATE_AUTH_REQUIRED"},
	record.Approved:  {"working", "TASK_STATE_WORKING"},
	record.Replayed:  {"working", "TASK_STATE_WORKING"},
	record.Denied:    {"rejected", "TASK_STATE_REJECTED"},
	record.Expired:   {"failed", "TASK_STATE_FAILED"},
	record.Dead:      {"failed", "TASK_STATE_FAILED"},
	record.Delivered: {"completed", "TASK_STATE_COMPLETED"},
}

// a2aTaskAnswer answers an A2A send or task read with the approval as a
// task.
func a2aTaskAnswer(req *http.Request, in *middleware.Info, rec *record.Record) *http.Response {
	text := "held for confirmation (" + rec.Approval.Gate + ") until " + rec.Approval.Expires.UTC().Format(time.RFC3339) +
		"; get this task to learn the decision"
	switch rec.State {
	case record.Approved:
		text = "approved by " + rec.Approval.By + "; being sent"
	case record.Denied:
		text = "denied by " + rec.Approval.By + ": " + rec.Approval.Reason
	case record.Expired:
		text = "the approval expired undecided"
	case record.Dead:
		text = "approved, then dead-lettered: " + rec.Error
	case record.Replayed:
		text = "approved, and its dead letter is being replayed"
	case record.Delivered:
		text = "approved and delivered; the peer's answer was not kept"
	}
	task := a2aTask(in, rec, a2aStatusMessage(in, rec.ID+"-status", text))
	result := any(task)
	if a2aV1(in) && isA2ASend(in) {
		result = map[string]any{"task": task}
	}
	return a2aResult(req, in, result)
}

// a2aTask builds the task that stands for the approval rec.
func a2aTask(in *middleware.Info, rec *record.Record, status map[string]any) map[string]any {
	st := a2aStates[rec.State]
	state := st[0]
	if a2aV1(in) {
		state = st[1]
	}
	status["state"] = state
	status["timestamp"] = rec.Updated.UTC().Format(time.RFC3339Nano)
	task := map[string]any{"id": rec.ID, "contextId": a2aContextOf(in, rec), "status": status,
		"metadata": map[string]any{"baton.approval": approvalView(rec, "")}}
	if !a2aV1(in) {
		task["kind"] = "task"
	}
	return task
}

// a2aStatusMessage is a task status carrying an agent message of text.
func a2aStatusMessage(in *middleware.Info, id, text string) map[string]any {
	msg := map[string]any{"messageId": id, "role": "agent", "parts": []any{map[string]any{"kind": "text", "text": text}}}
	if a2aV1(in) {
		msg = map[string]any{"messageId": id, "role": "ROLE_AGENT", "parts": []any{map[string]any{"text": text}}}
	} else {
		msg["kind"] = "message"
	}
	return map[string]any{"message": msg}
}

// a2aContextOf is the A2A context the held message belongs to: the one the
// request names, else the held message's own, else the approval id.
func a2aContextOf(in *middleware.Info, rec *record.Record) string {
	if isA2ASend(in) && in.RPC.ContextID != "" {
		return in.RPC.ContextID
	}
	if rec.Request != nil {
		var held struct {
			Params struct {
				Message struct {
					ContextID string `json:"contextId"`
				} `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(rec.Request.Body, &held) == nil && held.Params.Message.ContextID != "" {
			return held.Params.Message.ContextID
		}
	}
	return rec.ID
}

// a2aTaskFromAnswer answers a task read with the peer's answer to the
// approved send: its task as it is, or its message as a completed task.
func a2aTaskFromAnswer(req *http.Request, in *middleware.Info, rec *record.Record, kept keptAnswer) *http.Response {
	var peer struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(kept.Body, &peer) != nil || (len(peer.Result) == 0 && len(peer.Error) == 0) {
		st := rec.State
		rec.State = record.Dead
		rec.Error = "the peer's answer was not JSON-RPC (HTTP " + http.StatusText(kept.Status) + ")"
		defer func() { rec.State = st }()
		return a2aTaskAnswer(req, in, rec)
	}
	if len(peer.Error) > 0 {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpcID(in), "error": peer.Error})
		return synthesized(req, http.StatusOK, "application/json", body)
	}
	done := *rec
	done.State = record.Delivered // the peer answered, whatever write of rec is still on its way
	rec = &done
	var result map[string]any
	if json.Unmarshal(peer.Result, &result) != nil {
		return a2aResult(req, in, peer.Result)
	}
	if t, ok := result["task"].(map[string]any); ok { // A2A 1.0
		return a2aResult(req, in, t)
	}
	if m, ok := result["message"].(map[string]any); ok {
		return a2aResult(req, in, a2aTask(in, rec, map[string]any{"message": m}))
	}
	if result["kind"] == "message" {
		return a2aResult(req, in, a2aTask(in, rec, map[string]any{"message": result}))
	}
	return a2aResult(req, in, result)
}

func rpcID(in *middleware.Info) json.RawMessage {
	if len(in.RPC.ID) == 0 {
		return json.RawMessage("null")
	}
	return in.RPC.ID
}

// a2aResult is a JSON-RPC success answer to the agent's request.
func a2aResult(req *http.Request, in *middleware.Info, result any) *http.Response {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpcID(in), "result": result})
	return synthesized(req, http.StatusOK, "application/json", body)
}

package middleware

// An A2A agent reports a failure inside a 200: a task whose state is failed,
// or a JSON-RPC internal error. To the chain's promise such an answer is the
// agent's failure as surely as a 500 is: the receiving Baton's dedupe window
// releases its key instead of keeping it (so a re-sent chain runs the step
// again), the sending Baton dead-letters it where it happened and never
// retries it, and a Baton whose agent answers so after a handoff of its own
// was dead-lettered names that dead letter upstream (retry pushback).
// A2AFailed is the one reading of such answers, for all three.

import (
	"bytes"
	"encoding/json"
	"strings"
)

// rpcInternalError is JSON-RPC's "Internal error": the server failed. The
// other codes (invalid params, A2A's task not found, unsupported operation)
// are the caller's mistakes or the agent's decisions: final answers.
const rpcInternalError = -32603

// A2ASendMethod reports whether method sends an A2A message (v1.0
// SendMessage, SendStreamingMessage; v0.3 message/send, message/stream).
func A2ASendMethod(method string) bool { return a2aSend[method] }

// A2AFailed reports whether body, an answer to an A2A request, says the
// agent failed: a JSON-RPC internal error, or a task (or task status
// update) whose state is failed, in v1.0 (TASK_STATE_FAILED) or v0.3
// (failed) form. A server-sent event stream fails when any of its events
// does. Anything else, malformed bodies included, is no failure.
func A2AFailed(body []byte, contentType string) bool {
	if len(body) == 0 || !bytes.Contains(body, []byte(`"jsonrpc"`)) {
		return false
	}
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return rpcAnswerFailed(body)
	}
	for len(body) > 0 {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte("\n"))
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok && rpcAnswerFailed(data) {
			return true
		}
	}
	return false
}

// a2aState is a task status as A2A v1.0 and v0.3 write it.
type a2aState struct {
	State string `json:"state"`
}

func (s *a2aState) failed() bool {
	return s != nil && (s.State == "TASK_STATE_FAILED" || s.State == "failed")
}

// rpcAnswerFailed reads one JSON-RPC answer.
func rpcAnswerFailed(msg []byte) bool {
	if !bytes.Contains(msg, []byte("failed")) && !bytes.Contains(msg, []byte("FAILED")) && !bytes.Contains(msg, []byte(`"error"`)) {
		return false // neither a failed state nor an error: nothing to decode
	}
	var m struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result *struct {
			Status *a2aState `json:"status"` // v0.3: the task or status update itself
			Task   *struct {
				Status *a2aState `json:"status"`
			} `json:"task"` // v1.0
			StatusUpdate *struct {
				Status *a2aState `json:"status"`
			} `json:"statusUpdate"` // v1.0, in a stream
		} `json:"result"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return false
	}
	if m.Error != nil {
		return m.Error.Code == rpcInternalError
	}
	r := m.Result
	if r == nil {
		return false
	}
	return r.Status.failed() || (r.Task != nil && r.Task.Status.failed()) ||
		(r.StatusUpdate != nil && r.StatusUpdate.Status.failed())
}

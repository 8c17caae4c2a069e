package middleware

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/batonproxy/baton/problem"
)

// RPC describes a JSON-RPC 2.0 request (A2A speaks JSON-RPC): on such a
// request Baton's refusals are JSON-RPC error objects, as A2A requires.
type RPC struct {
	ID     json.RawMessage
	Method string
	// MessageID and Parts are those of an A2A send request's message: what
	// identifies the handoff, whatever JSON-RPC id or metadata it carries.
	MessageID string
	Parts     json.RawMessage
	// ContextID and TaskID tie an agent's later A2A calls to this one.
	ContextID, TaskID string
	// MCP is set on a Model Context Protocol request (mcp.go).
	MCP *MCPRequest
}

// sniffRPC notes in in.RPC whether body is a JSON-RPC request (A2A), or a
// Model Context Protocol message or batch (mcp.go). Bodies that are not
// JSON mentioning "jsonrpc" are never parsed.
func sniffRPC(in *Info, r *http.Request, body []byte) {
	if len(body) == 0 || !strings.Contains(strings.ToLower(r.Header.Get("Content-Type")), "json") {
		return
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') || !bytes.Contains(body, []byte(`"jsonrpc"`)) {
		return
	}
	if trimmed[0] == '[' {
		sniffMCPBatch(in, r, body)
		return
	}
	var req rpcMessage
	if json.Unmarshal(body, &req) != nil || req.JSONRPC != "2.0" {
		return
	}
	if req.Method == "" {
		// A response: an MCP client answering its server's request.
		if mcpHeaders(r) && len(req.ID) > 0 {
			in.RPC = &RPC{ID: req.ID, MCP: &MCPRequest{Calls: []MCPCall{{ID: req.ID}}}}
			in.RPC.MCP.headers(r)
		}
		return
	}
	in.RPC = &RPC{ID: req.ID, Method: req.Method}
	if a2aSend[req.Method] {
		m := req.Params.Message
		in.RPC.MessageID, in.RPC.Parts, in.RPC.ContextID, in.RPC.TaskID = m.MessageID, m.Parts, m.ContextID, m.TaskID
	}
	if mcpMethod(req.Method) || (mcpHeaders(r) && !a2aMethod(req.Method)) {
		in.RPC.MCP = &MCPRequest{Calls: []MCPCall{req.call()}}
		in.RPC.MCP.headers(r)
	}
}

// Describe names the call for records: the method, and for an MCP tool
// call the tool.
func (r *RPC) Describe() string {
	if r == nil {
		return ""
	}
	if r.MCP != nil {
		return r.MCP.Describe()
	}
	return r.Method
}

// rpcMessage is what Baton reads of one JSON-RPC message.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Message struct {
			MessageID string          `json:"messageId"`
			Parts     json.RawMessage `json:"parts"`
			ContextID string          `json:"contextId"`
			TaskID    string          `json:"taskId"`
		} `json:"message"`
		// Name and Arguments are an MCP tools/call's.
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

// withRPCID rewrites the JSON-RPC id of a stored response (a JSON object,
// or a server-sent event stream of them) to id, so that a replay answers the
// request at hand: a client that resends a message gives it a new id.
func withRPCID(body []byte, contentType string, id json.RawMessage) []byte {
	if len(id) == 0 {
		return body
	}
	if strings.HasPrefix(contentType, "text/event-stream") {
		lines := bytes.Split(body, []byte("\n"))
		for i, l := range lines {
			if data, ok := bytes.CutPrefix(l, []byte("data:")); ok {
				lines[i] = append([]byte("data: "), rpcID(bytes.TrimSpace(data), id)...)
			}
		}
		return bytes.Join(lines, []byte("\n"))
	}
	return rpcID(body, id)
}

func rpcID(msg []byte, id json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil || m["jsonrpc"] == nil || m["method"] != nil || m["id"] == nil {
		return msg // not a response: a notification (MCP progress) keeps no id
	}
	m["id"] = id
	out, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	return out
}

// refuse writes d as a problem document, or as a JSON-RPC error object when
// the request is JSON-RPC.
func refuse(w http.ResponseWriter, r *http.Request, d *problem.Details) {
	if in := InfoFromContext(r.Context()); in != nil && in.RPC != nil {
		d.WriteRPC(w, in.RPC.ID)
		return
	}
	d.Write(w)
}

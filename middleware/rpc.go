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
}

// sniffRPC notes in in.RPC whether body is a JSON-RPC request. Bodies that
// are not JSON objects mentioning "jsonrpc" are never parsed.
func sniffRPC(in *Info, r *http.Request, body []byte) {
	if len(body) == 0 || !strings.Contains(r.Header.Get("Content-Type"), "json") {
		return
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(body, []byte(`"jsonrpc"`)) {
		return
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
	}
	if json.Unmarshal(body, &req) != nil || req.JSONRPC != "2.0" || req.Method == "" {
		return
	}
	in.RPC = &RPC{ID: req.ID, Method: req.Method}
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

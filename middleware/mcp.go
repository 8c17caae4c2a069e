package middleware

// MCP gives Model Context Protocol traffic (the Streamable HTTP transport:
// JSON-RPC messages POSTed to one endpoint, answered with JSON or a
// server-sent event stream; revisions 2025-03-26, 2025-06-18 and later) the
// handoff semantics A2A gets, at both edges (docs/mcp.md):
//
//   - tools/call is a handoff: its key (by position, or from the tool and
//     its arguments, never the JSON-RPC id or _meta), the receiver's dedupe
//     window, records and dead letters. initialize, tools/list,
//     resources/read, ping, notifications and the client's responses are
//     not: they get no key and pass by every window.
//   - each edge may allow and deny tools by name or glob (edges[].mcp); a
//     denied call is refused before it leaves the pod, and again at the
//     receiving Baton, with a JSON-RPC error;
//   - W3C trace context is carried in params._meta (traceparent and
//     tracestate, as MCP SDKs read it) as well as in headers, so that a
//     server that reads only _meta joins the trace;
//   - a message that says it is MCP (its headers, or its edge's mcp block)
//     but is not JSON-RPC, and a batch of more than MaxMCPBatch messages, are
//     refused with a JSON-RPC error and nothing is forwarded.
//
// Everything else passes untouched: Mcp-Session-Id, MCP-Protocol-Version,
// GET streams and their resumption (Last-Event-ID), DELETE, and every
// answer, streamed as it comes.
//
// The message's bytes (the case check and the _meta rewrite) are in
// mcp_body.go. The middleware sits at egress after IdempotencyKey and Policy (the key is
// derived from the message as the agent sent it), and at ingress after
// Receipt and before Dedupe. It fails closed: a message it refuses is not
// forwarded.

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/problem"
)

// MCP headers.
const (
	HeaderMCPSession  = "Mcp-Session-Id"
	HeaderMCPProtocol = "Mcp-Protocol-Version"
)

// MaxMCPBatch bounds the messages of one JSON-RPC batch.
const MaxMCPBatch = 64

// MCPToolsCall is the method that makes a handoff.
const MCPToolsCall = "tools/call"

// MCPRequest is what Baton knows of an MCP POST: its messages (one, or a
// batch's), and its session and protocol revision.
type MCPRequest struct {
	Calls            []MCPCall
	Batch            bool
	Session, Version string
}

// MCPCall is one JSON-RPC message of an MCP POST: a request (Method and
// ID), a notification (Method, no ID) or a response (ID only).
type MCPCall struct {
	Method string
	ID     json.RawMessage
	// Tool and Arguments are a tools/call's.
	Tool      string
	Arguments json.RawMessage
}

// Handoff reports whether the POST calls a tool: a handoff, with a key and
// the receiver's window.
func (m *MCPRequest) Handoff() bool {
	for _, c := range m.Calls {
		if c.Method == MCPToolsCall {
			return true
		}
	}
	return false
}

// Describe names the POST for records and logs: "tools/call search_web",
// "tools/list", "batch of 3".
func (m *MCPRequest) Describe() string {
	if m.Batch {
		return "batch of " + strconv.Itoa(len(m.Calls))
	}
	c := m.Calls[0]
	switch {
	case c.Method == "":
		return "response"
	case c.Tool != "":
		return c.Method + " " + c.Tool
	}
	return c.Method
}

// fingerprintInput is what identifies the POST's messages, whatever their
// _meta: each one's method, JSON-RPC id, tool and arguments. Two calls of
// one tool with the same arguments are two calls (their ids differ); a
// retry of one (the same id) is the same.
func (m *MCPRequest) fingerprintInput() []byte {
	var b []byte
	for _, c := range m.Calls {
		b = appendField(b, c.Method)
		b = appendField(b, string(c.ID))
		b = appendField(b, c.Tool)
		b = appendField(b, string(c.Arguments))
	}
	return b
}

func (m *MCPRequest) headers(r *http.Request) {
	m.Session, m.Version = r.Header.Get(HeaderMCPSession), r.Header.Get(HeaderMCPProtocol)
}

func (req *rpcMessage) call() MCPCall {
	c := MCPCall{Method: req.Method, ID: req.ID}
	if req.Method == MCPToolsCall {
		c.Tool, c.Arguments = req.Params.Name, req.Params.Arguments
	}
	return c
}

// mcpHeaders reports whether the request says it is MCP by its headers.
func mcpHeaders(r *http.Request) bool {
	return r.Header.Get(HeaderMCPProtocol) != "" || r.Header.Get(HeaderMCPSession) != ""
}

// mcpMethod reports whether method is one of MCP's (tasks/ is not counted:
// A2A v0.3 has tasks/get too).
func mcpMethod(method string) bool {
	if method == "initialize" || method == "ping" {
		return true
	}
	for _, p := range [...]string{"tools/", "resources/", "prompts/", "notifications/", "completion/",
		"logging/", "sampling/", "roots/", "elicitation/"} {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// a2aMethod reports an A2A method: v1.0's are PascalCase (SendMessage,
// GetTask), v0.3's sends are message/…. An A2A request stays A2A whatever
// headers it carries.
func a2aMethod(method string) bool {
	return a2aSend[method] || (method != "" && 'A' <= method[0] && method[0] <= 'Z')
}

// sniffMCPBatch notes a JSON-RPC batch (an array of messages) as MCP; its
// size is checked by the middleware.
func sniffMCPBatch(in *Info, r *http.Request, body []byte) {
	var msgs []rpcMessage
	if json.Unmarshal(body, &msgs) != nil || len(msgs) == 0 {
		return
	}
	m := &MCPRequest{Batch: true, Calls: make([]MCPCall, 0, min(len(msgs), MaxMCPBatch+1))}
	for i := range msgs {
		if msgs[i].JSONRPC != "2.0" {
			return
		}
		m.Calls = append(m.Calls, msgs[i].call())
	}
	m.headers(r)
	in.RPC = &RPC{ID: json.RawMessage("null"), Method: "batch", MCP: m}
}

// MCPPolicy is one edge's MCP policy: the tools it may call. Patterns are
// path.Match globs ("search_*"); deny wins over allow, and an empty allow
// list allows every tool not denied.
type MCPPolicy struct {
	On          bool // the edge is MCP: every POST on it must be JSON-RPC
	Allow, Deny []string
}

// allows reports whether tool may be called, and the pattern that decided.
func (p MCPPolicy) allows(tool string) (bool, string) {
	for _, g := range p.Deny {
		if ok, _ := path.Match(g, tool); ok {
			return false, "denied by " + strconv.Quote(g)
		}
	}
	if len(p.Allow) == 0 {
		return true, ""
	}
	for _, g := range p.Allow {
		if ok, _ := path.Match(g, tool); ok {
			return true, ""
		}
	}
	return false, "not in the edge's allowed tools"
}

// Span attributes of MCP requests (the OpenTelemetry MCP conventions).
var (
	attrMCPMethod  = attribute.Key("mcp.method.name")
	attrMCPTool    = attribute.Key("gen_ai.tool.name")
	attrMCPSession = attribute.Key("mcp.session.id")
)

// MCPObserver is told of each tools/call the middleware passed on or
// refused: its tool, its outcome (MCPOutcome*) and how long it took.
type MCPObserver func(in *Info, tool, outcome string, d time.Duration)

// Tool call outcomes, as MCPObserver is told them.
const (
	MCPOutcomeOK      = "ok"      // answered 2xx
	MCPOutcomeError   = "error"   // answered otherwise, or not at all
	MCPOutcomeRefused = "refused" // refused by this Baton: the tool is denied
)

// MCPSessions knows which agent opened each MCP session the local agent
// serves (ingress).
type MCPSessions interface {
	// Owner returns the agent that opened session sid, or "" when it is
	// not known.
	Owner(ctx context.Context, sid string) (string, error)
}

// MCPOptions configure the middleware.
type MCPOptions struct {
	// Policy gives the MCP policy of the edge a request is on: at egress
	// the peer's, at ingress the sender's.
	Policy func(in *Info) MCPPolicy
	// Observe, when set, is told of each tool call.
	Observe MCPObserver
	// Sessions, when set (ingress), refuses a request in a session another
	// agent opened.
	Sessions MCPSessions
	Log      *slog.Logger
}

// MCP returns the middleware.
func MCP(o MCPOptions) func(http.Handler) http.Handler {
	policy, observe := o.Policy, o.Observe
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			if o.Sessions != nil && !sessionOwned(w, r, in, o) {
				return
			}
			if r.Method != http.MethodPost || (in.Side == Egress && !in.Handoff()) {
				next.ServeHTTP(w, r)
				return
			}
			pol := policy(in)
			if !in.Buffered && !pol.On && !mcpHeaders(r) {
				// Not known to be MCP, and reading the body to find out
				// would hold up a stream: it passes as it came.
				next.ServeHTTP(w, r)
				return
			}
			if !Buffer(w, r, in) {
				return
			}
			sniffed := in.RPC == nil
			if sniffed {
				sniffRPC(in, r, in.Body)
			}
			m := (*MCPRequest)(nil)
			if in.RPC != nil {
				m = in.RPC.MCP
			}
			if m == nil && sniffed {
				in.RPC = nil // not MCP: what follows finds the request as it was
			}
			if m != nil && ambiguousKeys(in.Body) {
				in.PolicyDenial = "mcp"
				problem.New(r, problem.BadJSONRPC, "a JSON-RPC object holds two keys that differ only in case").
					WriteRPC(w, in.RPC.ID)
				return
			}
			if m == nil && pol.On && rpcResponse(in.Body) {
				next.ServeHTTP(w, r) // a client's answer to its server, without MCP headers (2025-03-26)
				return
			}
			if m == nil {
				if pol.On || mcpHeaders(r) {
					in.PolicyDenial = "mcp"
					problem.New(r, problem.BadJSONRPC, "an MCP POST must be a JSON-RPC 2.0 message or batch").
						WriteRPC(w, nil)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			if len(m.Calls) > MaxMCPBatch {
				problem.New(r, problem.BatchTooLarge, "a batch may hold at most "+strconv.Itoa(MaxMCPBatch)+
					" messages, this one holds "+strconv.Itoa(len(m.Calls))).With("max_batch", MaxMCPBatch).WriteRPC(w, nil)
				return
			}
			for _, c := range m.Calls {
				if c.Method != MCPToolsCall {
					continue
				}
				if ok, why := pol.allows(c.Tool); !ok {
					if observe != nil {
						observe(in, c.Tool, MCPOutcomeRefused, 0)
					}
					in.PolicyDenial = "tool"
					refuse(w, r, problem.New(r, problem.ToolDenied, "tool "+strconv.Quote(c.Tool)+" on edge "+
						in.Edge()+": "+why).With("tool", c.Tool))
					return
				}
			}
			mcpSpan(r, m)
			if tp := r.Header.Get(HeaderTraceparent); tp != "" {
				if body, ok := withTraceMeta(in.Body, tp, r.Header.Get("Tracestate")); ok {
					replaceBody(r, in, body)
				}
			}
			start := time.Now()
			next.ServeHTTP(w, r)
			if observe != nil && !m.Batch && m.Calls[0].Method == MCPToolsCall {
				outcome := MCPOutcomeOK
				switch s := in.Status(); {
				case in.PolicyDenial != "" || in.SignatureFailure != "":
					outcome = MCPOutcomeRefused // by a later step of this Baton
				case s < 200 || s > 299 || in.Err != nil:
					outcome = MCPOutcomeError
				}
				observe(in, m.Calls[0].Tool, outcome, time.Since(start))
			}
		})
	}
}

// sessionOwned refuses, and reports false for, a request whose
// Mcp-Session-Id names a session another agent opened: a session id is a
// bearer credential, and one agent's must not serve another. A session
// Baton does not know passes (the server answers for it); so does one it
// cannot look up, the store being down (logged).
func sessionOwned(w http.ResponseWriter, r *http.Request, in *Info, o MCPOptions) bool {
	sids := r.Header.Values(HeaderMCPSession)
	if len(sids) == 0 {
		return true
	}
	if len(sids) > 1 {
		problem.New(r, problem.BadJSONRPC, "a request names one MCP session, this one "+strconv.Itoa(len(sids))).
			WriteRPC(w, requestID(r, in))
		return false
	}
	sid := sids[0]
	owner, err := o.Sessions.Owner(r.Context(), sid)
	if err != nil {
		if o.Log != nil {
			o.Log.LogAttrs(r.Context(), slog.LevelWarn, "mcp: session owner not looked up; the request passes",
				slog.String("edge", in.Edge()), slog.String("error", err.Error()))
		}
		return true
	}
	if owner == "" || owner == in.From {
		return true
	}
	in.PolicyDenial = "session"
	problem.New(r, problem.SessionNotYours, "Mcp-Session-Id names a session that agent "+strconv.Quote(owner)+
		" opened, not "+strconv.Quote(in.From)).WriteRPC(w, requestID(r, in))
	return false
}

// requestID returns the JSON-RPC id of a refused POST, read from its body
// when it is small, so that the client can match the refusal to its
// request; null otherwise.
func requestID(r *http.Request, in *Info) json.RawMessage {
	if in.RPC == nil && r.Method == http.MethodPost && !in.Buffered && r.ContentLength >= 0 && r.ContentLength <= 1<<20 {
		if body, err := readBody(r, in); err == nil {
			in.Body, in.Buffered = body, true
			sniffRPC(in, r, body)
		}
	}
	if in.RPC == nil || (in.RPC.MCP != nil && in.RPC.MCP.Batch) {
		return nil
	}
	return in.RPC.ID
}

// rpcResponse reports whether body is one JSON-RPC response.
func rpcResponse(body []byte) bool {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
	}
	return json.Unmarshal(body, &m) == nil && m.JSONRPC == "2.0" && len(m.ID) > 0 && m.Method == nil
}

func mcpSpan(r *http.Request, m *MCPRequest) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attrMCPMethod.String(m.Calls[0].Method)}
	if m.Batch {
		attrs[0] = attrMCPMethod.String("batch")
	}
	if t := m.Calls[0].Tool; t != "" && !m.Batch {
		attrs = append(attrs, attrMCPTool.String(t))
	}
	if m.Session != "" {
		attrs = append(attrs, attrMCPSession.String(m.Session))
	}
	span.SetAttributes(attrs...)
}

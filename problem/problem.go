// Package problem writes Baton's own error responses as RFC 9457
// application/problem+json documents, each with a stable type per error
// class. The classes, their statuses and their meaning are listed in
// docs/problems.md; the type URI of each points at its section there.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/trace"
)

// ContentType is the media type of a problem document.
const ContentType = "application/problem+json"

// TypeBase prefixes every problem type; the slug is the anchor of the class
// in docs/problems.md.
const TypeBase = "https://github.com/batonproxy/baton/blob/main/docs/problems.md#"

// Class is an error class, named by its stable slug: the anchor of its
// section in docs/problems.md.
type Class string

// The error classes Baton produces. Add a class here, to classes below and to
// docs/problems.md together.
const (
	BadRequest          Class = "bad-request"
	BadIdempotencyKey   Class = "bad-idempotency-key"
	BadHop              Class = "bad-hop"
	UnknownDestination  Class = "unknown-destination"
	DeniedAddress       Class = "denied-address"
	BodyTooLarge        Class = "body-too-large"
	HopLimit            Class = "hop-limit"
	UpstreamUnavailable Class = "upstream-unavailable"
	UpstreamTimeout     Class = "upstream-timeout"
	UpstreamCertificate Class = "upstream-certificate"
	CircuitOpen         Class = "circuit-open"
	ContractViolation   Class = "contract-violation"
	BadSignature        Class = "bad-signature"
	PolicyDenied        Class = "policy-denied"
	UntrustedContent    Class = "untrusted-content"
	InjectionSuspected  Class = "injection-suspected"
	BadTrustLabels      Class = "bad-trust-labels"
	Unauthorized        Class = "unauthorized"
	NotDeadLetter       Class = "not-a-dead-letter"
	NotReplayable       Class = "not-replayable"
	NotThisAgent        Class = "not-this-agent"
	StoreUnavailable    Class = "store-unavailable"
	KeyRequired         Class = "idempotency-key-required"
	InFlight            Class = "request-in-flight"
	KeyMismatch         Class = "idempotency-key-mismatch"
	NotRetained         Class = "response-not-retained"
	NotReady            Class = "not-ready"
	NotFound            Class = "not-found"
	Internal            Class = "internal"
	BadJSONRPC          Class = "bad-json-rpc"
	BatchTooLarge       Class = "batch-too-large"
	ToolDenied          Class = "tool-denied"
	SessionNotYours     Class = "session-not-yours"
	ApprovalDenied      Class = "approval-denied"
	ApprovalExpired     Class = "approval-expired"
	NotHoldable         Class = "not-holdable"
	ApproverRequired    Class = "approver-required"
	SelfApproval        Class = "self-approval"
	NotPending          Class = "not-pending"
	ApprovalPending     Class = "approval-pending"
	BroadcastIncomplete Class = "broadcast-incomplete"
	DigestMismatch      Class = "context-digest-mismatch"
	ContextUnavailable  Class = "context-unavailable"
	NotOnTrace          Class = "not-on-trace"
	OverBudget          Class = "over-budget"
	NotAbandonable      Class = "not-abandonable"
	TraceAbandoned      Class = "trace-abandoned"
	TLSIdentityMismatch Class = "tls-identity-mismatch"
	BadCredential       Class = "bad-credential"
	MissingCredential   Class = "missing-credential"
	ProfilerBusy        Class = "profiler-busy"
)

type classInfo struct {
	title  string
	status int
	rpc    int // JSON-RPC error code on A2A paths
}

var classes = map[Class]classInfo{
	BadRequest:          {"Malformed request", http.StatusBadRequest, -32600},
	BadIdempotencyKey:   {"Malformed Idempotency-Key", http.StatusBadRequest, -32050},
	KeyRequired:         {"Idempotency-Key required", http.StatusBadRequest, -32051},
	InFlight:            {"Request with this key in flight", http.StatusConflict, -32052},
	KeyMismatch:         {"Idempotency-Key reused for a different request", http.StatusUnprocessableEntity, -32053},
	NotRetained:         {"Response not retained", http.StatusConflict, -32054},
	BadHop:              {"Malformed Baton-Hop", http.StatusBadRequest, -32600},
	UnknownDestination:  {"Destination not allowed", http.StatusForbidden, -32060},
	DeniedAddress:       {"Destination address refused", http.StatusForbidden, -32060},
	BodyTooLarge:        {"Request body too large", http.StatusRequestEntityTooLarge, -32061},
	HopLimit:            {"Handoff hop limit exceeded", http.StatusLoopDetected, -32062},
	UpstreamUnavailable: {"Upstream refused or failed", http.StatusBadGateway, -32063},
	UpstreamTimeout:     {"Upstream timed out", http.StatusGatewayTimeout, -32064},
	CircuitOpen:         {"Circuit breaker open", http.StatusServiceUnavailable, -32066},
	ContractViolation:   {"Handoff contract violated", http.StatusUnprocessableEntity, -32068},
	BadSignature:        {"Signature refused", http.StatusUnauthorized, -32069},
	PolicyDenied:        {"Handoff not allowed on this edge", http.StatusForbidden, -32070},
	UntrustedContent:    {"Untrusted content refused", http.StatusForbidden, -32072},
	InjectionSuspected:  {"Suspected prompt injection refused", http.StatusForbidden, -32073},
	BadTrustLabels:      {"Malformed Baton-Trust", http.StatusBadRequest, -32074},
	Unauthorized:        {"Admin token required", http.StatusUnauthorized, -32071},
	NotDeadLetter:       {"Not a dead letter", http.StatusConflict, -32067},
	NotReplayable:       {"Dead letter not replayable", http.StatusConflict, -32067},
	NotThisAgent:        {"Record of another agent", http.StatusMisdirectedRequest, -32075},
	StoreUnavailable:    {"State store unavailable", http.StatusServiceUnavailable, -32065},
	NotReady:            {"Not ready", http.StatusServiceUnavailable, -32065},
	NotFound:            {"Not found", http.StatusNotFound, -32601},
	Internal:            {"Internal error", http.StatusInternalServerError, -32603},
	BadJSONRPC:          {"Malformed JSON-RPC", http.StatusBadRequest, -32700},
	BatchTooLarge:       {"JSON-RPC batch too large", http.StatusRequestEntityTooLarge, -32600},
	ToolDenied:          {"Tool not allowed on this edge", http.StatusForbidden, -32076},
	SessionNotYours:     {"MCP session of another agent", http.StatusForbidden, -32077},
	ApprovalDenied:      {"Handoff denied by an approver", http.StatusForbidden, -32078},
	ApprovalExpired:     {"Handoff approval expired", http.StatusGone, -32079},
	NotHoldable:         {"Handoff cannot be held for approval", http.StatusRequestEntityTooLarge, -32080},
	ApproverRequired:    {"Approver identity required", http.StatusUnauthorized, -32071},
	SelfApproval:        {"An agent cannot decide its own handoff", http.StatusForbidden, -32081},
	NotPending:          {"Approval already decided", http.StatusConflict, -32082},
	ApprovalPending:     {"Handoff held for approval", http.StatusConflict, -32083},
	BroadcastIncomplete: {"Broadcast not met", http.StatusBadGateway, -32084},
	DigestMismatch:      {"Artifact digest does not match", http.StatusUnprocessableEntity, -32085},
	ContextUnavailable:  {"Referenced content unavailable", http.StatusUnprocessableEntity, -32086},
	NotOnTrace:          {"Agent not on the trace", http.StatusForbidden, -32087},
	OverBudget:          {"Handoff over its token budget", http.StatusUnprocessableEntity, -32088},
	NotAbandonable:      {"Trace not abandonable", http.StatusConflict, -32089},
	TraceAbandoned:      {"Trace abandoned", http.StatusConflict, -32090},
	TLSIdentityMismatch: {"TLS identity is another agent's", http.StatusForbidden, -32091},
	BadCredential:       {"Caller credential refused", http.StatusUnauthorized, -32092},
	MissingCredential:   {"Caller credential required", http.StatusUnauthorized, -32094},
	UpstreamCertificate: {"Upstream certificate refused", http.StatusBadGateway, -32093},
	ProfilerBusy:        {"Profiler busy", http.StatusConflict, -32095},
}

// Type returns the class's type URI.
func (c Class) Type() string { return TypeBase + string(c) }

// Title returns the class's short, fixed title.
func (c Class) Title() string { return classes[c].title }

// Status returns the HTTP status of the class.
func (c Class) Status() int {
	if s := classes[c].status; s != 0 {
		return s
	}
	return http.StatusInternalServerError
}

// RPCCode returns the JSON-RPC error code of the class, used on A2A paths.
func (c Class) RPCCode() int {
	if code := classes[c].rpc; code != 0 {
		return code
	}
	return -32603
}

// Classes lists every class, for documentation checks.
func Classes() []Class {
	out := make([]Class, 0, len(classes))
	for c := range classes {
		out = append(out, c)
	}
	return out
}

// Details is an RFC 9457 problem document with Baton's extension members.
type Details struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	TraceID  string `json:"trace_id,omitempty"`
	// Extra holds class-specific members (record_id, violations, …),
	// written beside the standard ones.
	Extra map[string]any `json:"-"`

	class Class
}

// New builds the document for class c on request r. The trace id comes from
// the span in r's context, when there is one.
func New(r *http.Request, c Class, detail string) *Details {
	d := &Details{Type: c.Type(), Title: c.Title(), Status: c.Status(), Detail: detail, class: c}
	if r != nil {
		d.Instance = r.URL.Path
		if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
			d.TraceID = sc.TraceID().String()
		}
	}
	return d
}

// With adds an extension member and returns d.
func (d *Details) With(key string, v any) *Details {
	if d.Extra == nil {
		d.Extra = map[string]any{}
	}
	d.Extra[key] = v
	return d
}

// MarshalJSON writes the standard members followed by the extensions.
func (d *Details) MarshalJSON() ([]byte, error) {
	type std Details
	b, err := json.Marshal((*std)(d))
	if err != nil || len(d.Extra) == 0 {
		return b, err
	}
	ext, err := json.Marshal(d.Extra)
	if err != nil {
		return nil, err
	}
	// Splice {"type":…} and {"k":…} into one object.
	out := make([]byte, 0, len(b)+len(ext))
	out = append(out, b[:len(b)-1]...)
	out = append(out, ',')
	out = append(out, ext[1:]...)
	return out, nil
}

// Write sends d as the response. Headers already set on w (Retry-After, …)
// are kept.
func (d *Details) Write(w http.ResponseWriter) {
	body, err := json.Marshal(d)
	if err != nil {
		body = []byte(`{"type":"` + Internal.Type() + `","title":"Internal error","status":500}`)
		d.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Encoding")
	w.WriteHeader(d.Status)
	_, _ = w.Write(body)
}

// WriteRPC sends d as a JSON-RPC 2.0 error response to the request with id
// (A2A paths): HTTP 200, as JSON-RPC clients expect, with the class's code,
// its title as the message and the whole problem document as data. Headers
// already set on w (Retry-After, …) are kept.
func (d *Details) WriteRPC(w http.ResponseWriter, id json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int      `json:"code"`
			Message string   `json:"message"`
			Data    *Details `json:"data"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int      `json:"code"`
		Message string   `json:"message"`
		Data    *Details `json:"data"`
	}{d.class.RPCCode(), d.rpcMessage(), d}})
	if err != nil {
		d.Write(w)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// rpcMessage is the JSON-RPC error's message: the title and the detail,
// since a client (an MCP or A2A SDK) often shows only the message.
func (d *Details) rpcMessage() string {
	if d.Detail == "" {
		return d.Title
	}
	return d.Title + ": " + d.Detail
}

// Write is shorthand for New(r, c, detail).Write(w).
func Write(w http.ResponseWriter, r *http.Request, c Class, detail string) {
	New(r, c, detail).Write(w)
}

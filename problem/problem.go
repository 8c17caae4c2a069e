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
	StoreUnavailable    Class = "store-unavailable"
	NotReady            Class = "not-ready"
	NotFound            Class = "not-found"
	Internal            Class = "internal"
)

type classInfo struct {
	title  string
	status int
}

var classes = map[Class]classInfo{
	BadRequest:          {"Malformed request", http.StatusBadRequest},
	BadIdempotencyKey:   {"Malformed Idempotency-Key", http.StatusBadRequest},
	BadHop:              {"Malformed Baton-Hop", http.StatusBadRequest},
	UnknownDestination:  {"Destination not allowed", http.StatusForbidden},
	DeniedAddress:       {"Destination address refused", http.StatusForbidden},
	BodyTooLarge:        {"Request body too large", http.StatusRequestEntityTooLarge},
	HopLimit:            {"Handoff hop limit exceeded", http.StatusLoopDetected},
	UpstreamUnavailable: {"Upstream refused or failed", http.StatusBadGateway},
	UpstreamTimeout:     {"Upstream timed out", http.StatusGatewayTimeout},
	StoreUnavailable:    {"State store unavailable", http.StatusServiceUnavailable},
	NotReady:            {"Not ready", http.StatusServiceUnavailable},
	NotFound:            {"Not found", http.StatusNotFound},
	Internal:            {"Internal error", http.StatusInternalServerError},
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
}

// New builds the document for class c on request r. The trace id comes from
// the span in r's context, when there is one.
func New(r *http.Request, c Class, detail string) *Details {
	d := &Details{Type: c.Type(), Title: c.Title(), Status: c.Status(), Detail: detail}
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

// Write is shorthand for New(r, c, detail).Write(w).
func Write(w http.ResponseWriter, r *http.Request, c Class, detail string) {
	New(r, c, detail).Write(w)
}

package trust

// The RFC 9421 signature base (§2.5), for any list of covered components
// that names derived components Baton supports and header fields. Baton's
// own list is one use of it; the RFC's test vectors are another.

import (
	"errors"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// Message is the part of an HTTP request a signature covers. Authority and
// Path are as on the wire, and must be given the same way at both ends: see
// RequestMessage.
type Message struct {
	Method string
	// Authority is the request's host[:port] as sent in the Host header.
	Authority string
	// Path is the escaped path, as on the request line; "" means "/".
	Path string
	// RawQuery is the query without its "?", as on the request line.
	RawQuery string
	// Header holds the request's fields, with canonical keys (as net/http
	// produces them). Sign sets Content-Digest, Signature-Input and
	// Signature in it.
	Header http.Header
	// Body is the whole request body; Content-Digest covers it.
	Body []byte
}

// RequestMessage returns the Message of r with its body read into body.
// It works the same on both sides: at egress on the outbound request as the
// transport is about to send it (authority: r.Host, else r.URL.Host, which
// is what net/http's client sends as Host), and at ingress on the request as
// the server received it (r.Host). Path is r.URL.EscapedPath(), which the
// client writes and the server reproduces.
func RequestMessage(r *http.Request, body []byte) Message {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet // net/http's client sends "" as GET
	}
	return Message{Method: method, Authority: host, Path: r.URL.EscapedPath(),
		RawQuery: r.URL.RawQuery, Header: r.Header, Body: body}
}

// errAbsentField reports a covered field the message does not have.
type errAbsentField struct{ name string }

func (e errAbsentField) Error() string {
	return "covered field " + e.name + " is absent from the request"
}

// knownFields pairs the fields Baton covers with their canonical header
// keys, so that the hot path does not canonicalise them per request.
var knownFields = [...][2]string{
	{"content-digest", "Content-Digest"},
	{"baton-agent", "Baton-Agent"},
	{"baton-hop", "Baton-Hop"},
	{"baton-trust", "Baton-Trust"},
	{"baton-grant", "Baton-Grant"},
	{"idempotency-key", "Idempotency-Key"},
	{"traceparent", "Traceparent"},
}

func headerKey(field string) string {
	for _, f := range knownFields {
		if f[0] == field {
			return f[1]
		}
	}
	return textproto.CanonicalMIMEHeaderKey(field)
}

// checkComponent reports whether name is a component identifier this
// package can compute: a derived component it supports, or a lowercase
// field name.
func checkComponent(name string) error {
	switch name {
	case "@method", "@authority", "@path", "@query":
		return nil
	case "@signature-params":
		return errors.New(`"@signature-params" cannot be covered`)
	}
	if name == "" || name[0] == '@' {
		return errors.New("unsupported derived component " + quoteForError(name))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isTchar(c) || (c >= 'A' && c <= 'Z') {
			return errors.New("component " + quoteForError(name) + " is not a lowercase field name")
		}
	}
	return nil
}

// appendSignatureBase appends the signature base (RFC 9421 §2.5) of m for
// the covered components, whose @signature-params value is sigParams. The
// components must have passed checkComponent, and hold no duplicates.
func appendSignatureBase(dst []byte, m *Message, components []string, sigParams []byte) ([]byte, error) {
	for _, c := range components {
		dst = append(dst, '"')
		dst = append(dst, c...)
		dst = append(dst, `": `...)
		var err error
		if dst, err = appendComponentValue(dst, m, c); err != nil {
			return nil, err
		}
		dst = append(dst, '\n')
	}
	dst = append(dst, `"@signature-params": `...)
	return append(dst, sigParams...), nil
}

func appendComponentValue(dst []byte, m *Message, c string) ([]byte, error) {
	switch c {
	case "@method": // §2.2.1: as is, case-sensitive
		return append(dst, m.Method...), nil
	case "@authority": // §2.2.3: lowercase, as the Host header carries it
		a := strings.TrimSuffix(m.Authority, ":")
		for i := 0; i < len(a); i++ {
			ch := a[i]
			if ch >= 'A' && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			dst = append(dst, ch)
		}
		return dst, nil
	case "@path": // §2.2.6: an empty path is "/"
		if m.Path == "" {
			return append(dst, '/'), nil
		}
		return append(dst, m.Path...), nil
	case "@query": // §2.2.7: with its "?", and "?" alone when there is none
		dst = append(dst, '?')
		return append(dst, m.RawQuery...), nil
	}
	vs := m.Header[headerKey(c)]
	if len(vs) == 0 {
		return nil, errAbsentField{c}
	}
	// §2.1: each field line's value trimmed, several lines joined with ", ".
	for i, v := range vs {
		if strings.ContainsAny(v, "\r\n") {
			return nil, errors.New("field " + c + " holds a line break")
		}
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, strings.Trim(v, " \t")...)
	}
	return dst, nil
}

// quoteForError quotes an attacker-supplied string for an error message,
// bounded so that a huge header does not make a huge error.
func quoteForError(s string) string {
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return strconv.Quote(s)
}

package handoff

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Stamp is what the sender's Baton writes into provenance at egress.
type Stamp struct {
	Agent   string    // this Baton's agent identity
	TraceID string    // the handoff's W3C trace id: 32 lowercase hexadecimal digits, not all zero
	Hop     int       // the handoff's depth within the trace
	At      time.Time // written as stamped_at, in UTC, RFC 3339 with milliseconds
}

// StampedAtLayout is the time layout of provenance.stamped_at.
const StampedAtLayout = "2006-01-02T15:04:05.000Z07:00"

func (s Stamp) validate() error {
	var errs []error
	if s.Agent == "" {
		errs = append(errs, errors.New("agent must not be empty"))
	}
	if !isTraceID(s.TraceID) {
		errs = append(errs, fmt.Errorf("trace id %q must be 32 lowercase hexadecimal digits, not all zero", s.TraceID))
	}
	if s.Hop < 0 {
		errs = append(errs, fmt.Errorf("hop must be >= 0, got %d", s.Hop))
	}
	if s.At.IsZero() {
		errs = append(errs, errors.New("time must be set"))
	}
	return errors.Join(errs...)
}

func isTraceID(id string) bool {
	if len(id) != 32 || id == "00000000000000000000000000000000" {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// edit replaces b[s:e] with text; s == e inserts.
type edit struct {
	s, e int
	text []byte
}

// Stamp returns a copy of body whose envelope carries s in provenance:
// agent, trace_id, hop and stamped_at are set, replacing what the agent put
// there (in every copy of a repeated member), a provenance that is not an
// object is replaced, and one is added when absent. Nothing else changes: every byte outside those members is kept,
// including members Baton does not know and the layout of the whole body (an
// A2A request around the envelope included). New members follow the
// indentation of the members before them. body must hold the bytes r was
// checked on.
func (r *Result) Stamp(body []byte, s Stamp) ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("handoff: stamping: %w", err)
	}
	if r.Where == None || r.env.s > r.env.e || r.env.e > len(body) || !bytes.Equal(body[r.env.s:r.env.e], r.Envelope) {
		return nil, errors.New("handoff: stamping: body is not the one that was checked")
	}
	env := body[r.env.s:r.env.e]
	root, ok := document(env)
	if !ok || env[root.s] != '{' {
		return nil, errors.New("handoff: stamping: the envelope is not a JSON object")
	}
	vals := [...]struct {
		name string
		val  []byte
	}{
		{"agent", appendString(nil, s.Agent)},
		{"trace_id", appendString(nil, s.TraceID)},
		{"hop", strconv.AppendInt(nil, int64(s.Hop), 10)},
		{"stamped_at", appendString(nil, s.At.UTC().Format(StampedAtLayout))},
	}

	obj := []byte{'{'}
	for i, v := range vals {
		if i > 0 {
			obj = append(obj, ',')
		}
		obj = append(appendString(obj, v.name), ':')
		obj = append(obj, v.val...)
	}
	obj = append(obj, '}')

	var edits []edit
	var last member
	stamped, members := false, 0
	for it := objectAt(env, root.s); ; members++ {
		m, ok := it.next()
		if !ok {
			break
		}
		last = m
		if !m.is("provenance") {
			continue
		}
		stamped = true
		if env[m.val.s] != '{' {
			edits = append(edits, edit{m.val.s, m.val.e, obj}) // not an object: replace it
			continue
		}
		present := [len(vals)]bool{}
		var lastInner member
		inner := 0
		for it := objectAt(env, m.val.s); ; inner++ {
			pm, ok := it.next()
			if !ok {
				break
			}
			lastInner = pm
			for i, v := range vals {
				if pm.is(v.name) {
					present[i] = true
					edits = append(edits, edit{pm.val.s, pm.val.e, v.val})
				}
			}
		}
		var add []byte
		for i, v := range vals {
			if !present[i] {
				add = appendMember(add, env, lastInner, inner > 0, v.name, v.val)
			}
		}
		if add != nil {
			at := m.val.s + 1
			if inner > 0 {
				at = lastInner.val.e
			}
			edits = append(edits, edit{at, at, add})
		}
	}
	switch {
	case stamped:
	case members > 0:
		edits = append(edits, edit{last.val.e, last.val.e, appendMember(nil, env, last, true, "provenance", obj)})
	default:
		edits = append(edits, edit{root.s + 1, root.s + 1, appendMember(nil, env, member{}, false, "provenance", obj)})
	}

	slices.SortFunc(edits, func(a, b edit) int { return a.s - b.s })
	out := make([]byte, 0, len(body)+256)
	out = append(out, body[:r.env.s]...)
	at := 0
	for _, e := range edits {
		out = append(out, env[at:e.s]...)
		out = append(out, e.text...)
		at = e.e
	}
	out = append(out, env[at:]...)
	return append(out, body[r.env.e:]...), nil
}

// appendMember appends `,"name":val` to dst, laid out like prev (the member
// it follows: the same whitespace before the key and around the colon), or
// `"name":val` when the object is empty.
func appendMember(dst, b []byte, prev member, after bool, name string, val []byte) []byte {
	colon := []byte{':'}
	var lead []byte
	if after {
		dst = append(dst, ',')
		j := prev.keySpan.s
		for j > 0 && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
			j--
		}
		lead = b[j:prev.keySpan.s]
		colon = b[prev.keySpan.e:prev.val.s]
	} else if len(dst) > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, lead...)
	dst = appendString(dst, name)
	dst = append(dst, colon...)
	return append(dst, val...)
}

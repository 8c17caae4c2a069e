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
	if !ValidTraceID(s.TraceID) {
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

// ValidTraceID reports a W3C trace id: 32 lower-case hex digits, not all
// zero.
func ValidTraceID(id string) bool {
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
	var t tape
	if !t.parse(env) || !t.isObject(0) {
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
	stamped, last := false, -1
	for k, end := t.first(0); k < end; k = t.after(k + 1) {
		last = k
		if !t.is(k, "provenance") {
			continue
		}
		stamped = true
		p := t.span(k + 1)
		if !t.isObject(k + 1) {
			edits = append(edits, edit{p.s, p.e, obj}) // not an object: replace it
			continue
		}
		present := [len(vals)]bool{}
		lastInner := -1
		for pk, pend := t.first(k + 1); pk < pend; pk = t.after(pk + 1) {
			lastInner = pk
			for i, v := range vals {
				if t.is(pk, v.name) {
					present[i] = true
					vs := t.span(pk + 1)
					edits = append(edits, edit{vs.s, vs.e, v.val})
				}
			}
		}
		var add []byte
		for i, v := range vals {
			if !present[i] {
				add = appendMember(add, &t, lastInner, v.name, v.val)
			}
		}
		if add != nil {
			at := p.s + 1
			if lastInner >= 0 {
				at = t.span(lastInner + 1).e
			}
			edits = append(edits, edit{at, at, add})
		}
	}
	if !stamped {
		at := t.span(0).s + 1
		if last >= 0 {
			at = t.span(last + 1).e
		}
		edits = append(edits, edit{at, at, appendMember(nil, &t, last, "provenance", obj)})
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

// appendMember appends `,"name":val` to dst, laid out like the member whose
// name is node prev (the same whitespace before the name and around the
// colon), or `"name":val` when prev is -1 (an empty object).
func appendMember(dst []byte, t *tape, prev int, name string, val []byte) []byte {
	colon := []byte{':'}
	var lead []byte
	if prev >= 0 {
		dst = append(dst, ',')
		key := t.span(prev)
		j := key.s
		for j > 0 && (t.b[j-1] == ' ' || t.b[j-1] == '\t' || t.b[j-1] == '\n' || t.b[j-1] == '\r') {
			j--
		}
		lead = t.b[j:key.s]
		colon = t.b[key.e:t.span(prev+1).s]
	} else if len(dst) > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, lead...)
	dst = appendString(dst, name)
	dst = append(dst, colon...)
	return append(dst, val...)
}

package record

// How the encoder tests compare an encoded record with what
// encoding/json makes of it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// substituted returns r with the values json.Marshal rejects replaced as
// AppendJSON documents, so json.Marshal of it is what AppendJSON must give.
func substituted(r Record) Record {
	finite := func(f float64) float64 {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	}
	valid := func(t time.Time) time.Time {
		if _, err := t.MarshalJSON(); err == nil {
			return t
		}
		if _, err := t.UTC().MarshalJSON(); err == nil {
			return t.UTC()
		}
		return time.Time{}
	}
	r.Latency = finite(r.Latency)
	r.Created, r.Updated = valid(r.Created), valid(r.Updated)
	if r.Approval != nil {
		a := *r.Approval
		a.Expires = valid(a.Expires)
		if a.At != nil {
			at := valid(*a.At)
			a.At = &at
		}
		r.Approval = &a
	}
	if r.Envelope != nil {
		e := *r.Envelope
		e.Completeness = finite(e.Completeness)
		r.Envelope = &e
	}
	if r.Models != nil {
		m := r.Models.Clone()
		m.CostUSD = finite(m.CostUSD)
		if m.Budget != nil {
			m.Budget.CostUSD = finite(m.Budget.CostUSD)
		}
		for i := range m.List {
			c := &m.List[i]
			c.At, c.Ms, c.TTFTMs, c.CostUSD = valid(c.At), finite(c.Ms), finite(c.TTFTMs), finite(c.CostUSD)
		}
		r.Models = m
	}
	return r
}

// checkRecord fails unless r.AppendJSON gives json.Marshal's bytes (for the
// substituted record where json.Marshal rejects r) after any prefix, and the
// bytes decode back to r.
func checkRecord(t *testing.T, r *Record) {
	t.Helper()
	s := substituted(*r)
	want, err := json.Marshal(&s)
	if err != nil {
		t.Fatalf("json.Marshal of the substituted record: %v", err)
	}
	prefix := []byte("prefix")
	got := r.AppendJSON(slices.Clip(prefix))
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("AppendJSON overwrote the buffer: %q", got)
	}
	if got = got[len(prefix):]; !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON differs from json.Marshal\n got: %s\nwant: %s", got, want)
	}
	checkEntries(t, r, s)
	back := new(Record)
	if err := json.Unmarshal(got, back); err != nil {
		t.Fatalf("json.Unmarshal: %v", err)
	}
	if want, ok := decodedForm(back, s); !reflect.DeepEqual(*back, want) || !ok {
		t.Fatalf("round trip changed the record\n got: %s\nwant: %s", dump(*back), dump(want))
	}
}

// checkEntries fails unless encodeEntry gives json.Marshal's bytes of the
// Entry it documents, for r as a first entry (a snapshot without its
// checkpoint) and as a later one (an Update); s is r substituted.
func checkEntries(t *testing.T, r *Record, s Record) {
	t.Helper()
	now := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.FixedZone("", 3600))
	for _, stored := range []bool{false, true} {
		rr := *r
		rr.stored = stored
		got, seq := encodeEntry("3:abcd", &rr, now)
		e := Entry{Seq: 4, Prev: "abcd", At: now.UTC()}
		if stored {
			e.Update = &Update{ID: s.ID, State: s.State, Status: s.Status, Attempts: s.Attempts, Latency: s.Latency,
				Outcome: s.Outcome, Error: s.Error, StoppedAt: s.StoppedAt, ResolvedBy: s.ResolvedBy, Approval: s.Approval, Effects: s.Effects, Updated: s.Updated}
		} else {
			snap := s
			snap.Request = nil
			e.Record = &snap
		}
		want, err := json.Marshal(&e)
		if err != nil {
			t.Fatalf("json.Marshal of the entry: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encodeEntry (stored %v) differs from json.Marshal\n got: %s\nwant: %s", stored, got, want)
		}
		if seq != 4 {
			t.Fatalf("encodeEntry: seq %d, want 4", seq)
		}
	}
}

// decodedForm returns what json.Unmarshal should make of r encoded, and
// whether the times decoded holds are r's (compared here, then zeroed in
// both). JSON keeps no empty omitempty slices, no invalid UTF-8 (each byte
// becomes U+FFFD) and not the unexported field.
func decodedForm(decoded *Record, r Record) (Record, bool) {
	ok := sameTime(decoded.Created, r.Created) && sameTime(decoded.Updated, r.Updated)
	decoded.Created, decoded.Updated = time.Time{}, time.Time{}
	r.Created, r.Updated = time.Time{}, time.Time{}
	r.checkpointed = false
	if len(r.Trust) == 0 {
		r.Trust = nil
	}
	if r.Request != nil {
		q := *r.Request
		if len(q.Body) == 0 {
			q.Body = nil
		}
		if q.Header != nil {
			// Names alike but for invalid bytes decode as one: the last.
			q.Header = http.Header{}
			for _, k := range slices.Sorted(maps.Keys(r.Request.Header)) {
				q.Header[toValidUTF8(k)] = validUTF8(r.Request.Header[k])
			}
		}
		q.Method, q.URL = toValidUTF8(q.Method), toValidUTF8(q.URL)
		r.Request = &q
	}
	if r.Envelope != nil {
		e := *r.Envelope
		for _, s := range []*string{&e.Digest, &e.Version, &e.TaskID, &e.Intent} {
			*s = toValidUTF8(*s)
		}
		r.Envelope = &e
	}
	if r.Shaping != nil {
		sh := *r.Shaping
		sh.Tokenizer = toValidUTF8(sh.Tokenizer)
		if sh.Dropped = validUTF8(sh.Dropped); len(sh.Dropped) == 0 {
			sh.Dropped = nil
		}
		if sh.Trimmed = validUTF8(sh.Trimmed); len(sh.Trimmed) == 0 {
			sh.Trimmed = nil
		}
		r.Shaping = &sh
	}
	if r.Journal != nil {
		j := *r.Journal
		j.Skipped = validUTF8(j.Skipped)
		if len(j.Skipped) == 0 {
			j.Skipped = nil
		}
		r.Journal = &j
	}
	if r.Models != nil {
		m := r.Models.Clone()
		m.BudgetNote = toValidUTF8(m.BudgetNote)
		if m.Budget != nil {
			m.Budget.Chain = toValidUTF8(m.Budget.Chain)
		}
		if len(m.List) == 0 {
			m.List = nil
		}
		for i := range m.List {
			c := &m.List[i]
			if i < len(decoded.Models.List) {
				ok = ok && sameTime(decoded.Models.List[i].At, c.At)
				decoded.Models.List[i].At = time.Time{}
			}
			c.At = time.Time{}
			for _, s := range []*string{&c.API, &c.Provider, &c.Operation, &c.Model, &c.Refused, &c.Finish, &c.Error} {
				*s = toValidUTF8(*s)
			}
		}
		r.Models = m
	}
	if r.Approval != nil {
		a := *r.Approval
		ok = ok && sameTime(decoded.Approval.Expires, a.Expires) && (a.At == nil) == (decoded.Approval.At == nil)
		if a.At != nil && decoded.Approval.At != nil {
			ok = ok && sameTime(*decoded.Approval.At, *a.At)
		}
		decoded.Approval.Expires, decoded.Approval.At = time.Time{}, nil
		a.Expires, a.At = time.Time{}, nil
		for _, s := range []*string{&a.Gate, &a.Decision, &a.By, &a.Reason} {
			*s = toValidUTF8(*s)
		}
		r.Approval = &a
	}
	r.Trust = validUTF8(r.Trust)
	if r.Effects = validUTF8(r.Effects); len(r.Effects) == 0 {
		r.Effects = nil
	}
	for _, s := range []*string{&r.ID, &r.TraceID, &r.SpanID, &r.ParentID, (*string)(&r.Side), &r.From, &r.To,
		&r.Key, &r.Method, &r.Target, &r.Call, &r.RequestDigest, &r.Grant, &r.SenderKeyID, &r.Caller, (*string)(&r.State),
		&r.Outcome, &r.Error, &r.KeySource, &r.Correlation, &r.CorrelationEvidence, &r.StoppedAt, &r.ResolvedBy, &r.Compensates} {
		*s = toValidUTF8(*s)
	}
	return r, ok
}

// sameTime reports whether decoded is t as far as RFC 3339 text holds it:
// the instant and offset, with the offset in whole minutes.
func sameTime(decoded, t time.Time) bool {
	want, err := time.Parse(time.RFC3339Nano, t.Format(time.RFC3339Nano))
	if err != nil {
		return false
	}
	_, got := decoded.Zone()
	_, off := want.Zone()
	return decoded.Equal(want) && got == off
}

// dump shows r with what its pointers point to.
func dump(r Record) string {
	var env, req string
	if r.Envelope != nil {
		env = fmt.Sprintf("%#v", *r.Envelope)
	}
	if r.Request != nil {
		req = fmt.Sprintf("%#v", *r.Request)
	}
	if r.Journal != nil {
		req += fmt.Sprintf("\njournal %#v", *r.Journal)
	}
	if r.Shaping != nil {
		req += fmt.Sprintf("\nshaping %#v", *r.Shaping)
	}
	if r.Approval != nil {
		req += fmt.Sprintf("\napproval %#v", *r.Approval)
	}
	if r.Models != nil {
		req += fmt.Sprintf("\nmodels %#v", *r.Models)
		if r.Models.Budget != nil {
			req += fmt.Sprintf(" budget %#v", *r.Models.Budget)
		}
	}
	r.Envelope, r.Request, r.Journal, r.Approval, r.Shaping, r.Models = nil, nil, nil, nil, nil, nil
	return fmt.Sprintf("%#v\nenvelope %s\nrequest %s", r, env, req)
}

// toValidUTF8 replaces each invalid byte by U+FFFD, as encoding/json does
// (strings.ToValidUTF8 would replace runs of them).
func toValidUTF8(s string) string {
	return strings.Map(func(r rune) rune { return r }, s)
}

func validUTF8(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = toValidUTF8(s)
	}
	return out
}

// checkRequest fails unless q.AppendJSON gives json.Marshal's bytes.
func checkRequest(t *testing.T, q *Request) {
	t.Helper()
	want, err := json.Marshal(q)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if got := q.AppendJSON(nil); !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON differs from json.Marshal\n got: %s\nwant: %s", got, want)
	}
}

package record

import (
	"encoding/base64"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends r encoded exactly as json.Marshal(r) encodes it. Records
// are encoded on every write, and the bytes are hashed into the trace's chain
// and decoded with json.Unmarshal, so the encoding must be json.Marshal's,
// only without its reflection and allocations.
//
// json.Marshal fails on values JSON cannot hold. AppendJSON cannot fail: it
// writes the nearest value json.Marshal accepts instead, so that its output
// always decodes:
//   - a NaN or infinite float is written as 0;
//   - a time whose zone offset is 24 hours or more is written in UTC;
//   - a time whose year (in UTC, in that case) is outside [0,9999] is
//     written as the zero time, "0001-01-01T00:00:00Z".
//
// A nil r is written as null.
func (r *Record) AppendJSON(b []byte) []byte {
	if r == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"trace_id":`...)
	b = appendString(b, r.TraceID)
	b = append(b, `,"span_id":`...)
	b = appendString(b, r.SpanID)
	if r.ParentID != "" {
		b = append(b, `,"parent_id":`...)
		b = appendString(b, r.ParentID)
	}
	b = append(b, `,"side":`...)
	b = appendString(b, string(r.Side))
	b = append(b, `,"from":`...)
	b = appendString(b, r.From)
	b = append(b, `,"to":`...)
	b = appendString(b, r.To)
	b = append(b, `,"hop":`...)
	b = strconv.AppendInt(b, int64(r.Hop), 10)
	if r.Key != "" {
		b = append(b, `,"idempotency_key":`...)
		b = appendString(b, r.Key)
	}
	b = append(b, `,"method":`...)
	b = appendString(b, r.Method)
	b = append(b, `,"target":`...)
	b = appendString(b, r.Target)
	if r.Call != "" {
		b = append(b, `,"call":`...)
		b = appendString(b, r.Call)
	}
	b = append(b, `,"request_digest":`...)
	b = appendString(b, r.RequestDigest)
	if r.Envelope != nil {
		b = append(b, `,"envelope":`...)
		b = r.Envelope.appendJSON(b)
	}
	if r.Shaping != nil {
		b = append(b, `,"shaping":`...)
		b = r.Shaping.appendJSON(b)
	}
	if len(r.Trust) != 0 {
		b = append(b, `,"trust":`...)
		b = appendStrings(b, r.Trust)
	}
	if r.Grant != "" {
		b = append(b, `,"grant":`...)
		b = appendString(b, r.Grant)
	}
	if r.SenderKeyID != "" {
		b = append(b, `,"sender_key_id":`...)
		b = appendString(b, r.SenderKeyID)
	}
	if r.Caller != "" {
		b = append(b, `,"caller":`...)
		b = appendString(b, r.Caller)
	}
	if r.KeySource != "" {
		b = append(b, `,"key_source":`...)
		b = appendString(b, r.KeySource)
	}
	if r.Position != 0 {
		b = append(b, `,"position":`...)
		b = strconv.AppendInt(b, int64(r.Position), 10)
	}
	if r.Correlation != "" {
		b = append(b, `,"correlation":`...)
		b = appendString(b, r.Correlation)
	}
	if r.CorrelationEvidence != "" {
		b = append(b, `,"correlation_evidence":`...)
		b = appendString(b, r.CorrelationEvidence)
	}
	if r.Compensates != "" {
		b = append(b, `,"compensates":`...)
		b = appendString(b, r.Compensates)
	}
	b = r.appendProgress(b)
	b = append(b, `,"replayable":`...)
	b = strconv.AppendBool(b, r.Replayable)
	if r.Journal != nil {
		b = append(b, `,"journal":`...)
		b = r.Journal.appendJSON(b)
	}
	if r.Models != nil {
		b = append(b, `,"models":`...)
		b = r.Models.appendJSON(b)
	}
	if r.UncorrelatedCalls != 0 {
		b = append(b, `,"uncorrelated_calls":`...)
		b = strconv.AppendInt(b, int64(r.UncorrelatedCalls), 10)
	}
	b = append(b, `,"created":`...)
	b = appendTime(b, r.Created)
	b = append(b, `,"updated":`...)
	b = appendTime(b, r.Updated)
	if r.Request != nil {
		b = append(b, `,"request":`...)
		b = r.Request.AppendJSON(b)
	}
	return append(b, '}')
}

// appendUpdateJSON appends r's Update encoded exactly as json.Marshal of it,
// with AppendJSON's substitutions.
func (r *Record) appendUpdateJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = r.appendProgress(b)
	b = append(b, `,"updated":`...)
	b = appendTime(b, r.Updated)
	return append(b, '}')
}

// appendProgress appends the members from "state" to "approval", which
// a record and its Update share.
func (r *Record) appendProgress(b []byte) []byte {
	b = append(b, `,"state":`...)
	b = appendString(b, string(r.State))
	if r.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(r.Status), 10)
	}
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = append(b, `,"latency_ms":`...)
	b = appendFloat(b, r.Latency)
	if r.Outcome != "" {
		b = append(b, `,"outcome":`...)
		b = appendString(b, r.Outcome)
	}
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, r.Error)
	}
	if r.StoppedAt != "" {
		b = append(b, `,"stopped_at":`...)
		b = appendString(b, r.StoppedAt)
	}
	if r.ResolvedBy != "" {
		b = append(b, `,"resolved_by":`...)
		b = appendString(b, r.ResolvedBy)
	}
	if r.Approval != nil {
		b = append(b, `,"approval":`...)
		b = r.Approval.appendJSON(b)
	}
	if len(r.Effects) != 0 {
		b = append(b, `,"side_effects":`...)
		b = appendStrings(b, r.Effects)
	}
	return b
}

func (a *Approval) appendJSON(b []byte) []byte {
	b = append(b, `{"gate":`...)
	b = appendString(b, a.Gate)
	b = append(b, `,"expires":`...)
	b = appendTime(b, a.Expires)
	if a.Decision != "" {
		b = append(b, `,"decision":`...)
		b = appendString(b, a.Decision)
	}
	if a.By != "" {
		b = append(b, `,"by":`...)
		b = appendString(b, a.By)
	}
	if a.At != nil {
		b = append(b, `,"at":`...)
		b = appendTime(b, *a.At)
	}
	if a.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, a.Reason)
	}
	return append(b, '}')
}

func (e *EnvelopeSummary) appendJSON(b []byte) []byte {
	b = append(b, `{"digest":`...)
	b = appendString(b, e.Digest)
	if e.Version != "" {
		b = append(b, `,"schema_version":`...)
		b = appendString(b, e.Version)
	}
	if e.TaskID != "" {
		b = append(b, `,"task_id":`...)
		b = appendString(b, e.TaskID)
	}
	if e.Intent != "" {
		b = append(b, `,"intent":`...)
		b = appendString(b, e.Intent)
	}
	b = append(b, `,"completeness":`...)
	b = appendFloat(b, e.Completeness)
	b = append(b, `,"open_questions":`...)
	b = strconv.AppendInt(b, int64(e.OpenQuestions), 10)
	b = append(b, `,"unverified":`...)
	b = strconv.AppendInt(b, int64(e.Unverified), 10)
	if e.Violations != 0 {
		b = append(b, `,"violations":`...)
		b = strconv.AppendInt(b, int64(e.Violations), 10)
	}
	return append(b, '}')
}

func (s *Shaping) appendJSON(b []byte) []byte {
	b = append(b, `{"tokens":`...)
	b = strconv.AppendInt(b, int64(s.Tokens), 10)
	b = append(b, `,"tokens_before":`...)
	b = strconv.AppendInt(b, int64(s.Before), 10)
	if s.MaxTokens != 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(s.MaxTokens), 10)
	}
	b = append(b, `,"tokenizer":`...)
	b = appendString(b, s.Tokenizer)
	if len(s.Dropped) != 0 {
		b = append(b, `,"dropped":`...)
		b = appendStrings(b, s.Dropped)
	}
	if len(s.Trimmed) != 0 {
		b = append(b, `,"trimmed":`...)
		b = appendStrings(b, s.Trimmed)
	}
	return append(b, '}')
}

func (j *JournalSummary) appendJSON(b []byte) []byte {
	b = append(b, `{"hits":`...)
	b = strconv.AppendInt(b, int64(j.Hits), 10)
	b = append(b, `,"misses":`...)
	b = strconv.AppendInt(b, int64(j.Misses), 10)
	b = append(b, `,"journaled":`...)
	b = strconv.AppendInt(b, int64(j.Journaled), 10)
	if j.SavedBytes != 0 {
		b = append(b, `,"saved_bytes":`...)
		b = strconv.AppendInt(b, j.SavedBytes, 10)
	}
	if j.SavedTokens != 0 {
		b = append(b, `,"saved_tokens":`...)
		b = strconv.AppendInt(b, j.SavedTokens, 10)
	}
	if len(j.Skipped) != 0 {
		b = append(b, `,"skipped":`...)
		b = appendStrings(b, j.Skipped)
	}
	return append(b, '}')
}

// AppendJSON appends q encoded exactly as json.Marshal(q) encodes it, for
// the same reasons as Record.AppendJSON; json.Marshal accepts every Request,
// so there is no exception here. A nil q is written as null.
func (q *Request) AppendJSON(b []byte) []byte {
	if q == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"method":`...)
	b = appendString(b, q.Method)
	b = append(b, `,"url":`...)
	b = appendString(b, q.URL)
	b = append(b, `,"header":`...)
	b = appendHeader(b, q.Header)
	if len(q.Body) != 0 {
		b = append(b, `,"body":"`...)
		b = base64.StdEncoding.AppendEncode(b, q.Body)
		b = append(b, '"')
	}
	b = append(b, `,"body_bytes":`...)
	b = strconv.AppendInt(b, q.BodyBytes, 10)
	if q.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, '}')
}

// encodedSize is about the size of q's AppendJSON (exact unless strings
// need escaping), so that a buffer of it rarely grows.
func (q *Request) encodedSize() int {
	n := len(`{"method":"","url":"","header":{},"body":"","body_bytes":20,"truncated":true}`) + len(q.Method) + len(q.URL)
	for k, vs := range q.Header {
		n += len(k) + len(`"":[],`)
		for _, v := range vs {
			n += len(v) + len(`"",`)
		}
	}
	return n + base64.StdEncoding.EncodedLen(len(q.Body))
}

// sortedKeysOnStack is how many header names appendHeader sorts without
// allocating; requests rarely carry more.
const sortedKeysOnStack = 64

// appendHeader writes h as encoding/json writes any map: names in byte
// order, a nil map or value list as null.
func appendHeader(b []byte, h http.Header) []byte {
	if h == nil {
		return append(b, "null"...)
	}
	var stack [sortedKeysOnStack]string
	keys := stack[:0]
	if len(h) > len(stack) {
		keys = make([]string, 0, len(h))
	}
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendStrings(b, h[k])
	}
	return append(b, '}')
}

// appendStrings writes ss as encoding/json writes a slice: nil as null.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendFloat writes f as encoding/json does: like ES6 number-to-string,
// with exponents only below 1e-6 or from 1e21 on, and not zero padded.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9.
		n := len(b)
		if b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendTime writes t as time.Time.MarshalJSON does, and where MarshalJSON
// fails, t in UTC or else the zero time (see Record.AppendJSON).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	n := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	if !strictRFC3339(b[n:]) {
		b = t.UTC().AppendFormat(b[:n], time.RFC3339Nano)
		if !strictRFC3339(b[n:]) {
			b = append(b[:n], "0001-01-01T00:00:00Z"...)
		}
	}
	return append(b, '"')
}

// strictRFC3339 reports whether s, formatted with RFC3339Nano, is a time
// MarshalJSON accepts: a four-digit year and a zone hour below 24.
func strictRFC3339(s []byte) bool {
	if s[len("9999")] != '-' {
		return false
	}
	if n := len(s); s[n-1] != 'Z' {
		if c := s[n-len("Z07:00")]; '0' <= c && c <= '9' {
			return false
		}
		if 10*(s[n-5]-'0')+(s[n-4]-'0') >= 24 {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// htmlSafe marks the bytes encoding/json writes as they are by default:
// printable ASCII other than the quote, the backslash and <, > and &, which
// it escapes so that JSON can be embedded in HTML. Bytes from utf8.RuneSelf
// on start a multi-byte sequence and are checked rune by rune.
var htmlSafe = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString writes s as a JSON string escaped as encoding/json escapes by
// default: HTML-safe, with U+2028 and U+2029 escaped and invalid UTF-8
// replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := skipSafe(s, 0); i < len(s); i = skipSafe(s, i) {
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// skipSafe returns the index of the first byte of s from i on that is not
// htmlSafe, or len(s). Strings are mostly safe ASCII, so it tests eight bytes
// at a time as one word, several times faster than a byte at a time.
func skipSafe(s string, i int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	// hasZero is exact about whether some byte of v is zero when no byte
	// has its high bit set, which the test of x&hi rules out.
	hasZero := func(v uint64) uint64 { return (v - lo) &^ v & hi }
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		unsafe := x&hi |
			(x-0x20*lo)&^x&hi | // a control character
			hasZero(x^('\\'*lo)) |
			hasZero((x|0x04*lo)^('&'*lo)) | // " or &, which differ only in bit 0x04
			hasZero((x|0x02*lo)^('>'*lo)) // < or >, which differ only in bit 0x02
		if unsafe != 0 {
			break
		}
	}
	for i < len(s) && htmlSafe[s[i]] {
		i++
	}
	return i
}

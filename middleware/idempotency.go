package middleware

// IdempotencyKey gives every non-idempotent handoff an Idempotency-Key at
// egress. A key the agent sent is kept when it is a valid RFC 8941 string
// (quoted or not, 1 to 255 characters) and refused with 400 otherwise. Absent
// one, Baton derives it deterministically, so that the agent retrying the
// same handoff, or handling the same inbound handoff again, sends the same
// key: from the handoff's causal position (the handling it is made for, the
// peer, and its position among that handling's calls to the peer: see
// handling.go), else from the A2A message id of a SendMessage /
// SendStreamingMessage (or v0.3 message/send, message/stream) request, else
// from (trace id, from, to, method, target, body digest). Baton-Key-Source
// tells the receiver which (position, message or content); it is absent on
// the agent's own key. Deriving reads the body (already capped by Limit) and
// hands the proxy a replayable copy; so does any body small enough to
// checkpoint. Idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) and
// external fetches get no derived key. An A2A handoff its headers did not tie
// to a handling is tied here by its message's context (correlate.go). It sits
// after Identity and Limit. It fails closed: a body that cannot be read is
// not forwarded.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/problem"
)

// HeaderIdempotencyKey is the IETF httpapi Idempotency-Key header, and
// HeaderKeySource the sending Baton's word on where a key it derived came
// from: "position", "message" or "content".
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderKeySource      = "Baton-Key-Source"
)

// MaxKeyLen bounds an idempotency key, in characters.
const MaxKeyLen = 255

// ErrBadKey reports a malformed Idempotency-Key.
var ErrBadKey = errors.New("idempotency key must be one RFC 8941 string of 1 to 255 printable ASCII characters")

// IdempotencyKey returns the egress key middleware. Bodies of handoffs up to
// bufferMax bytes (Content-Length known) are buffered so that the request can
// be checkpointed and retried; larger or chunked ones stream through, unless
// a key must be derived from them.
//
// With bufferAll (this Baton signs its handoffs, and a signature covers the
// body's digest) every handoff body is buffered, within the Limit cap.
func IdempotencyKey(hs Handlings, bufferMax int64, bufferAll bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			if !in.Handoff() {
				next.ServeHTTP(w, r)
				return
			}
			hasKey := false
			if vs := r.Header[HeaderIdempotencyKey]; len(vs) > 0 {
				key, err := ParseKey(vs)
				if err != nil {
					problem.Write(w, r, problem.BadIdempotencyKey, err.Error())
					return
				}
				in.Key, in.KeySource, hasKey = key, record.KeyFromAgent, true
				r.Header[HeaderIdempotencyKey] = []string{QuoteKey(key)}
			}
			derive := !hasKey && !idempotentMethod(r.Method)
			if (derive || bufferAll || (r.ContentLength >= 0 && r.ContentLength <= bufferMax)) && !Buffer(w, r, in) {
				return
			}
			if derive && in.Buffered {
				// Of MCP messages only a tool call is a handoff (mcp.go).
				if in.RPC == nil {
					sniffRPC(in, r, in.Body)
				}
				if in.RPC != nil && in.RPC.MCP != nil && !in.RPC.MCP.Handoff() {
					derive = false
				}
			}
			// The A2A context is more exact than the one-in-flight guess.
			guessed := in.Handling == nil || in.Correlation == record.CorrelatedByInFlight || in.Correlation == record.CorrelatedByLineage
			if guessed && in.Buffered && correlateA2A(hs, in, r) && in.MaxHops > 0 && in.Hop > in.MaxHops {
				hopLimit(w, r, in)
				return
			}
			if derive {
				if in.Handling == nil && in.Compensation == nil {
					hs.Untied(in.Edge(), in.TraceID)
				}
				// The key as a quoted sf-string, and the key inside it: one
				// string for both.
				quoted := in.derive(r)
				in.Key, in.KeyDerived = quoted[1:len(quoted)-1], true
				setHeaderPair(r.Header, HeaderIdempotencyKey, quoted, HeaderKeySource, in.KeySource)
			}
			if in.Call != nil {
				// The edge settles the call as soon as it knows the answer;
				// what it never saw was refused before it left, or failed.
				defer func() {
					o := CallFailed
					if !in.Delivered {
						o = CallUnsent
					}
					in.Call.Settle(o)
				}()
			}
			next.ServeHTTP(w, r)
		})
	}
}

// derive returns the key of a handoff whose agent sent none, quoted, and
// notes in in.KeySource (and in.Call) where it came from: the handoff's
// position in its handling, else its A2A message id, else its content.
func (in *Info) derive(r *http.Request) string {
	if h := in.Handling; h != nil {
		if in.RPC == nil {
			sniffRPC(in, r, in.Body)
		}
		if pos := h.take(in.To, fingerprint(r, in.Body, in.RPC)); pos > 0 {
			in.Call = &Call{h: h, peer: in.To, pos: pos}
			in.KeySource = record.KeyFromPosition
			return positionKey(h.Key, in.To, pos)
		}
	}
	quoted := deriveKey(in, r, in.Body)
	in.KeySource = record.KeyFromContent
	switch {
	case strings.HasPrefix(quoted, `"a2a-`):
		in.KeySource = record.KeyFromMessage
	case in.RPC != nil && in.RPC.MCP != nil && in.RPC.MCP.Session != "" && in.Correlation == "":
		in.Correlation = record.CorrelatedByMCPSession
	}
	return quoted
}

// Buffer makes sure in.Body holds the whole (capped) body, answering 413 or
// 400 and returning false when it cannot be read. A body already buffered is
// not read again.
func Buffer(w http.ResponseWriter, r *http.Request, in *Info) bool {
	if in.Buffered {
		return true
	}
	body, err := readBody(r, in)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			BodyTooLarge(w, r, tooBig.Limit)
			return false
		}
		in.Err = err
		problem.Write(w, r, problem.BadRequest, "reading the request body failed")
		return false
	}
	in.Body, in.Buffered = body, true
	return true
}

// readBody reads the whole (capped) body and replaces it with a replayable
// copy.
func readBody(r *http.Request, in *Info) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var body []byte
	var err error
	if r.ContentLength > 0 {
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(r.Body)
	}
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.ContentLength = int64(len(body))
	in.replay.of(r, body)
	return body, nil
}

// DeriveKey computes the deterministic key of a handoff whose agent sent
// none.
func DeriveKey(in *Info, r *http.Request, body []byte) string {
	q := deriveKey(in, r, body)
	return q[1 : len(q)-1]
}

// deriveKey is DeriveKey's key quoted as an RFC 8941 sf-string (a derived
// key has nothing to escape).
func deriveKey(in *Info, r *http.Request, body []byte) string {
	// The fields are hashed as one length-prefixed message built on the
	// stack: hashing through hash.Hash cost an allocation per field.
	var buf [256]byte
	msg := buf[:0]
	if id := a2aMessageID(r, body); id != "" {
		msg = appendField(msg, "a2a")
		msg = appendField(msg, in.From)
		msg = appendField(msg, in.To)
		msg = appendField(msg, id)
		return keyString("a2a-", sha256.Sum256(msg))
	}
	digest := sha256.Sum256(body)
	traceID := in.TraceID
	if rpc := in.RPC; rpc != nil && rpc.MCP != nil {
		// The session and the messages as fingerprint has them: a retry of
		// a call (its id again, in its session) has its key, another call
		// of the same tool has its own. Within a session the call is the
		// same whatever its trace: a client that forwards no trace context
		// starts a new one with every retry.
		digest = sha256.Sum256(append(appendField(nil, rpc.MCP.Session), rpc.MCP.fingerprintInput()...))
		if rpc.MCP.Session != "" {
			traceID = ""
		}
	}
	msg = appendField(msg, "http")
	msg = appendField(msg, traceID)
	msg = appendField(msg, in.From)
	msg = appendField(msg, in.To)
	msg = appendField(msg, r.Method)
	msg = appendField(msg, r.URL.RequestURI())
	msg = append(msg, digest[:]...)
	return keyString("bk-", sha256.Sum256(msg))
}

// appendField appends s length-prefixed, so that fields cannot run together.
func appendField(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// keyString renders prefix and the first 16 bytes of sum in hex, quoted.
func keyString(prefix string, sum [sha256.Size]byte) string {
	var out [2 + 8 + 32]byte
	out[0] = '"'
	n := 1 + copy(out[1:], prefix)
	n += hex.Encode(out[n:], sum[:16])
	out[n] = '"'
	return string(out[:n+1])
}

// a2aSend lists the A2A methods whose message id is the natural key.
var a2aSend = map[string]bool{
	"SendMessage": true, "SendStreamingMessage": true, // A2A v1.0
	"message/send": true, "message/stream": true, // A2A v0.3
}

// a2aMessageID returns params.message.messageId of an A2A send request, or
// "" when body is not one. Bodies that are not JSON-RPC are only sniffed.
func a2aMessageID(r *http.Request, body []byte) string {
	if len(body) == 0 || !strings.Contains(r.Header.Get("Content-Type"), "json") ||
		!bytes.Contains(body, []byte(`"jsonrpc"`)) || !bytes.Contains(body, []byte(`"messageId"`)) {
		return ""
	}
	var req struct {
		Method string `json:"method"`
		Params struct {
			Message struct {
				MessageID string `json:"messageId"`
			} `json:"message"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil || !a2aSend[req.Method] {
		return ""
	}
	return req.Params.Message.MessageID
}

func idempotentMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// ParseKey parses the values of an Idempotency-Key header: exactly one RFC
// 8941 sf-string ("…", with \" and \\ escapes), or one unquoted run of
// visible ASCII without quotes, backslashes or commas.
func ParseKey(values []string) (string, error) {
	if len(values) != 1 {
		return "", ErrBadKey
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", ErrBadKey
	}
	if v[0] != '"' {
		if len(v) > MaxKeyLen {
			return "", ErrBadKey
		}
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == ',' {
				return "", ErrBadKey
			}
		}
		return v, nil
	}
	if len(v) < 3 || v[len(v)-1] != '"' {
		return "", ErrBadKey
	}
	inner := v[1 : len(v)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		if len(inner) > MaxKeyLen || strings.IndexByte(inner, '"') >= 0 || !printable(inner) {
			return "", ErrBadKey
		}
		return inner, nil
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", ErrBadKey
			}
			b.WriteByte(inner[i])
		case c == '"' || c < 0x20 || c >= 0x7f:
			return "", ErrBadKey
		default:
			b.WriteByte(c)
		}
	}
	if b.Len() == 0 || b.Len() > MaxKeyLen {
		return "", ErrBadKey
	}
	return b.String(), nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// QuoteKey renders key as an RFC 8941 sf-string.
func QuoteKey(key string) string {
	if !strings.ContainsAny(key, `"\`) {
		return `"` + key + `"`
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

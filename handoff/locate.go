package handoff

import (
	"bytes"
	"strings"
)

// MediaType is the content type of a request whose whole body is an envelope.
const MediaType = "application/vnd.baton.handoff+json"

// MetadataKey is the member of an A2A message's metadata that carries the
// envelope.
const MetadataKey = "baton.handoff"

// A2APointer is the JSON pointer of the envelope inside an A2A request. The
// pointers of violations found in an A2A request start with it.
const A2APointer = "/params/message/metadata/baton.handoff"

// Where says where a request carries its envelope.
type Where uint8

// The carriers of an envelope.
const (
	None Where = iota // no envelope: the body is opaque to Baton
	Body              // the whole body, Content-Type: application/vnd.baton.handoff+json
	A2A               // params.message.metadata["baton.handoff"] of an A2A JSON-RPC request
)

func (w Where) String() string {
	switch w {
	case Body:
		return "body"
	case A2A:
		return "a2a"
	default:
		return "none"
	}
}

// a2aPath leads to the envelope in an A2A request.
var a2aPath = [...]string{"params", "message", "metadata", MetadataKey}

// a2aMethods are the A2A methods whose params carry a message: v1.0 names and
// the v0.3 names still in use.
var a2aMethods = [...]string{"SendMessage", "SendStreamingMessage", "message/send", "message/stream"}

// Locate reports where body carries an envelope, looking no further than it
// must: a body is an envelope when contentType is MediaType; it carries one in
// A2A metadata when it is JSON (application/json or any +json type) starting
// with '{', mentions the metadata key, and is then a JSON-RPC 2.0 request for
// SendMessage, SendStreamingMessage, message/send or message/stream with
// params.message.metadata["baton.handoff"]. Every other body is opaque: it is
// not parsed, and Locate allocates nothing for it. Checker.Check locates the
// envelope itself; call Locate when only the carrier matters.
func Locate(contentType string, body []byte) Where {
	var t tape
	return locate(contentType, body, &t).where
}

// located is where the envelope is: for A2A, node env of the tape that locate
// filled, and any member on the way to it that the body names twice.
type located struct {
	where Where
	env   int
	dup   string // pointer of a duplicated member on the A2A path, or ""
}

func locate(contentType string, body []byte, t *tape) located {
	mt := contentType
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	mt = strings.TrimSpace(mt)
	if strings.EqualFold(mt, MediaType) {
		return located{where: Body}
	}
	if !strings.EqualFold(mt, "application/json") &&
		!(len(mt) > 5 && strings.EqualFold(mt[len(mt)-5:], "+json")) {
		return located{}
	}
	if i := skipWS(body, 0); i >= len(body) || body[i] != '{' || !mayNameMetadataKey(body) {
		return located{}
	}
	return locateA2A(body, t)
}

// mayNameMetadataKey reports whether body may hold the member name
// "baton.handoff": literally, or with one of its characters written as a
// \u escape (each is ASCII, so such an escape starts \u002 or \u006 or \u007).
// Checking for the escapes as well means an envelope cannot slip past Baton
// by spelling its key differently; legitimate encoders never escape these
// characters, so opaque bodies stay unparsed.
func mayNameMetadataKey(body []byte) bool {
	if bytes.Contains(body, []byte(`"`+MetadataKey+`"`)) {
		return true
	}
	for b := body; ; {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+4 >= len(b) {
			return false
		}
		if b[i+1] == 'u' && b[i+2] == '0' && b[i+3] == '0' && (b[i+4] == '2' || b[i+4] == '6' || b[i+4] == '7') {
			return true
		}
		b = b[i+2:] // past the escape's first two bytes, so \\ counts once
	}
}

// locateA2A finds params.message.metadata["baton.handoff"] in a JSON-RPC 2.0
// request for one of a2aMethods. Where members repeat, the last one counts,
// as in encoding/json, JavaScript and Python; the repetition is reported.
func locateA2A(body []byte, t *tape) located {
	if !t.parsePath(body, a2aPath[:]) || !t.isObject(0) {
		return located{}
	}
	if !isA2ASend(t) {
		return located{}
	}
	ptrs := [...]string{"/params", "/params/message", "/params/message/metadata", A2APointer}
	var dup string
	at := 0
	for step, name := range a2aPath {
		if !t.isObject(at) {
			return located{}
		}
		next, seen := -1, 0
		for k, end := t.first(at); k < end; k = t.after(k + 1) {
			if t.is(k, name) {
				if seen++; seen > 1 && dup == "" {
					dup = ptrs[step]
				}
				next = k + 1
			}
		}
		if at = next; at < 0 {
			return located{}
		}
	}
	return located{where: A2A, env: at, dup: dup}
}

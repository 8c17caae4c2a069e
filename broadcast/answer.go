package broadcast

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
)

// memberAnswer is one member in the broadcast's answer document.
type memberAnswer struct {
	Agent       string          `json:"agent"`
	State       string          `json:"state"` // answered, failed, pending
	Status      int             `json:"status,omitempty"`
	ContentType string          `json:"content_type,omitempty"`
	Body        json.RawMessage `json:"body,omitempty"`
	BodyText    string          `json:"body_text,omitempty"`
	BodyBase64  string          `json:"body_base64,omitempty"`
	BodyOmitted bool            `json:"body_omitted,omitempty"`
	Record      string          `json:"record,omitempty"`
	DeadLetter  string          `json:"dead_letter,omitempty"`
}

// document is the document the agent gets.
type document struct {
	Broadcast string         `json:"broadcast"`
	Mode      string         `json:"mode"`
	Quorum    int            `json:"quorum,omitempty"`
	Key       string         `json:"key,omitempty"`
	Met       bool           `json:"met"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Pending   int            `json:"pending"`
	Missed    []string       `json:"missed,omitempty"`
	Members   []memberAnswer `json:"members"`
}

// answer writes the broadcast's one answer: 200 with the document when its
// mode is met, else the problem broadcast-incomplete (502) carrying the same
// members, with Baton-Dead-Letter naming the first member's dead letter.
func (b *Broadcaster) answer(w http.ResponseWriter, r *http.Request, in *middleware.Info, g *spec, got []*memberResult) {
	doc := document{Broadcast: g.name, Mode: g.Mode, Quorum: g.Quorum, Key: in.Key}
	firstDead, pending := "", []string(nil)
	for i, m := range g.Members {
		res := got[i]
		if res == nil {
			pending = append(pending, m)
			doc.Members = append(doc.Members, memberAnswer{Agent: m, State: "pending"})
			continue
		}
		a := memberAnswer{Agent: m, State: "answered", Status: res.status, Record: res.record, DeadLetter: res.deadLetter}
		if res.ok() {
			doc.Succeeded++
		} else {
			a.State = "failed"
			doc.Failed++
			doc.Missed = append(doc.Missed, m)
			if firstDead == "" {
				firstDead = res.deadLetter
			}
		}
		in.Delivered = in.Delivered || res.delivered
		a.setBody(res)
		doc.Members = append(doc.Members, a)
	}
	doc.Pending, doc.Met = len(pending), doc.Succeeded >= g.needed()
	echoKey(w.Header(), r.Header)
	if doc.Met {
		in.Call.Settle(middleware.CallAnswered)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(doc)
		return
	}
	doc.Missed = append(doc.Missed, pending...) // still running at the deadline
	if firstDead != "" {
		w.Header().Set(middleware.HeaderDeadLetter, firstDead)
	}
	detail := "the broadcast to " + g.name + " (mode " + g.Mode + ") was not met by its deadline: " +
		strconv.Itoa(doc.Succeeded) + " of " + strconv.Itoa(len(g.Members)) + " members answered 2xx"
	problem.New(r, problem.BroadcastIncomplete, detail).
		With("broadcast", doc.Broadcast).With("mode", doc.Mode).With("succeeded", doc.Succeeded).
		With("failed", doc.Failed).With("pending", doc.Pending).With("missed", doc.Missed).
		With("members", doc.Members).Write(w)
}

// setBody puts a member's answer into the document: JSON as it is, text as
// a string, anything else in base64.
func (a *memberAnswer) setBody(res *memberResult) {
	a.ContentType = res.header.Get("Content-Type")
	switch mt, _, _ := mime.ParseMediaType(a.ContentType); {
	case res.omitted:
		a.BodyOmitted = true
	case len(res.body) == 0:
	case (mt == "application/json" || strings.HasSuffix(mt, "+json")) && json.Valid(res.body):
		a.Body = res.body
	case utf8.Valid(res.body):
		a.BodyText = string(res.body)
	default:
		a.BodyBase64 = base64.StdEncoding.EncodeToString(res.body)
	}
}

// captureAnswer is the ResponseWriter a member's handoff answers into: the
// status, the headers and the body up to max bytes.
type captureAnswer struct {
	header  http.Header
	status  int
	body    bytes.Buffer
	max     int64
	omitted bool
}

func (c *captureAnswer) Header() http.Header { return c.header }

func (c *captureAnswer) WriteHeader(status int) {
	if c.status == 0 && status >= 200 {
		c.status = status
	}
}

func (c *captureAnswer) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if !c.omitted && int64(c.body.Len()+len(p)) > c.max {
		c.omitted = true
		c.body = bytes.Buffer{}
	}
	if !c.omitted {
		c.body.Write(p)
	}
	return len(p), nil
}

// Flush is a no-op: the answer goes to the agent whole, in the document.
func (c *captureAnswer) Flush() {}

// echoKey copies the Idempotency-Key of the broadcast's request onto its
// answer, as the egress chain does for any handoff's: the agent learns the
// key to retry the broadcast with.
func echoKey(answer, request http.Header) {
	if v := request[middleware.HeaderIdempotencyKey]; len(v) == 1 {
		answer[middleware.HeaderIdempotencyKey] = v
	}
}

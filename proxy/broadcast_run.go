package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
)

// memberResult is what one member's handoff came to.
type memberResult struct {
	index      int
	status     int
	header     http.Header
	body       []byte
	omitted    bool // the answer was larger than limits.max_body_bytes
	record     string
	deadLetter string
	delivered  bool
}

func (m *memberResult) ok() bool { return m.status >= 200 && m.status < 300 }

// broadcastRun is one broadcast in flight.
type broadcastRun struct {
	g        *broadcastSpec
	done     chan *memberResult
	deadline time.Time
}

// start sends the broadcast's handoffs, at most g.concurrency at once. They
// run on a context the agent's leaving does not cancel, bounded by the
// broadcast's deadline: every member's handoff ends delivered or as a dead
// letter, even after the agent has its answer.
func (b *broadcaster) start(r *http.Request, in *middleware.Info, g *broadcastSpec, next http.Handler) *broadcastRun {
	run := &broadcastRun{g: g, done: make(chan *memberResult, len(g.Members)), deadline: time.Now().Add(g.Deadline.D())}
	ctx := middleware.WithDeadline(context.WithoutCancel(r.Context()), run.deadline)
	conc := g.Concurrency
	if conc <= 0 || conc > len(g.Members) {
		conc = len(g.Members)
	}
	// Every member's request is made here, before any is sent: the
	// broadcast's Info and request are the agent's handler's again once it
	// has its answer, which may come before the last member is sent.
	reqs := make([]*http.Request, len(g.Members))
	for i, m := range g.Members {
		reqs[i] = b.memberRequest(ctx, r, in, m)
	}
	slots := make(chan struct{}, conc)
	for i, mr := range reqs {
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			res := b.send(mr, next)
			res.index = i
			run.done <- res
		}()
	}
	return run
}

// memberRequest is the broadcast's request made out to one member, with
// its own Info and key.
func (b *broadcaster) memberRequest(ctx context.Context, r *http.Request, in *middleware.Info, member string) *http.Request {
	p := b.rs.peers[member]
	key := ""
	if in.Key != "" {
		key = middleware.MemberKey(in.Key, member)
	}
	mi := in.ForMember(member, p.url, p.maxHops, key)
	mr := r.Clone(middleware.WithInfo(ctx, mi))
	mr.Host = member
	if key != "" {
		mr.Header[middleware.HeaderIdempotencyKey] = []string{key}
	}
	mr.Body, mr.ContentLength = io.NopCloser(bytes.NewReader(in.Body)), int64(len(in.Body))
	body := in.Body
	mr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return mr
}

// send makes the handoff to one member and keeps its answer.
func (b *broadcaster) send(mr *http.Request, next http.Handler) *memberResult {
	mi := middleware.InfoFromContext(mr.Context())
	cw := &captureAnswer{header: http.Header{}, max: b.maxBody}
	next.ServeHTTP(cw, mr)
	if cw.status == 0 {
		cw.status = http.StatusOK
	}
	return &memberResult{status: cw.status, header: cw.header, body: cw.body.Bytes(), omitted: cw.omitted,
		record: mi.RecordID, deadLetter: mi.DeadLetter, delivered: mi.Delivered}
}

// wait collects the members' results until the broadcast's mode is met,
// or (modes any and quorum) can no longer be, or every member has answered:
// mode all always waits for every member, so that its document is whole. A
// member still running past the deadline (and a little grace for its dead
// letter) is missed.
func (run *broadcastRun) wait() []*memberResult {
	n, need := len(run.g.Members), run.g.needed()
	got := make([]*memberResult, n)
	grace := time.NewTimer(time.Until(run.deadline) + 2*time.Second)
	defer grace.Stop()
	succeeded, failed := 0, 0
	for succeeded+failed < n {
		select {
		case res := <-run.done:
			got[res.index] = res
			if res.ok() {
				succeeded++
			} else {
				failed++
			}
		case <-grace.C:
			return got
		}
		if succeeded >= need || (run.g.Mode != config.BroadcastAll && failed > n-need) {
			return got
		}
	}
	return got
}

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

// broadcastAnswer is the document the agent gets.
type broadcastAnswer struct {
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
func (b *broadcaster) answer(w http.ResponseWriter, r *http.Request, in *middleware.Info, g *broadcastSpec, got []*memberResult) {
	doc := broadcastAnswer{Broadcast: g.name, Mode: g.Mode, Quorum: g.Quorum, Key: in.Key}
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

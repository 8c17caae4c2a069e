package broadcast

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
)

// FanOut sends a broadcast Route resolved through the rest of the egress
// chain (policy, contract, labels, the edge), one handoff per member, and
// answers the agent with one document; any other request passes through.
// It sits in the egress chain right after the idempotency key, whose key
// each member's is derived from.
func (b *Broadcaster) FanOut(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, ok := r.Context().Value(specKey{}).(*spec)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		in := middleware.InfoFromContext(r.Context())
		if !middleware.Buffer(w, r, in) { // every member is sent the whole body
			return
		}
		b.answer(w, r, in, g, b.start(r, in, g, next).wait())
	})
}

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

// flight is one broadcast in flight.
type flight struct {
	g        *spec
	done     chan *memberResult
	deadline time.Time
}

// start sends the broadcast's handoffs, at most g.Concurrency at once. They
// run on a context the agent's leaving does not cancel, bounded by the
// broadcast's deadline (which the edges honour): every member's handoff
// ends delivered or as a dead letter, even after the agent has its answer.
func (b *Broadcaster) start(r *http.Request, in *middleware.Info, g *spec, next http.Handler) *flight {
	run := &flight{g: g, done: make(chan *memberResult, len(g.Members)), deadline: time.Now().Add(g.Deadline.D())}
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
func (b *Broadcaster) memberRequest(ctx context.Context, r *http.Request, in *middleware.Info, member string) *http.Request {
	target, maxHops, _ := b.peers.PeerRoute(member)
	key := ""
	if in.Key != "" {
		key = middleware.MemberKey(in.Key, member)
	}
	mi := in.ForMember(member, target, maxHops, key)
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
func (b *Broadcaster) send(mr *http.Request, next http.Handler) *memberResult {
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
func (run *flight) wait() []*memberResult {
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

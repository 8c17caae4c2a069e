package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// orderedStore is a real store that notes when the fingerprints of
// untrusted text begin and end being kept and when the dedupe window's
// claims are made, and holds each keeping for hold, so that what overlaps
// it shows.
type orderedStore struct {
	state.Store
	hold time.Duration

	mu     sync.Mutex
	events []string
}

func (s *orderedStore) event(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

func (s *orderedStore) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

func (s *orderedStore) MarkAdd(ctx context.Context, key string, members []uint64, val string, ttl time.Duration, max int) error {
	s.event("keep")
	time.Sleep(s.hold)
	err := s.Store.MarkAdd(ctx, key, members, val, ttl, max)
	s.event("kept")
	return err
}

func (s *orderedStore) ClaimMany(ctx context.Context, ops []state.ClaimOp) ([]state.ClaimResult, error) {
	s.event("claim")
	return s.Store.ClaimMany(ctx, ops)
}

// TestUntrustedKeptWhileClaiming: a Baton on Redis keeps the fingerprints
// of the untrusted text it receives while it claims the handoff's dedupe
// window, the two round trips at once on the request path rather than one
// after the other, and the agent gets the text only once its fingerprints
// are kept, so that the agent handing it straight on is still caught.
func TestUntrustedKeptWhileClaiming(t *testing.T) {
	t.Parallel()
	st := &orderedStore{Store: redisStore(t, redistest.Shared(t)), hold: 300 * time.Millisecond}
	ag := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.event("agent")
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(ag.Close)
	b := startBaton(t, "agent: summarizer\nupstream: "+ag.URL+"\nedges: [{from: analyst, posture: untrusted}]\n", st)
	a := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+b.IngressAddr()+"}}\n", nil)
	resp := send(t, a.EgressAddr(), "summarizer", "POST", "/in", `{"task":"`+ownWords+`","notes":"`+copied+`"}`,
		http.Header{"Content-Type": {"application/json"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("handoff: %d", resp.StatusCode)
	}
	got := st.seen()
	at := func(e string) int { return slices.Index(got, e) }
	if at("keep") < 0 || at("claim") < 0 || at("agent") < 0 {
		t.Fatalf("events %v: want the keeping, the claim and the agent's call", got)
	}
	if at("kept") < 0 || at("agent") < at("kept") {
		t.Fatalf("events %v: the agent got the text before its fingerprints were kept", got)
	}
	if at("claim") > at("kept") {
		t.Errorf("events %v: the claim waited for the fingerprints to be kept", got)
	}
}

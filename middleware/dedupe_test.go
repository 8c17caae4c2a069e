package middleware

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
)

func TestEntryRoundTrip(t *testing.T) {
	t.Parallel()
	fp := [32]byte{1, 2, 3}
	holder := state.HolderID{7, 7}
	pending := encodePending(fp, holder)
	if e, err := decodeEntry(pending); err != nil || e.state != statePending || e.fp != fp || !e.hasHolder || e.holder != holder {
		t.Fatalf("pending: %+v %v", e, err)
	}
	if bytes.Equal(pending, encodePending(fp, holder)) {
		t.Error("two pending claims for one fingerprint are identical: owners must differ")
	}
	moved := withHolder(pending, state.HolderID{8})
	if e, err := decodeEntry(moved); err != nil || e.holder != (state.HolderID{8}) || !bytes.Equal(moved[:50], pending[:50]) {
		t.Fatalf("withHolder changed more than the holder: %x → %x (%v)", pending, moved, err)
	}
	// A claim written before claims named their holder is still read.
	if e, err := decodeEntry(pending[:50]); err != nil || e.state != statePending || e.hasHolder {
		t.Fatalf("a pending entry without its holder: %+v %v", e, err)
	}
	tests := []struct {
		name   string
		cw     *captureWriter
		state  entryState
		status int
	}{
		{"complete", &captureWriter{status: 201, header: http.Header{
			"Content-Type": {"application/json"}, "X-Multi": {"a", "b"}, "Connection": {"close"}, "Date": {"x"},
		}}, stateComplete, 201},
		{"not retained", &captureWriter{status: 200, over: true}, stateNotRetained, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cw.body.WriteString("hello")
			e, err := decodeEntry(encodeComplete(pending, tc.cw))
			if err != nil || e.state != tc.state || e.status != tc.status || e.fp != fp {
				t.Fatalf("%+v %v", e, err)
			}
			if tc.state != stateComplete {
				return
			}
			if string(e.body) != "hello" {
				t.Errorf("body %q", e.body)
			}
			got := http.Header{}
			for _, kv := range e.headers {
				got.Add(kv[0], kv[1])
			}
			if got.Get("Content-Type") != "application/json" || len(got["X-Multi"]) != 2 ||
				got.Get("Connection") != "" || got.Get("Date") != "" {
				t.Errorf("headers %v", got)
			}
		})
	}
}

func FuzzDecodeEntry(f *testing.F) {
	cw := &captureWriter{status: 200, header: http.Header{"A": {"b"}}}
	cw.body.WriteString("body")
	f.Add(encodePending([32]byte{}, state.HolderID{}))
	f.Add(encodeComplete(encodePending([32]byte{9}, state.HolderID{1}), cw))
	f.Add([]byte{1, 'c'})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEntry(b)
		if err != nil {
			return
		}
		if e.state == stateComplete && (e.status < 100 || e.status > 999) {
			t.Errorf("accepted status %d", e.status)
		}
	})
}

func TestCaptureWriterCap(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	cw := &captureWriter{ResponseWriter: rec, limit: 10}
	cw.Write([]byte("12345"))
	cw.Write([]byte("67890"))
	if cw.over || cw.body.String() != "1234567890" {
		t.Fatalf("within the cap: over=%v %q", cw.over, cw.body.String())
	}
	cw.Write([]byte("x"))
	if !cw.over || cw.body.Len() != 0 {
		t.Errorf("past the cap the copy must be dropped: over=%v len=%d", cw.over, cw.body.Len())
	}
	if rec.Body.String() != "1234567890x" {
		t.Errorf("the client lost bytes: %q", rec.Body.String())
	}
}

// renewCounter counts lease renewals on a real memory store.
type renewCounter struct {
	*state.Memory
	renewals atomic.Int64
}

func (r *renewCounter) Renew(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	r.renewals.Add(1)
	return r.Memory.Renew(ctx, key, val, ttl)
}

func TestLeaseRenewedWhileAgentWorks(t *testing.T) {
	t.Parallel()
	store := &renewCounter{Memory: state.NewMemory(config.Memory{})}
	defer store.Close()
	// A lease long enough that a loaded machine's scheduling delays do not
	// let one lapse between renewals (each renewal is due a third of a
	// lease after the last).
	pol := &DedupePolicy{Methods: []string{"POST"}, Window: time.Minute, Lease: 300 * time.Millisecond, MaxResponseBytes: 1024}
	release := make(chan struct{})
	h := Dedupe(store, nil, func(string) *DedupePolicy { return pol }, slog.New(slog.DiscardHandler))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
			io.WriteString(w, "ok")
		}))
	req := func() *http.Request {
		r := httptest.NewRequest("POST", "/x", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", "k")
		return r.WithContext(WithInfo(r.Context(), &Info{From: "a", To: "b"}))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), req())
	}()
	// Several leases pass while the agent works; renewals keep the claim.
	deadline := time.Now().Add(15 * time.Second)
	for store.renewals.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatal("the lease is not being renewed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	dup := httptest.NewRecorder()
	h.ServeHTTP(dup, req())
	if dup.Code != http.StatusConflict {
		t.Errorf("duplicate after several lease periods: %d, want 409 (the claim must still be held)", dup.Code)
	}
	close(release)
	<-done
	n := store.renewals.Load()
	replay := httptest.NewRecorder()
	h.ServeHTTP(replay, req())
	if replay.Code != 200 || replay.Header().Get(HeaderReplayed) != "true" {
		t.Errorf("after completion: %d %v", replay.Code, replay.Header())
	}
	time.Sleep(3 * pol.Lease) // renewals must have stopped with the request
	if store.renewals.Load() != n {
		t.Error("renewals go on after the request ended")
	}
}

// TestKeptReleaseNeverReplacesAnswer: while the store is down, an answer
// kept for a key is what the store must get; a release kept later for the
// same key (a resend whose claim failed) does not replace it.
func TestKeptReleaseNeverReplacesAnswer(t *testing.T) {
	t.Parallel()
	k := newKept(downStore{}, slog.New(slog.DiscardHandler))
	final := []byte("the agent's answer")
	if !k.keep("idem:{k}", &keptWrite{pending: []byte("p1"), final: final, until: time.Now().Add(time.Hour)}) {
		t.Fatal("no room for the answer")
	}
	if !k.keep("idem:{k}", &keptWrite{pending: []byte("p2")}) {
		t.Fatal("the release was refused")
	}
	if got := k.answer("idem:{k}"); string(got) != string(final) {
		t.Errorf("kept %q, want the answer", got)
	}
}

// downStore is a dedupe store that does not answer.
type downStore struct{}

var errDown = errors.New("store down")

func (downStore) ClaimMany(context.Context, []state.ClaimOp) ([]state.ClaimResult, error) {
	return nil, errDown
}
func (downStore) Renew(context.Context, string, []byte, time.Duration) (bool, error) {
	return false, errDown
}
func (downStore) Swap(context.Context, string, []byte, []byte, time.Duration) (bool, error) {
	return false, errDown
}
func (downStore) Release(context.Context, string, []byte) (bool, error) { return false, errDown }

// swapWatcher notes the pending entries a memory store's claims are swapped
// to (a claim made the holder's again).
type swapWatcher struct {
	*renewCounter
	swapped chan []byte
}

func (s *swapWatcher) Swap(ctx context.Context, key string, prev, next []byte, ttl time.Duration) (bool, error) {
	ok, err := s.renewCounter.Swap(ctx, key, prev, next, ttl)
	if ok && err == nil {
		s.swapped <- next
	}
	return ok, err
}

// TestClaimFollowsHolderChange: while a request is delivered, its holder's
// mark lapses and a new incarnation begins; the claim is made the new
// incarnation's at once, long before a renewal is due, and no renewal runs
// for a request that ends before one is.
func TestClaimFollowsHolderChange(t *testing.T) {
	t.Parallel()
	store := &swapWatcher{renewCounter: &renewCounter{Memory: state.NewMemory(config.Memory{})}, swapped: make(chan []byte, 4)}
	defer store.Close()
	log := slog.New(slog.DiscardHandler)
	holder := state.NewHolder(store.Memory, 90*time.Millisecond, log)
	ctx := context.Background()
	holder.Begin(ctx, "")
	pol := &DedupePolicy{Methods: []string{"POST"}, Window: time.Hour, Lease: time.Hour, MaxResponseBytes: 1024}
	working, release := make(chan struct{}, 1), make(chan struct{})
	h := Dedupe(store, holder, func(string) *DedupePolicy { return pol }, log)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			working <- struct{}{}
			<-release
			io.WriteString(w, "ok")
		}))
	serve := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/x", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r.WithContext(WithInfo(r.Context(), &Info{From: "a", To: "b"})))
		return rec
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve("slow")
	}()
	<-working
	old := holder.ID()
	time.Sleep(200 * time.Millisecond) // the mark lapses: nothing renews it
	holder.Confirm(ctx)
	if holder.ID() == old {
		t.Fatal("no new incarnation after the mark lapsed")
	}
	select {
	case next := <-store.swapped:
		e, err := decodeEntry(next)
		if err != nil || !e.hasHolder || e.holder != holder.ID() {
			t.Errorf("the claim was swapped to %x (%v), want it named for the new incarnation %s", next, err, holder.ID())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight claim was not made the new incarnation's")
	}
	close(release)
	<-done
	if n := store.renewals.Load(); n != 0 {
		t.Errorf("%d renewals for requests that ended long before one was due", n)
	}
}

package middleware

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
)

// TestKeptAnswerWaitsForAClaimInFlight: an answer kept while the store was
// down meets, once it is back, another request's claim on its key. It is
// not given up for it: when that request lets the key go (its agent
// failed), the kept answer is written; when that request answers, its
// answer is the window's and the kept one is let go.
func TestKeptAnswerWaitsForAClaimInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var fp [32]byte
	var holder state.HolderID
	for _, tc := range []struct {
		name   string
		settle func(store *state.Memory, skey string, other []byte) // what the other request does
		want   func(other []byte) []byte                            // what the window holds at the end
	}{
		{"the other request fails and lets the key go", func(store *state.Memory, skey string, other []byte) {
			if ok, err := store.Release(ctx, skey, other); !ok || err != nil {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		}, func([]byte) []byte { return []byte("kept answer") }},
		{"the other request answers", func(store *state.Memory, skey string, other []byte) {
			if ok, err := store.Swap(ctx, skey, other, []byte("its answer"), time.Minute); !ok || err != nil {
				t.Fatalf("Swap = %v, %v", ok, err)
			}
		}, func([]byte) []byte { return []byte("its answer") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := state.NewMemory(config.Memory{})
			defer store.Close()
			const skey = "idem:order-1"
			// This process's claim lapsed while the store was down; another
			// request claimed the key since.
			lapsed, other := encodePending(fp, holder), encodePending(fp, holder)
			if res, err := store.ClaimMany(ctx, []state.ClaimOp{{Key: skey, Val: other, TTL: time.Minute}}); err != nil || !res[0].OK {
				t.Fatalf("the other request's claim: %v, %v", res, err)
			}
			var logs bytes.Buffer
			k := newKept(store, slog.New(slog.NewTextHandler(&logs, nil)))
			k.keep(skey, &keptWrite{pending: lapsed, final: []byte("kept answer"), ttl: time.Minute,
				until: time.Now().Add(time.Minute), edge: "a→b"})

			time.Sleep(3 * keptRetry)
			if cur, _ := store.Get(ctx, skey); !bytes.Equal(cur, other) {
				t.Fatalf("the window holds %q while the other request is in flight, want its claim", cur)
			}
			if got := k.answer(skey); string(got) != "kept answer" {
				t.Fatalf("the kept answer was given up while the other request was in flight (kept: %q)", got)
			}
			tc.settle(store, skey, other)
			want := tc.want(other)
			deadline := time.Now().Add(5 * time.Second)
			for {
				cur, _ := store.Get(ctx, skey)
				if bytes.Equal(cur, want) && k.n.Load() == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the window holds %q, kept %d writes; want %q and none kept", cur, k.n.Load(), want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n := bytes.Count(logs.Bytes(), []byte("another request holds its key")); n != 1 {
				t.Errorf("the wait was logged %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

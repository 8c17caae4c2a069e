package storetest

import (
	"context"
	"testing"

	"github.com/batonproxy/baton/state"
)

// expiryCases check that every kind of entry expires, that TTLs are set and
// cleared as documented, and that an expired entry is absent to every
// operation. A case that needs "still there after the short TTL" waits for a
// control key with the short TTL to expire first (outlive).
func expiryCases() []testCase {
	return []testCase{
		{"set ttl expires", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			must(t, "Set", s.Set(t.Context(), k, []byte("v"), short))
			expired(t, s, k)
		}},
		{"set without ttl does not expire", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			must(t, "Set", s.Set(t.Context(), k, []byte("v"), short))
			must(t, "Set again without ttl", s.Set(t.Context(), k, []byte("v"), 0))
			outlive(t, s)
			wantValue(t, s, k, []byte("v"))
		}},
		{"claim expires and can be claimed again", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("first"), short)
			wantOK(t, "Claim", ok, err, true)
			eventually(t, "reclaiming after expiry", func(ctx context.Context) (bool, error) {
				ok, _, err := s.Claim(ctx, k, []byte("second"), long)
				return ok, err
			})
			wantValue(t, s, k, []byte("second"))
		}},
		{"renew extends the lease", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("holder"), short)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Renew(t.Context(), k, []byte("holder"), long)
			wantOK(t, "Renew", ok, err, true)
			outlive(t, s)
			wantValue(t, s, k, []byte("holder"))
		}},
		{"renew without ttl removes expiry", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("holder"), short)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Renew(t.Context(), k, []byte("holder"), 0)
			wantOK(t, "Renew", ok, err, true)
			outlive(t, s)
			wantValue(t, s, k, []byte("holder"))
		}},
		{"failed renew does not extend", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("holder"), short)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Renew(t.Context(), k, []byte("other"), long)
			wantOK(t, "Renew by other", ok, err, false)
			expired(t, s, k)
		}},
		{"swap sets the new ttl", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("v1"), long)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Swap(t.Context(), k, []byte("v1"), []byte("v2"), short)
			wantOK(t, "Swap", ok, err, true)
			expired(t, s, k)
		}},
		{"swap without ttl removes expiry", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("v1"), short)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Swap(t.Context(), k, []byte("v1"), []byte("v2"), 0)
			wantOK(t, "Swap", ok, err, true)
			outlive(t, s)
			wantValue(t, s, k, []byte("v2"))
		}},
		{"expired value is absent to every operation", func(t *testing.T, s state.Store) {
			ctx := t.Context()
			k := key(t, "k")
			must(t, "Set", s.Set(ctx, k, []byte("v"), short))
			expired(t, s, k)
			ok, err := s.Renew(ctx, k, []byte("v"), long)
			wantOK(t, "Renew expired", ok, err, false)
			ok, err = s.Swap(ctx, k, []byte("v"), []byte("w"), long)
			wantOK(t, "Swap expired", ok, err, false)
			ok, err = s.Release(ctx, k, []byte("v"))
			wantOK(t, "Release expired", ok, err, false)
			n, err := s.Append(ctx, k, []byte("e"), long)
			must(t, "Append over expired value", err)
			if n != 1 {
				t.Fatalf("Append over expired value: length %d, want 1", n)
			}
		}},
		{"log ttl expires", func(t *testing.T, s state.Store) {
			k := key(t, "log")
			_, err := s.Append(t.Context(), k, []byte("e"), short)
			must(t, "Append", err)
			eventually(t, "waiting for the log to expire", func(ctx context.Context) (bool, error) {
				got, err := s.Range(ctx, k, 0, -1)
				return len(got) == 0, err
			})
		}},
		{"append refreshes the log ttl", func(t *testing.T, s state.Store) {
			k := key(t, "log")
			_, err := s.Append(t.Context(), k, []byte("e0"), short)
			must(t, "Append", err)
			_, err = s.Append(t.Context(), k, []byte("e1"), long)
			must(t, "Append", err)
			outlive(t, s)
			wantLog(t, s, k, 0, -1, []string{"e0", "e1"})
		}},
		{"index ttl expires", func(t *testing.T, s state.Store) {
			k := key(t, "idx")
			must(t, "IndexAdd", s.IndexAdd(t.Context(), k, "m", 1, short))
			eventually(t, "waiting for the index to expire", func(ctx context.Context) (bool, error) {
				n, err := s.IndexCount(ctx, k)
				return n == 0, err
			})
			wantIndex(t, s, k, 0, 10, 0, 0, "")
		}},
		{"index add refreshes the index ttl", func(t *testing.T, s state.Store) {
			k := key(t, "idx")
			must(t, "IndexAdd", s.IndexAdd(t.Context(), k, "a", 1, short))
			must(t, "IndexAdd", s.IndexAdd(t.Context(), k, "b", 2, long))
			outlive(t, s)
			wantIndex(t, s, k, 0, 10, 0, 0, "a=1 b=2")
		}},
	}
}

package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/batonproxy/baton/state"
)

func valueCases() []testCase {
	return []testCase{
		{"claim absent key", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, cur, err := s.Claim(t.Context(), k, []byte("v1"), long)
			wantOK(t, "Claim", ok, err, true)
			if cur != nil {
				t.Fatalf("Claim ok returned cur %q, want nil", cur)
			}
			wantValue(t, s, k, []byte("v1"))
		}},
		{"claim conflict returns current", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("v1"), long)
			wantOK(t, "first Claim", ok, err, true)
			ok, cur, err := s.Claim(t.Context(), k, []byte("v2"), long)
			wantOK(t, "second Claim", ok, err, false)
			if !bytes.Equal(cur, []byte("v1")) {
				t.Fatalf("second Claim cur = %q, want v1", cur)
			}
			wantValue(t, s, k, []byte("v1"))
		}},
		{"claim over set value", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			must(t, "Set", s.Set(t.Context(), k, []byte("plain"), 0))
			ok, cur, err := s.Claim(t.Context(), k, []byte("v"), long)
			wantOK(t, "Claim", ok, err, false)
			if string(cur) != "plain" {
				t.Fatalf("Claim cur = %q, want plain", cur)
			}
		}},
		{"renew only by holder", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("holder"), long)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Renew(t.Context(), k, []byte("other"), long)
			wantOK(t, "Renew by other", ok, err, false)
			ok, err = s.Renew(t.Context(), k, []byte("holder"), long)
			wantOK(t, "Renew by holder", ok, err, true)
			ok, err = s.Renew(t.Context(), key(t, "absent"), []byte("holder"), long)
			wantOK(t, "Renew absent", ok, err, false)
			wantValue(t, s, k, []byte("holder"))
			wantAbsent(t, s, key(t, "absent"))
		}},
		{"touch reports and extends", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, err := s.Touch(t.Context(), k, long)
			wantOK(t, "Touch absent", ok, err, false)
			wantAbsent(t, s, k)
			must(t, "Set", s.Set(t.Context(), k, []byte("v"), 50*time.Millisecond))
			ok, err = s.Touch(t.Context(), k, long)
			wantOK(t, "Touch present", ok, err, true)
			time.Sleep(120 * time.Millisecond)
			wantValue(t, s, k, []byte("v")) // the short ttl was replaced by long
			ok, err = s.Touch(t.Context(), k, 0)
			wantOK(t, "Touch without expiry", ok, err, true)
			wantValue(t, s, k, []byte("v"))
		}},
		{"swap compare and set", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("v1"), long)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Swap(t.Context(), k, []byte("v1"), []byte("v2"), long)
			wantOK(t, "Swap v1->v2", ok, err, true)
			wantValue(t, s, k, []byte("v2"))
			ok, err = s.Swap(t.Context(), k, []byte("v1"), []byte("v3"), long)
			wantOK(t, "Swap stale v1->v3", ok, err, false)
			wantValue(t, s, k, []byte("v2"))
		}},
		{"swap absent key does not create it", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, err := s.Swap(t.Context(), k, []byte(""), []byte("v"), long)
			wantOK(t, "Swap", ok, err, false)
			wantAbsent(t, s, k)
		}},
		{"release only by holder", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte("holder"), long)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Release(t.Context(), k, []byte("other"))
			wantOK(t, "Release by other", ok, err, false)
			wantValue(t, s, k, []byte("holder"))
			ok, err = s.Release(t.Context(), k, []byte("holder"))
			wantOK(t, "Release by holder", ok, err, true)
			wantAbsent(t, s, k)
			ok, err = s.Release(t.Context(), k, []byte("holder"))
			wantOK(t, "Release again", ok, err, false)
			ok, _, err = s.Claim(t.Context(), k, []byte("next"), long)
			wantOK(t, "Claim after release", ok, err, true)
		}},
		{"get absent is ErrNotFound", func(t *testing.T, s state.Store) {
			wantAbsent(t, s, key(t, "never"))
		}},
		{"set overwrites", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			must(t, "Set a", s.Set(t.Context(), k, []byte("a"), long))
			must(t, "Set b", s.Set(t.Context(), k, []byte("b"), long))
			wantValue(t, s, k, []byte("b"))
		}},
		{"values are copies", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			in := []byte("original")
			must(t, "Set", s.Set(t.Context(), k, in, long))
			copy(in, "XXXXXXXX")
			got, err := s.Get(t.Context(), k)
			must(t, "Get", err)
			copy(got, "YYYYYYYY")
			wantValue(t, s, k, []byte("original"))
		}},
		{"delete", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			must(t, "Set", s.Set(t.Context(), k, []byte("v"), long))
			must(t, "Delete", s.Delete(t.Context(), k))
			wantAbsent(t, s, k)
			must(t, "Delete absent", s.Delete(t.Context(), k))
		}},
		{"binary values compare exactly", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			v1 := []byte{0, 1, 0xff, '\r', '\n', 0xc3, 0x28, 0}
			v2 := []byte{0, 1, 0xff, '\r', '\n', 0xc3, 0x28, 1}
			ok, _, err := s.Claim(t.Context(), k, v1, long)
			wantOK(t, "Claim", ok, err, true)
			ok, err = s.Swap(t.Context(), k, v2, []byte("x"), long)
			wantOK(t, "Swap with near-miss prev", ok, err, false)
			ok, err = s.Release(t.Context(), k, v1[:len(v1)-1])
			wantOK(t, "Release with prefix of value", ok, err, false)
			wantValue(t, s, k, v1)
			ok, err = s.Swap(t.Context(), k, v1, v2, long)
			wantOK(t, "Swap v1->v2", ok, err, true)
			wantValue(t, s, k, v2)
		}},
		{"empty value", func(t *testing.T, s state.Store) {
			k := key(t, "k")
			ok, _, err := s.Claim(t.Context(), k, []byte{}, long)
			wantOK(t, "Claim empty", ok, err, true)
			ok, cur, err := s.Claim(t.Context(), k, []byte("v"), long)
			wantOK(t, "second Claim", ok, err, false)
			if len(cur) != 0 {
				t.Fatalf("cur = %q, want empty", cur)
			}
			wantValue(t, s, k, []byte{})
			ok, err = s.Release(t.Context(), k, nil)
			wantOK(t, "Release empty", ok, err, true)
		}},
		{"wrong kind", func(t *testing.T, s state.Store) {
			ctx := t.Context()
			lk, ik, vk := key(t, "log"), key(t, "index"), key(t, "value")
			_, err := s.Append(ctx, lk, []byte("e"), long)
			must(t, "Append", err)
			must(t, "IndexAdd", s.IndexAdd(ctx, ik, "m", 1, long))
			must(t, "Set", s.Set(ctx, vk, []byte("v"), long))
			checks := []struct {
				name string
				err  error
			}{
				{"Get on log", second(s.Get(ctx, lk))},
				{"Claim on log", third(s.Claim(ctx, lk, []byte("v"), long))},
				{"Swap on index", second(s.Swap(ctx, ik, []byte("v"), []byte("w"), long))},
				{"Renew on index", second(s.Renew(ctx, ik, []byte("v"), long))},
				{"Release on log", second(s.Release(ctx, lk, []byte("v")))},
				{"Append on value", second(s.Append(ctx, vk, []byte("e"), long))},
				{"Append on index", second(s.Append(ctx, ik, []byte("e"), long))},
				{"Range on value", second(s.Range(ctx, vk, 0, -1))},
				{"IndexAdd on log", s.IndexAdd(ctx, lk, "m", 1, long)},
				{"IndexRange on value", second(s.IndexRange(ctx, vk, 0, 1, 0, 0))},
				{"IndexCount on log", second(s.IndexCount(ctx, lk))},
				{"IndexRemove on value", s.IndexRemove(ctx, vk, "m")},
			}
			for _, c := range checks {
				if !errors.Is(c.err, state.ErrWrongKind) {
					t.Errorf("%s: err = %v, want ErrWrongKind", c.name, c.err)
				}
			}
			wantValue(t, s, vk, []byte("v"))
			must(t, "Set over log", s.Set(ctx, lk, []byte("now a value"), long))
			wantValue(t, s, lk, []byte("now a value"))
			must(t, "Delete index", s.Delete(ctx, ik))
			n, err := s.IndexCount(ctx, ik)
			must(t, "IndexCount", err)
			if n != 0 {
				t.Fatalf("IndexCount after Delete = %d, want 0", n)
			}
		}},
		{"ping", func(t *testing.T, s state.Store) {
			must(t, "Ping", s.Ping(t.Context()))
		}},
	}
}

func second[A any](_ A, err error) error { return err }

func third[A, B any](_ A, _ B, err error) error { return err }

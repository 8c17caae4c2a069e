// Package storetest is the contract suite for state.Store. Every
// implementation runs it from its own tests:
//
//	func TestMemory(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) state.Store { return state.NewMemory(config.Memory{}) })
//	}
//
// The cases run in parallel and use keys prefixed with their test's name, so
// one store (or one Redis) may serve all of them. Cases that involve expiry
// use TTLs of about 100ms and wait for conditions with a deadline; none of
// them asserts how long anything took.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonproxy/baton/state"
)

// Timings shared by the cases. short is a TTL that a case waits out; long is
// one that must not lapse while a case runs; patience bounds every wait.
const (
	short    = 100 * time.Millisecond
	long     = time.Hour
	patience = 10 * time.Second
)

// testCase is one contract case; it gets a fresh store from newStore.
type testCase struct {
	name string
	run  func(t *testing.T, s state.Store)
}

// Run runs the contract suite. newStore returns a store for one case; Run
// closes it when the case ends, so it must not be shared unless its Close is
// harmless to repeat.
func Run(t *testing.T, newStore func(t *testing.T) state.Store) {
	t.Helper()
	var cases []testCase
	cases = append(cases, valueCases()...)
	cases = append(cases, collectionCases()...)
	cases = append(cases, expiryCases()...)
	cases = append(cases, concurrencyCases()...)
	cases = append(cases, chainCases()...)
	cases = append(cases, markCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.run(t, s)
		})
	}
}

// key makes a key unique to the running test.
func key(t *testing.T, name string) string { return t.Name() + "/" + name }

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantValue checks that Get returns want.
func wantValue(t *testing.T, s state.Store, k string, want []byte) {
	t.Helper()
	got, err := s.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get(%q): %v, want %q", k, err, want)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %q, want %q", k, got, want)
	}
}

// wantAbsent checks that Get returns ErrNotFound.
func wantAbsent(t *testing.T, s state.Store, k string) {
	t.Helper()
	got, err := s.Get(t.Context(), k)
	if !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", k, got, err)
	}
}

// wantOK checks the ok result of a conditional operation.
func wantOK(t *testing.T, what string, ok bool, err error, want bool) {
	t.Helper()
	must(t, what, err)
	if ok != want {
		t.Fatalf("%s: ok = %v, want %v", what, ok, want)
	}
}

// eventually polls cond until it holds or patience runs out.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx := t.Context()
	stop := time.Now().Add(patience)
	for {
		ok, err := cond(ctx)
		must(t, what, err)
		if ok {
			return
		}
		if time.Now().After(stop) {
			t.Fatalf("%s: still not true after %v", what, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expired waits until Get(k) reports ErrNotFound.
func expired(t *testing.T, s state.Store, k string) {
	t.Helper()
	eventually(t, "waiting for "+k+" to expire", func(ctx context.Context) (bool, error) {
		_, err := s.Get(ctx, k)
		if errors.Is(err, state.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
}

// outlive sets a control key with the short TTL and waits for it to expire,
// which proves that any short TTL set before the call has lapsed too.
func outlive(t *testing.T, s state.Store) {
	t.Helper()
	ctl := key(t, "control")
	must(t, "Set control", s.Set(t.Context(), ctl, []byte("c"), short))
	expired(t, s, ctl)
}

package chaos_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/bench/chaos"
)

// TestChaosShort is the short chaos run: three real Batons (built from
// this tree) on a throwaway redis-server, under load, through every fault
// in turn. Nothing may run twice, nothing may be lost, and every fault
// must have met the load. It fails, never skips, without redis-server.
func TestChaosShort(t *testing.T) {
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed (Debian: apt-get install redis-server; .ci/run installs it)")
	}
	bin := filepath.Join(t.TempDir(), "baton")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/baton")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building baton: %v\n%s", err, out)
	}
	// The Batons' logs outlive a failed run, for reading after it.
	dir, err := os.MkdirTemp("", "baton-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the Batons' logs are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r, err := chaos.Run(ctx, chaos.Options{Baton: bin, Redis: redis, Persist: true, Clients: 8, Interval: 25 * time.Millisecond,
		Warmup: 2 * time.Second, FaultFor: 2500 * time.Millisecond, Recover: 2500 * time.Millisecond, Faults: chaos.FaultNames,
		GiveUp: 10 * time.Second, Resume: time.Minute, Dir: dir, Out: &out})
	t.Log("\n" + out.String())
	if err != nil {
		for _, name := range []string{"baton-a.log", "baton-b.log", "baton-c.log"} {
			if b, rerr := os.ReadFile(filepath.Join(dir, name)); rerr == nil && len(b) > 4000 {
				t.Logf("%s (last 4000 bytes):\n%s", name, b[len(b)-4000:])
			}
		}
		t.Fatal(err)
	}
	if r.Placed < 100 || r.Final != r.Placed || r.Duplicates != 0 || r.Lost != 0 {
		t.Fatalf("placed %d, completed in the end %d, duplicates %d, lost %d", r.Placed, r.Final, r.Duplicates, r.Lost)
	}
	if len(r.Faults) != len(chaos.FaultNames) {
		t.Fatalf("%d faults reported, want %d", len(r.Faults), len(chaos.FaultNames))
	}
	for _, f := range r.Faults {
		// A fault that holds what it catches may meet only the orders in
		// flight when it began: none started during it, some open at its end.
		if f.During.Requests == 0 && f.OpenAtHeal == 0 {
			t.Errorf("fault %s: no request during it and no order open at its end: the load did not meet it", f.Fault)
		}
		if f.After.OK == 0 {
			t.Errorf("fault %s: %d requests in the recovery after it, none completed: the chain did not come back within it",
				f.Fault, f.After.Requests)
		}
	}
	if r.Stray.Sent == 0 || r.Stray.Refused == 0 || r.Stray.Delivered != 0 {
		t.Errorf("stray-port calls %+v: want some sent and refused, none delivered", r.Stray)
	}
	if r.DeadLettered == 0 || r.Resumed == 0 {
		t.Errorf("no order was dead-lettered and resumed: the faults broke nothing")
	}
}

package chaos

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procState is the state letter of pid in /proc ("T" stopped, "S"
// sleeping), or "" once the process is gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	rest := s[strings.LastIndexByte(s, ')')+1:]
	if f := strings.Fields(rest); len(f) > 0 {
		return f[0]
	}
	return ""
}

// waitState waits until pid's state is one of want.
func waitState(t *testing.T, pid int, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := procState(pid)
		for _, w := range want {
			if got == w {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is in state %q, want one of %q", pid, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPausedProcessIsContinued: whatever ends a pause, the process is
// continued, never left stopped (baton-stop).
func TestPausedProcessIsContinued(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		end  func(p *process)
		want []string // the process's state after end: "" gone, "Z" not yet reaped
	}{
		{"resumed", func(p *process) { p.resume() }, []string{"S", "R"}},
		{"stopped while paused", func(p *process) { p.stop() }, []string{"", "Z"}},
		{"sent SIGTERM while paused", func(p *process) { p.signal(syscall.SIGTERM, 5*time.Second) }, []string{"", "Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := newProcess(t.TempDir(), "sleep", sleep, "60")
			if err != nil {
				t.Fatal(err)
			}
			if err := p.start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.stop)
			pid := p.cmd.Process.Pid
			p.pause()
			waitState(t, pid, "T", "t")
			tt.end(p)
			waitState(t, pid, tt.want...)
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.paused {
				t.Error("the process is still marked paused")
			}
		})
	}
}

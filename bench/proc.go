package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a child has to exit after SIGTERM before SIGKILL.
const stopGrace = 3 * time.Second

// supervisor starts the harness's child processes and guarantees that every
// one of them is stopped: each child leads its own process group (so that
// nginx's workers go with their master) and is sent SIGKILL by the kernel
// if the harness itself dies (Pdeathsig).
type supervisor struct {
	dir    string
	stderr io.Writer

	mu    sync.Mutex
	procs []*child
}

func newSupervisor(dir string, stderr io.Writer) *supervisor {
	return &supervisor{dir: dir, stderr: stderr}
}

// child is one started process.
type child struct {
	name    string
	cmd     *exec.Cmd
	started time.Time // just before fork
	logPath string
	done    chan struct{}
	err     error // from Wait, valid after done
}

// start runs path with args, its output going to <dir>/<name>.log.
func (s *supervisor) start(name, path string, args ...string) (*child, error) {
	logPath := filepath.Join(s.dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: creating log: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: starting %s: %w", name, path, err)
	}
	s.procs = append(s.procs, c)
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	return c, nil
}

// pid returns the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the child has exited, and how.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the child's process group, then SIGKILL after
// stopGrace, and waits (bounded) for it to be reaped.
func (c *child) stop() {
	if ok, _ := c.exited(); ok {
		return
	}
	pgid := c.pid()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-c.done:
		case <-time.After(stopGrace):
		}
	}
	// Anything left in the group (an nginx worker whose master went first).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// stopAll stops every child still running, newest first.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop()
	}
}

// logTail returns the last lines of the child's output, for error messages.
func (c *child) logTail(lines int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// exitError describes an exited child with the tail of its log.
func (c *child) exitError() error {
	_, werr := c.exited()
	tail := c.logTail(15)
	if tail != "" {
		tail = "; last output:\n" + indent(tail, "    ")
	}
	return fmt.Errorf("%s exited (%v)%s", c.name, werr, tail)
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// freeAddr returns a loopback address with a port that was free a moment
// ago. The child that is handed it binds it immediately after.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// freeAddrs returns n distinct free loopback addresses.
func freeAddrs(n int) ([]string, error) {
	// Hold all listeners open together so that the ports differ.
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// errNotYet is returned by a poll check that should be retried.
var errNotYet = errors.New("not yet")

// poll calls check every interval until it returns nil, a non-errNotYet
// error, the child exits, or timeout passes. It returns when check succeeded.
func poll(ctx context.Context, c *child, interval, timeout time.Duration, what string, check func() error) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		err := check()
		if err == nil {
			return time.Now(), nil
		}
		if !errors.Is(err, errNotYet) {
			return time.Time{}, err
		}
		last = err
		if c != nil {
			if ok, _ := c.exited(); ok {
				return time.Time{}, c.exitError()
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s: not ready after %s (%v)", what, timeout, last)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// pidString renders pids for notes.
func pidString(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

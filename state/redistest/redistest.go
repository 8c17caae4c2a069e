// Package redistest gives tests a real Redis: a throwaway redis-server on a
// free loopback port (Start, StartCluster), or the machine's own Redis when
// one answers on 127.0.0.1:6379 (Shared).
//
// When redis-server is missing, tests skip with a message saying to install
// it, except in CI (CI=true), where a missing Redis fails the test: CI must
// never pass by skipping the Redis half of the contract suite.
package redistest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// sharedAddr is where Shared looks for the machine's Redis.
const sharedAddr = "127.0.0.1:6379"

// readyWithin bounds how long a starting redis-server may take to answer.
const readyWithin = 10 * time.Second

// Server is a redis-server process owned by one test.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string

	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs a redis-server without persistence on a free loopback port,
// waits until it answers PING, and kills it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t)
}

// StartDurable is Start with every write appended to disk before it is
// answered (appendonly, appendfsync always), as a production Redis that
// keeps a Baton's windows is run: Kill then Restart loses nothing it
// answered.
func StartDurable(t testing.TB) *Server {
	t.Helper()
	return start(t, "--appendonly", "yes", "--appendfsync", "always")
}

// StartCluster is Start with cluster mode on: a one-node Redis Cluster that
// owns every slot, so that cluster clients, hash slots and CROSSSLOT checks
// can be tested without six processes. The cluster is ready (cluster_state
// ok) when it returns, and stays so across Kill and Restart.
func StartCluster(t testing.TB) *Server {
	t.Helper()
	s := start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	if _, err := command(s.Addr, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		t.Fatalf("redistest: assigning cluster slots: %v", err)
	}
	s.waitClusterOK(t)
	return s
}

// Shared returns the URL of the machine's Redis on 127.0.0.1:6379 when it
// answers PING without a password and is version 7 or later, and otherwise
// of a fresh server from Start. Tests sharing it must prefix their keys.
func Shared(t testing.TB) string {
	t.Helper()
	if err := ping(sharedAddr, 500*time.Millisecond); err == nil {
		if v, err := version(sharedAddr); err == nil && v >= 7 {
			return "redis://" + sharedAddr
		}
		t.Logf("redistest: the Redis on %s is older than 7.0; starting a private redis-server", sharedAddr)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing(t, "no Redis >= 7.0 answers on "+sharedAddr+" and redis-server is not on PATH")
	}
	return Start(t).URL()
}

// URL returns the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Kill kills the server with SIGKILL and waits for it to exit. Killing a
// server that is not running does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart starts the server again on the same port and waits until it
// answers PING. Without persistence it comes back empty (a cluster node
// keeps its slots, which live in nodes.conf).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := s.run(); err != nil {
		t.Fatalf("redistest: restarting redis-server on %s: %v", s.Addr, err)
	}
}

func start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := serverBinary(t)
	dir := t.TempDir()
	var last error
	// A free port can be taken between our probe and redis-server's bind;
	// a few fresh ports make that race harmless.
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: finding a free port: %v", err)
		}
		args := append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
		}, extra...)
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bin: bin, args: args}
		if last = s.run(); last == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("redistest: starting redis-server: %v", last)
	return nil
}

// serverBinary finds redis-server, or ends the test: Fatal in CI, Skip
// elsewhere.
func serverBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server is not on PATH")
	}
	return bin
}

// missing ends a test that has no Redis to use: Fatal in CI, Skip elsewhere.
func missing(t testing.TB, why string) {
	t.Helper()
	msg := "redistest: " + why + "; install redis-server (>= 7.0) to run the Redis tests"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: a missing Redis is a failure, not a skip)")
	}
	t.Skip(msg)
}

// run starts the process and waits until it answers PING or exits.
func (s *Server) run() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &syncBuffer{}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(readyWithin)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited before answering: %s", bytes.TrimSpace(out.Bytes()))
		default:
		}
		if ping(s.Addr, 200*time.Millisecond) == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server did not answer PING within %v: %s", readyWithin, bytes.TrimSpace(out.Bytes()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Server) waitClusterOK(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(readyWithin)
	for {
		info, err := command(s.Addr, "CLUSTER", "INFO")
		if err == nil && bytes.Contains([]byte(info), []byte("cluster_state:ok")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster on %s not ok within %v: %q, %v", s.Addr, readyWithin, info, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freePort finds a free port below the kernel's ephemeral range (which
// starts at 32768 by default): a killed server is restarted on its port, and
// a port from the ephemeral range may meanwhile have become the local port of
// some client connection, which would make the restart fail to bind.
func freePort() (int, error) {
	var last error
	for range 50 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, last
}

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written so far.
func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

package intercept_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests in this file run Baton for real in network namespaces they
// make (ip netns add, veth pairs), with the rules `baton iptables`
// installs. They need root, ip and iptables; without them they skip, or
// fail when CI=true.

// bin is the baton binary need builds on first use, in a directory every
// UID can read (Baton runs as UID 1337). It is built only by a process that
// runs a test needing it: not for the other tests, -test.list, or the
// workers of a fuzz target, each a process of its own.
var (
	binOnce     sync.Once
	bin, binDir string
	binErr      error
)

func buildBin() error {
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "baton-intercept-")
		if binErr == nil {
			binErr = os.Chmod(binDir, 0o755)
		}
		if binErr != nil {
			return
		}
		bin = filepath.Join(binDir, "baton")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/batonproxy/baton/cmd/baton")
		if out, e := cmd.CombinedOutput(); e != nil {
			binErr = fmt.Errorf("go build ./cmd/baton: %v\n%s", e, out)
		}
	})
	return binErr
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// need fails (CI=true) or skips the test unless it can make namespaces and
// program iptables.
func need(t testing.TB, tools ...string) {
	t.Helper()
	miss := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		miss("network namespace tests need root (they run ip netns and iptables)")
	}
	for _, tool := range append([]string{"ip", "iptables", "iptables-save", "iptables-restore"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			miss("%s is not installed (apt-get install iptables iproute2)", tool)
		}
	}
	if err := buildBin(); err != nil {
		t.Fatal(err)
	}
}

// netns is a network namespace made for one test and deleted after it.
type netns struct {
	name string
	fd   *os.File
}

var nsCount struct {
	sync.Mutex
	n int
}

func newNetns(t testing.TB, role string) *netns {
	t.Helper()
	nsCount.Lock()
	nsCount.n++
	n := nsCount.n
	nsCount.Unlock()
	name := fmt.Sprintf("baton-%d-%d-%s-%s", os.Getpid(), n, randHex(3), role)
	sh(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v %s", name, err, out)
		}
	})
	f, err := os.Open("/var/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ns := &netns{name: name, fd: f}
	ns.sh(t, "ip", "link", "set", "lo", "up")
	return ns
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// sh runs a command in the test's own namespace and returns its stdout.
func sh(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := run(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// sh runs a command inside the namespace, as root.
func (ns *netns) sh(t testing.TB, args ...string) string {
	t.Helper()
	return sh(t, "ip", append([]string{"netns", "exec", ns.name}, args...)...)
}

func (ns *netns) run(args ...string) (string, error) {
	return run("ip", append([]string{"netns", "exec", ns.name}, args...)...)
}

// do runs fn on an OS thread that has entered the namespace: sockets it
// makes and processes it starts belong to the namespace.
func (ns *netns) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.fd.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns.name, err)
			return // the thread stays locked and ends with the goroutine
		}
		errc <- fn()
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}

func (ns *netns) listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := ns.do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func (ns *netns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.do(func() (err error) {
		c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// client is a plain HTTP client, with no proxy settings, whose
// connections are made inside the namespace by the test process (UID 0).
func (ns *netns) client() *http.Client {
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		Proxy: nil, DialContext: ns.dial, MaxIdleConnsPerHost: 16,
	}}
}

// veth links two namespaces with the addresses given (IPv4/24 and IPv6/64
// on each side).
func veth(t testing.TB, a, b *netns, a4, b4, a6, b6 string) {
	t.Helper()
	ifa, ifb := "bt"+randHex(4), "bt"+randHex(4)
	sh(t, "ip", "link", "add", ifa, "netns", a.name, "type", "veth", "peer", "name", ifb, "netns", b.name)
	for _, s := range []struct {
		ns     *netns
		dev    string
		v4, v6 string
	}{{a, ifa, a4, a6}, {b, ifb, b4, b6}} {
		s.ns.sh(t, "ip", "addr", "add", s.v4+"/24", "dev", s.dev)
		s.ns.sh(t, "ip", "-6", "addr", "add", s.v6+"/64", "dev", s.dev, "nodad")
		s.ns.sh(t, "ip", "link", "set", s.dev, "up")
	}
}

// logBuffer collects a child's output.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startBaton runs `baton serve` in the namespace as UID and GID uid, with
// the configuration given, and waits until its admin listener answers.
func (ns *netns) startBaton(t testing.TB, uid int, yaml string) *logBuffer {
	t.Helper()
	conf := writeConf(t, yaml)
	logs := &logBuffer{}
	cmd := exec.Command(bin, "serve", "--config", conf)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "OTEL_TRACES_EXPORTER=none", "BATON_LOG_LEVEL=debug"}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if err := ns.do(cmd.Start); err != nil {
		t.Fatalf("starting baton in %s: %v", ns.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("baton in %s:\n%s", ns.name, logs.String())
		}
	})
	c := ns.client()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get("http://127.0.0.1:15000/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return logs
			}
		}
		select {
		case <-done:
			t.Fatalf("baton in %s exited:\n%s", ns.name, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("baton in %s not ready: %v\n%s", ns.name, err, logs.String())
		}
	}
}

// baton runs `baton ARGS...` in the namespace as root.
func (ns *netns) baton(args ...string) (string, error) {
	return ns.run(append([]string{bin}, args...)...)
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// saved is the namespace's rules as a save command lists them, without
// its comment lines and counters, so that two listings compare equal when
// the rules are.
func (ns *netns) saved(t testing.TB, save string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(ns.sh(t, save), "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		b.WriteString(counters.ReplaceAllString(line, "[0:0]") + "\n")
	}
	return b.String()
}

func isExit(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

// readAll reads a response body and closes it.
func readAll(t testing.TB, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeConf writes yaml to a baton.yaml that a Baton running as another UID
// can read (t.TempDir's parent is closed to it), removed at cleanup.
func writeConf(t testing.TB, yaml string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "baton-conf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	conf := filepath.Join(dir, "baton.yaml")
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

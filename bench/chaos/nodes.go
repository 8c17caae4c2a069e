package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// freePort returns a loopback port nothing listens on (bound and closed:
// another process could take it meanwhile, which startup then reports).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// process is a child process the harness starts, kills and starts again
// with the same arguments.
type process struct {
	name string
	bin  string
	args []string
	log  *os.File

	mu     sync.Mutex
	cmd    *exec.Cmd
	paused bool // stopped with SIGSTOP: continue it before leaving it
}

func newProcess(dir, name, bin string, args ...string) (*process, error) {
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	return &process{name: name, bin: bin, args: args, log: f}, nil
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: starting %s: %w", p.name, err)
	}
	p.cmd, p.paused = cmd, false
	go func() { _ = cmd.Wait() }()
	return nil
}

// pause stops the process with SIGSTOP: its sockets stay open and it
// answers nothing until resume. Should the harness die meanwhile, the
// SIGKILL of Pdeathsig ends a stopped process too.
func (p *process) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.paused = true // before the signal: a resume must follow even if it failed
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
}

// resume continues the process after pause (SIGCONT). Every way out of a
// paused process goes through here, so that none is left stopped.
func (p *process) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused || p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	p.paused = false
}

// signal sends sig and waits up to wait for the process to end. A paused
// process is continued, or it would act on no signal but SIGKILL.
func (p *process) signal(sig syscall.Signal, wait time.Duration) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	p.resume()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
}

func (p *process) stop() {
	p.signal(syscall.SIGKILL, 5*time.Second)
	p.log.Close()
}

// redis is a throwaway redis-server on a port of its own.
type redis struct {
	*process
	port int
}

func startRedis(dir, bin string, persist bool, name string, extra ...string) (*redis, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, name)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", data, "--save", "",
		"--protected-mode", "no"}, extra...)
	if persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	p, err := newProcess(dir, name, bin, args...)
	if err != nil {
		return nil, err
	}
	r := &redis{process: p, port: port}
	if err := r.restart(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *redis) url() string { return "redis://127.0.0.1:" + strconv.Itoa(r.port) + "/0" }

func (r *redis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// restart starts redis-server and waits until it answers PING.
func (r *redis) restart() error {
	if err := r.start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.port), 200*time.Millisecond); err == nil {
			_, _ = io.WriteString(c, "PING\r\n")
			buf := make([]byte, 16)
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			c.Close()
			if string(buf[:n]) == "+PONG\r\n" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("chaos: redis-server on port %d did not answer (see %s)", r.port, r.log.Name())
}

// batonNode is one Baton, a child process on fixed ports, so that it comes
// back where its peers expect it.
type batonNode struct {
	*process
	agent                  string
	egress, ingress, admin string
}

func startBaton(dir, bin, agent, yaml string) (*batonNode, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	n := &batonNode{agent: agent}
	n.egress = "127.0.0.1:" + strconv.Itoa(ports[0])
	n.ingress = "127.0.0.1:" + strconv.Itoa(ports[1])
	n.admin = "127.0.0.1:" + strconv.Itoa(ports[2])
	cfg := filepath.Join(dir, agent+".yaml")
	full := "agent: " + agent + "\nlisten: {egress: " + n.egress + ", ingress: " + n.ingress + ", admin: " + n.admin + "}\n" + yaml
	if err := os.WriteFile(cfg, []byte(full), 0o644); err != nil {
		return nil, err
	}
	p, err := newProcess(dir, "baton-"+agent, bin, "serve", "--config", cfg)
	if err != nil {
		return nil, err
	}
	n.process = p
	return n, n.restart()
}

// restart starts the Baton and waits until its admin listener is up.
func (n *batonNode) restart() error {
	if err := n.start(); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	c := &http.Client{Timeout: 500 * time.Millisecond}
	for time.Now().Before(deadline) {
		if resp, err := c.Get("http://" + n.admin + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("chaos: %s's Baton did not start (see %s)", n.agent, n.log.Name())
}

// link is a TCP proxy between two Batons: it passes connections through,
// or cuts them (closing every open one and refusing new ones), or holds
// each new connection's bytes until it is healed.
type link struct {
	l      net.Listener
	to     string
	mu     sync.Mutex
	cut    bool
	delay  time.Duration // the longest a new connection is held; 0: none
	held   chan struct{} // closed when the hold ends
	conns  map[net.Conn]struct{}
	closed bool
}

func startLink(to string) (*link, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k := &link{l: l, to: to, conns: map[net.Conn]struct{}{}}
	go k.serve()
	return k, nil
}

func (k *link) addr() string { return k.l.Addr().String() }

func (k *link) serve() {
	for {
		c, err := k.l.Accept()
		if err != nil {
			return
		}
		go k.pass(c)
	}
}

func (k *link) pass(c net.Conn) {
	k.mu.Lock()
	cut, delay, held := k.cut, k.delay, k.held
	if !cut {
		k.conns[c] = struct{}{}
	}
	k.mu.Unlock()
	if cut {
		c.Close()
		return
	}
	defer k.forget(c)
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-held:
		}
		t.Stop()
	}
	up, err := net.DialTimeout("tcp", k.to, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	k.mu.Lock()
	k.conns[up] = struct{}{}
	k.mu.Unlock()
	defer k.forget(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (k *link) forget(c net.Conn) {
	c.Close()
	k.mu.Lock()
	delete(k.conns, c)
	k.mu.Unlock()
}

// stall holds every new connection for up to d, until stall(0) lets them
// go on; it drops the open ones, kept-alive connections too, so that every
// try meets the hold.
func (k *link) stall(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held != nil {
		close(k.held)
		k.held = nil
	}
	k.delay = d
	if d == 0 {
		return
	}
	k.held = make(chan struct{})
	for c := range k.conns {
		c.Close()
	}
}

// partition cuts the link (true) or heals it.
func (k *link) partition(on bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut = on
	if on {
		for c := range k.conns {
			c.Close()
		}
	}
}

func (k *link) close() {
	k.partition(true)
	k.l.Close()
}

// waitReady polls url until it answers 200 or ctx ends.
func waitReady(ctx context.Context, url string) {
	c := &http.Client{Timeout: 500 * time.Millisecond}
	for ctx.Err() == nil {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

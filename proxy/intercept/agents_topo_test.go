package intercept_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The agents' topology, for agents_netns_test.go: two namespaces joined by
// a veth pair.
//
//	"agent" (B's pod, `baton iptables` applied):
//	    B's Baton (UID 1337, transparent; admin :15000, egress :15001, ingress :15006)
//	    B's Node agent (root) on :8080
//	"peer" (everything else, no interception):
//	    redis-server :6390, the model server :9000,
//	    C's Node agent :8081 and its Baton (ingress :15106, egress :15101, admin :15100),
//	    D's Node agent :8082 and its Baton (ingress :15206, egress :15201, admin :15200),
//	    A's Baton (egress :15301, ingress :15306, admin :15300); A's agent is the test.
//
// The ports are fixed inside the namespaces, which the test makes and no
// one else uses.
const (
	agentsAgentIP4, agentsPeerIP4 = "198.18.78.1", "198.18.78.2"
	agentsAgentIP6, agentsPeerIP6 = "2001:db8:78::1", "2001:db8:78::2"

	agentsRedisPort = "6390"
	agentsModelPort = "9000"
	agentsBPort     = "8080"
	agentsCPort     = "8081"
	agentsDPort     = "8082"

	agentsDir = "testdata/agents-js"
)

// agentsTopo is what the runs share: the namespaces, the Redis and the model.
type agentsTopo struct {
	agent, peer *netns
	node        string // the node binary
	dir         string // testdata/agents-js, absolute
	model       *modelServer
}

// installAgents installs the agents' pinned packages when node_modules is
// missing (.ci/run installs them first; elsewhere the test does).
func installAgents(t testing.TB) {
	t.Helper()
	for _, pkg := range []string{"@a2a-js/sdk", "@openai/agents", "@opentelemetry/auto-instrumentations-node", "express"} {
		if _, err := os.Stat(filepath.Join(agentsDir, "node_modules", pkg, "package.json")); err == nil {
			continue
		}
		start := time.Now()
		install := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		install.Dir = agentsDir
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in proxy/intercept/%s: %v\n%s", agentsDir, err, out)
		}
		t.Logf("npm ci in %s took %v", agentsDir, time.Since(start).Round(time.Millisecond))
		return
	}
}

func startAgentsTopo(t *testing.T) *agentsTopo {
	t.Helper()
	need(t, "node", "npm", "redis-server")
	installAgents(t)
	node, _ := exec.LookPath("node")
	dir, err := filepath.Abs(agentsDir)
	if err != nil {
		t.Fatal(err)
	}
	tp := &agentsTopo{agent: newNetns(t, "agent"), peer: newNetns(t, "peer"), node: node, dir: dir, model: newModelServer()}
	veth(t, tp.agent, tp.peer, agentsAgentIP4, agentsPeerIP4, agentsAgentIP6, agentsPeerIP6)
	if out, err := tp.agent.baton("iptables"); err != nil {
		t.Fatalf("baton iptables in %s: %v\n%s", tp.agent.name, err, out)
	}
	tp.startRedis(t)
	srv := &http.Server{Handler: tp.model, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(tp.peer.listen(t, "0.0.0.0:"+agentsModelPort))
	t.Cleanup(func() { srv.Close() })
	return tp
}

// startRedis runs a throwaway redis-server in the peer namespace, reached
// by every Baton (B's across the veth), and stops it at cleanup.
func (tp *agentsTopo) startRedis(t *testing.T) {
	t.Helper()
	cmd := exec.Command("redis-server", "--port", agentsRedisPort, "--bind", "0.0.0.0", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	_, logs := tp.startProcess(t, tp.peer, cmd, "redis-server", syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := tp.peer.dial(context.Background(), "tcp", "127.0.0.1:"+agentsRedisPort)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			io.WriteString(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server in %s does not answer: %v\n%s", tp.peer.name, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startProcess starts cmd in the namespace and stops it at cleanup (stop,
// then SIGKILL after 10s), showing the end of its output if the test
// failed.
func (tp *agentsTopo) startProcess(t *testing.T, ns *netns, cmd *exec.Cmd, name string, stop os.Signal) (<-chan struct{}, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := ns.do(cmd.Start); err != nil {
		t.Fatalf("starting %s in %s: %v", name, ns.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(stop)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("the end of %s's output:\n%s", name, tail(logs.String(), 40))
		}
	})
	return done, logs
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines before]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// nodeAgent is one of the Node agents, started for one run.
type nodeAgent struct {
	name string
	ns   *netns
	port string
}

// counts is what an agent's GET /count says.
type counts struct {
	Runs      int                   `json:"runs"`
	Completed int                   `json:"completed"`
	Failed    int                   `json:"failed"`
	ByText    map[string]textCounts `json:"byText"`
}

type textCounts struct {
	Runs      int `json:"runs"`
	Completed int `json:"completed"`
}

// startAgent runs node script in the namespace with env (and PATH), and
// waits until it answers GET /count.
func (tp *agentsTopo) startAgent(t *testing.T, ns *netns, name, port string, argv []string, env ...string) *nodeAgent {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = tp.dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "PORT=" + port}, env...)
	// SIGINT: the OpenTelemetry register module handles SIGTERM (to flush)
	// and leaves the process running, for its orchestrator to kill.
	done, logs := tp.startProcess(t, ns, cmd, "agent "+name, syscall.SIGINT)
	a := &nodeAgent{name: name, ns: ns, port: port}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := a.counts(); err == nil {
			return a
		}
		select {
		case <-done:
			t.Fatalf("agent %s exited:\n%s", name, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s does not answer GET /count:\n%s", name, logs.String())
		}
	}
}

// counts reads the agent's GET /count, over loopback in its namespace
// (loopback is never redirected).
func (a *nodeAgent) counts() (counts, error) {
	var c counts
	resp, err := a.ns.client().Get("http://127.0.0.1:" + a.port + "/count")
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return c, fmt.Errorf("GET /count: %s", resp.Status)
	}
	return c, json.NewDecoder(resp.Body).Decode(&c)
}

func (a *nodeAgent) mustCounts(t testing.TB) counts {
	t.Helper()
	c, err := a.counts()
	if err != nil {
		t.Fatalf("agent %s: %v", a.name, err)
	}
	return c
}

// startBatonAt runs `baton serve` in the namespace as uid with the
// configuration given, and waits until its admin listener (admin) is ready.
// It is netns.startBaton for a Baton whose admin port is not 15000: several
// share the peer namespace. env adds to, or replaces, its environment.
func (tp *agentsTopo) startBatonAt(t *testing.T, ns *netns, name, admin, yaml string, env ...string) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", writeConf(t, yaml))
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "OTEL_TRACES_EXPORTER=none", "BATON_LOG_LEVEL=debug"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: batonUID, Gid: batonUID}}
	done, logs := tp.startProcess(t, ns, cmd, name+"'s Baton", syscall.SIGTERM)
	c := ns.client()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-done:
			t.Fatalf("%s's Baton exited:\n%s", name, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's Baton not ready: %v\n%s", name, err, logs.String())
		}
	}
}

// getJSON GETs url with the client and decodes a 200 answer into v.
func getJSON(c *http.Client, url string, v any) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, v)
}

// hostPort joins an IPv4 address and a port.
func hostPort(ip, port string) string { return net.JoinHostPort(ip, port) }

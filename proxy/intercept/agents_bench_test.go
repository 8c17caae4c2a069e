package intercept_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkNodeAgentZeroCode is the CPU a Node A2A agent
// (testdata/agents-js/leaf.mjs: the A2A JS SDK on express) spends per
// message, run as written and with zero-code OpenTelemetry loaded by
// environment only (otelEnv: propagation on, nothing exported), each
// message carrying traceparent and baggage as a Baton delivers it. The
// agent's CPU is read from /proc: cpu-µs/op is the agent's, not the
// benchmark's.
func BenchmarkNodeAgentZeroCode(b *testing.B) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("needs node")
	}
	installAgents(b)
	for _, mode := range []struct {
		name string
		env  []string
	}{{"as-written", nil}, {"zero-code", otelEnv}} {
		b.Run(mode.name, func(b *testing.B) {
			pid, url := startLeaf(b, node, mode.env)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			send := func(i int) {
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": map[string]any{
					"message": map[string]any{"messageId": "m-" + strconv.Itoa(i), "role": "ROLE_USER", "metadata": map[string]any{},
						"parts": []map[string]any{{"text": "book table " + strconv.Itoa(i), "mediaType": "text/plain"}}},
					"configuration": map[string]any{}, "metadata": map[string]any{}}})
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("A2A-Version", "1.0")
				req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-"+randHex(8)+"-01")
				req.Header.Set("Baggage", "baton.handling=4bf92f3577b34da6a3ce929d0e0e4736."+randHex(8))
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var out bytes.Buffer
				out.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(out.String(), "c did: book table") {
					b.Fatalf("message %d: %d %s", i, resp.StatusCode, out.String())
				}
			}
			for i := range 300 { // the JIT warms up
				send(-i - 1)
			}
			before := procCPU(b, pid)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				send(i)
			}
			b.StopTimer()
			b.ReportMetric(float64((procCPU(b, pid)-before).Microseconds())/float64(b.N), "agent-cpu-µs/op")
		})
	}
}

// startLeaf runs leaf.mjs on a free loopback port with env added, and
// returns its pid and its URL once it answers.
func startLeaf(b *testing.B, node string, env []string) (int, string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "leaf.mjs")
	cmd.Dir = agentsDir
	cmd.Env = append(append(os.Environ(), "PORT="+port, "AGENT_NAME=c", "PUBLIC_URL=http://127.0.0.1:"+port+"/"), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); cmd.Wait() })
	url := "http://127.0.0.1:" + port + "/"
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "count")
		if err == nil {
			resp.Body.Close()
			return cmd.Process.Pid, url
		}
		if time.Now().After(deadline) {
			b.Fatalf("leaf.mjs did not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procCPU is a process's CPU time so far, user and system, from
// /proc/<pid>/stat (in clock ticks of 10ms).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name may hold spaces: the fields after its ')' count from 3.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

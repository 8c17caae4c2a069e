package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for baton itself, so that signal
// handling and exit codes are tested on a real process.
func TestMain(m *testing.M) {
	if os.Getenv("BATON_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"baton"}, strings.Fields(os.Getenv("BATON_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func noEnv(string) string { return "" }

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommands(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "agent: analyst\nupstream: http://127.0.0.1:9001\npeers: {summarizer: {url: http://127.0.0.1:16006}}\nedges: [{to: summarizer}]\n")
	bad := writeFile(t, "agent: Analyst\nupstream: ftp://x\nedges: [{to: nobody, max_hops: 0}]\n")
	unknown := writeFile(t, "agent: a\nupstream: http://127.0.0.1:1\nlisten: {egres: 1}\n")
	tests := []struct {
		name     string
		args     []string
		wantErr  string // substring of the error; "" for success
		wantCode int
		wantOut  []string
	}{
		{name: "help", args: []string{"--help"}, wantOut: []string{"serve --config FILE", "validate --config FILE", "demo", "version"}},
		{name: "version", args: []string{"version"}, wantOut: []string{"baton dev"}},
		{name: "no command", args: nil, wantErr: "no command", wantCode: 2},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate"`, wantCode: 2},
		{name: "validate good", args: []string{"validate", "--config", good}, wantOut: []string{good + ": ok"}},
		{name: "validate needs a file", args: []string{"validate"}, wantErr: "--config FILE is required", wantCode: 2},
		{name: "validate missing file", args: []string{"validate", "--config", "/nonexistent.yaml"}, wantErr: "no such file", wantCode: 1},
		{name: "validate reports every problem", args: []string{"validate", "--config", bad}, wantCode: 1,
			wantErr: "agent: must be"},
		{name: "validate unknown key", args: []string{"validate", "--config", unknown}, wantCode: 1, wantErr: "egres"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut, noEnv)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				if code := exitCode(err); code != tc.wantCode {
					t.Errorf("exit code %d, want %d", code, tc.wantCode)
				}
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestValidateListsAllProblems(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, "agent: Analyst\nupstream: ftp://x\nedges: [{to: nobody, max_hops: 0}]\n")
	err := run(context.Background(), []string{"validate", "--config", bad}, io.Discard, io.Discard, noEnv)
	if err == nil {
		t.Fatal("a bad file validated")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, want := range []string{"agent:", "upstream:", "edges[0].to:", "edges[0].max_hops:"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("no line starting %q in:\n%s", want, err)
		}
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"demo"}, &out, io.Discard, noEnv); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"Baton-Agent:     analyst", "Baton-Hop:       1", "4bf92f3577b34da6a3ce929d0e0e4736",
		"flagger's Baton ran it 1 time(s), retried nothing", "502, Baton-Dead-Letter: 4bf92f3577b34da6a3ce929d0e0e4736.",
		"Idempotency-Key: \"bk-", "Idempotent-Replayed: true", "delivered 200, writer drafted",
		"202 {\"flagged\":2", "ledger booked 1 time(s), writer drafted 1 time(s), flagger ran 2 time(s), analyst 1",
		"↳ stopped at [", "key: position 1", "(the position's first request had another body)",
		"(delivered with status 200 on replay)", "hash chain intact",
		"Baton-Contract:  violations=0; completeness=1.00", "422 the handoff envelope breaks its contract",
		"/open_questions", "side_effects [read] (narrowed, never widened)", "401 the edge from \"analyst\" requires a signature",
		"draft ready", "403",
		"answered from its Baton's journal (Baton-Journal-Replayed: true)", "the model was called 1 time(s) in all",
		"journal: 1 hit(s) (saved ", "450 tokens), 0 miss(es)",
		`untrusted=("/artifacts/0/content";src="http://`, `artifact trust "untrusted", source "http://`,
		"content «untrusted»Note:ˆvendor-17ˆRESTATED", "Baton-Injection: score=",
		"1     hotel→billing    charge   undone  hotel", "2     concierge→hotel  booking  undone  concierge",
		`1. charge undone: {"refund": "ch-311", "amount": 420}`, `2. booking undone: {"cancel": "rm-204"}`,
		"stored once, read once", "left out, as its envelope says: /rejected_paths/0/why, /completed/0/evidence, /artifacts/0/content",
		"flagger          2 call(s), 412 in + 38 out tokens, $0.000226 (1 from the journal, not paid)",
		"scout answered 500 after 5 model calls", `"code":"chain_budget_exceeded"`, "used 2250 of its 2000 model tokens",
		"its receipt: 6 call(s), 2000 in + 250 out tokens", "scout answered 200; the model was called 8 time(s) in all",
		"14 call(s), 3200 in + 400 out tokens, $0.001920 (5 from the journal, not paid, 1 refused by Baton)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// listening waits for the "baton listening" log line and returns its
// addresses.
func listening(t *testing.T, logs *lockedBuffer) map[string]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "baton listening" {
				return map[string]string{"egress": m["egress"].(string), "ingress": m["ingress"].(string), "admin": m["admin"].(string)}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("baton never listened:\n%s", logs.String())
	return nil
}

func TestServeDrainsInFlightOnShutdown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan struct{})
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "finished")
	}))
	defer agent.Close()
	cfg := writeFile(t, "agent: summarizer\nupstream: "+agent.URL+"\nshutdown_grace: 10s\n"+
		"listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, io.Discard, logs, noEnv) }()
	addrs := listening(t, logs)

	resp, err := http.Get("http://" + addrs["admin"] + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()

	type result struct {
		body string
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := http.Post("http://"+addrs["ingress"]+"/work", "text/plain", strings.NewReader("x"))
		if err != nil {
			inflight <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		inflight <- result{string(b), err}
	}()
	<-arrived
	cancel() // SIGTERM, as far as run is concerned
	// New connections are refused once shutdown has begun.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := http.Get("http://" + addrs["admin"] + "/healthz")
		if err != nil {
			break
		}
		c.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting after shutdown began")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if r := <-inflight; r.err != nil || r.body != "finished" {
		t.Errorf("in-flight request: %q, %v", r.body, r.err)
	}
	if err := <-done; err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}

func TestSIGTERMExitsZero(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, "agent: analyst\nupstream: http://127.0.0.1:9\n"+
		"listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}\n")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "BATON_TEST_AS_MAIN=1", "BATON_TEST_ARGS=serve --config "+cfg)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening(t, logs)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no orderly stop logged:\n%s", logs.String())
	}
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/batonproxy/baton/inject/agentenv"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// baseEnviron is the environment the commands under test start from.
func baseEnviron(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/home/agent", "MODEL=small"}, extra...)
}

// runExec runs `baton exec args` with environ and returns the command's
// stdout, baton's and the command's stderr, and the error.
func runExec(t *testing.T, environ []string, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = execCmd(args, execIO{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, environ: environ,
		signals: make(chan os.Signal), terminalSent: func(os.Signal) bool { return false }})
	return out.String(), errOut.String(), err
}

// envOutput parses env(1)'s output.
func envOutput(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// otelDir makes an instrumentation directory for lang holding its marker.
func otelDir(t *testing.T, lang string) string {
	t.Helper()
	dir := t.TempDir()
	marker := filepath.Join(dir, agentenv.InstrumentationMarker(lang))
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExecEnvironment(t *testing.T) {
	t.Parallel()
	cfgDir := t.TempDir()
	cfgPath := filepath.Join(cfgDir, "baton.yaml")
	if err := os.WriteFile(cfgPath, []byte("agent: planner\nlisten: {egress: \"0.0.0.0:16001\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsPath := filepath.Join(cfgDir, "tls.yaml")
	if err := os.WriteFile(tlsPath, []byte("agent: planner\nexternal: {allow: [api.openai.com:443]}\n"+
		"intercept: {tls: {hosts: [api.openai.com:443], bundle: /run/ca/b.pem}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	routesPath := filepath.Join(cfgDir, "routes.yaml")
	if err := os.WriteFile(routesPath, []byte("agent: planner\nexternal: {routes: [{name: openai}, {name: anthropic}, "+
		"{name: azure-openai, url: 'https://r.openai.azure.com/'}, {name: llm, url: 'https://llm.internal/v1/'}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pyDir, javaDir := otelDir(t, agentenv.LangPython), otelDir(t, agentenv.LangJava)
	const unset = "<unset>"
	defaults := map[string]string{
		"HTTP_PROXY": "http://127.0.0.1:15001", "http_proxy": "http://127.0.0.1:15001",
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
		"NODE_USE_ENV_PROXY": "1", "OTEL_PROPAGATORS": "tracecontext,baggage",
		"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
		"OTEL_SERVICE_NAME": unset, "MODEL": "small", "HOME": "/home/agent", "NODE_OPTIONS": unset,
		"OPENAI_BASE_URL": unset, "ANTHROPIC_BASE_URL": unset, "AZURE_OPENAI_ENDPOINT": unset,
		"HTTPS_PROXY": unset, "SSL_CERT_FILE": unset, "NODE_EXTRA_CA_CERTS": unset,
	}
	for _, tc := range []struct {
		name    string
		environ []string
		args    []string
		want    map[string]string
		warn    string
	}{
		{name: "defaults", want: map[string]string{}},
		{name: "HTTPS and the CA bundle when Baton terminates TLS", args: []string{"--config", tlsPath},
			environ: []string{"SSL_CERT_FILE=/own.pem"},
			want: map[string]string{"OTEL_SERVICE_NAME": "planner", "HTTPS_PROXY": "http://127.0.0.1:15001",
				"SSL_CERT_FILE": "/own.pem", "NODE_EXTRA_CA_CERTS": "/run/ca/b.pem"}},
		{name: "the model SDKs' base URLs for the config's routes", args: []string{"--config", routesPath},
			environ: []string{"ANTHROPIC_BASE_URL=https://kept.example/"},
			want: map[string]string{"OTEL_SERVICE_NAME": "planner", "OPENAI_BASE_URL": "http://127.0.0.1:15001/openai/v1",
				"ANTHROPIC_BASE_URL": "https://kept.example/", "AZURE_OPENAI_ENDPOINT": "http://127.0.0.1:15001/azure-openai"}},
		{name: "egress and agent from flags", args: []string{"--egress", "127.0.0.1:25001", "--agent", "scout"},
			want: map[string]string{"HTTP_PROXY": "http://127.0.0.1:25001", "http_proxy": "http://127.0.0.1:25001", "OTEL_SERVICE_NAME": "scout"}},
		{name: "egress and agent from the config, on loopback", args: []string{"--config", cfgPath},
			want: map[string]string{"HTTP_PROXY": "http://127.0.0.1:16001", "http_proxy": "http://127.0.0.1:16001", "OTEL_SERVICE_NAME": "planner"}},
		{name: "the flags over the config", args: []string{"--config", cfgPath, "--egress", "[::1]:17001", "--agent", "scout"},
			want: map[string]string{"HTTP_PROXY": "http://[::1]:17001", "http_proxy": "http://[::1]:17001", "OTEL_SERVICE_NAME": "scout"}},
		{name: "BATON_AGENT over the config's agent, as serve has it", args: []string{"--config", cfgPath},
			environ: []string{"BATON_AGENT=critic"},
			want:    map[string]string{"HTTP_PROXY": "http://127.0.0.1:16001", "http_proxy": "http://127.0.0.1:16001", "OTEL_SERVICE_NAME": "critic", "BATON_AGENT": "critic"}},
		{name: "the command's own variables kept", args: []string{"--agent", "scout"},
			environ: []string{"HTTP_PROXY=http://squid.example:3128", "no_proxy=corp.example", "OTEL_SERVICE_NAME=scout-eu",
				"OTEL_TRACES_EXPORTER=console", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=http://m:4318", "NODE_USE_ENV_PROXY=0"},
			want: map[string]string{"HTTP_PROXY": "http://squid.example:3128", "no_proxy": "corp.example", "OTEL_SERVICE_NAME": "scout-eu",
				"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "otlp", "NODE_USE_ENV_PROXY": "0",
				"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:4318"},
			warn: "HTTP_PROXY is set already (http://squid.example:3128) and kept"},
		{name: "nodejs from node_modules, NODE_OPTIONS appended", args: []string{"--instrument", "nodejs"},
			environ: []string{"NODE_OPTIONS=--max-old-space-size=64"},
			want:    map[string]string{"NODE_OPTIONS": "--max-old-space-size=64 --require @opentelemetry/auto-instrumentations-node/register"}},
		{name: "nodejs from a directory", args: []string{"--instrument", "nodejs", "--otel-path", otelDir(t, agentenv.LangNodeJS)},
			want: map[string]string{"NODE_OPTIONS": "--require " + unset}}, // checked below: the directory is a temporary one
		{name: "python", args: []string{"--instrument", "python", "--otel-path", pyDir}, environ: []string{"PYTHONPATH=/app"},
			want: map[string]string{"PYTHONPATH": pyDir + "/opentelemetry/instrumentation/auto_instrumentation:/app:" + pyDir}},
		{name: "java", args: []string{"--instrument", "java", "--otel-path", javaDir}, environ: []string{"JAVA_TOOL_OPTIONS=-Xmx1g"},
			want: map[string]string{"JAVA_TOOL_OPTIONS": "-Xmx1g -javaagent:" + javaDir + "/javaagent.jar"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, tc.args...), "--", "sh", "-c", "env")
			stdout, stderr, err := runExec(t, baseEnviron(tc.environ...), "", args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			got := envOutput(stdout)
			want := map[string]string{}
			for k, v := range defaults {
				want[k] = v
			}
			for k, v := range tc.want {
				want[k] = v
			}
			for k, w := range want {
				g, ok := got[k]
				if !ok {
					g = unset
				}
				if strings.HasSuffix(w, unset) && w != unset {
					if !strings.HasPrefix(g, strings.TrimSuffix(w, unset)) || !strings.HasSuffix(g, "/autoinstrumentation.js") {
						t.Errorf("%s = %q, want %s<dir>/autoinstrumentation.js", k, g, strings.TrimSuffix(w, unset))
					}
					continue
				}
				if g != w {
					t.Errorf("%s = %q, want %q", k, g, w)
				}
			}
			if (tc.warn == "") != (stderr == "") || !strings.Contains(stderr, tc.warn) {
				t.Errorf("stderr %q, want %q", stderr, tc.warn)
			}
		})
	}
}

func TestExecExitStatusAndStdio(t *testing.T) {
	t.Parallel()
	stdout, _, err := runExec(t, baseEnviron(), "a question\n", "--", "sh", "-c", `cat; echo oops >&2; exit 7`)
	var es exitStatus
	if !errors.As(err, &es) || exitCode(err) != 7 {
		t.Errorf("error %v (exit %d), want the command's status 7", err, exitCode(err))
	}
	if stdout != "a question\n" {
		t.Errorf("stdout %q, want stdin passed through", stdout)
	}
	if _, _, err := runExec(t, baseEnviron(), "", "--", "true"); err != nil {
		t.Errorf("true: %v", err)
	}
	// Without "--", the command starts at the first argument that is not a flag.
	if stdout, _, err := runExec(t, baseEnviron(), "", "--agent", "scout", "sh", "-c", `echo "$OTEL_SERVICE_NAME"`); err != nil || stdout != "scout\n" {
		t.Errorf("stdout %q error %v", stdout, err)
	}
}

// lineWriter collects a command's output and lets a test wait for a line.
type lineWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed, and replaced, at each write
}

func newLineWriter() *lineWriter { return &lineWriter{changed: make(chan struct{})} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitLine waits until line has been written; false if ended closes first.
func (w *lineWriter) waitLine(line string, ended <-chan struct{}) bool {
	for {
		w.mu.Lock()
		has := slices.Contains(strings.Split(w.buf.String(), "\n"), line)
		changed := w.changed
		w.mu.Unlock()
		if has {
			return true
		}
		select {
		case <-changed:
		case <-ended:
			return false
		}
	}
}

// TestExecSignalCatcher is not a test: it is the command the signal tests
// run (the test binary again, with BATON_TEST_SIGNAL_CATCHER=1). It prints
// ready, then each signal it gets, and exits 42 at SIGTERM. Catching the
// signals makes sure none is ignored, whatever the test binary inherited.
func TestExecSignalCatcher(t *testing.T) {
	if os.Getenv("BATON_TEST_SIGNAL_CATCHER") != "1" {
		return
	}
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	fmt.Println("ready")
	for sig := range ch {
		fmt.Println(sig)
		if sig == syscall.SIGTERM {
			os.Exit(42)
		}
	}
}

func TestExecForwardsSignals(t *testing.T) {
	t.Parallel()
	catcher := []string{os.Args[0], "-test.run=^TestExecSignalCatcher$", "-test.count=1"}
	for _, tc := range []struct {
		name         string
		argv         []string
		send         []os.Signal
		terminalSent bool
		code         int
		want, not    []string // lines the command prints, and does not
	}{
		{"SIGTERM", catcher, []os.Signal{syscall.SIGTERM}, false, 42, []string{"terminated"}, nil},
		{"SIGINT and SIGHUP", catcher, []os.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM}, false, 42,
			[]string{"interrupt", "hangup", "terminated"}, nil},
		// A ^C the terminal gave the command already is not given twice.
		{"SIGINT from the terminal", catcher, []os.Signal{syscall.SIGINT, syscall.SIGTERM}, true, 42,
			[]string{"terminated"}, []string{"interrupt"}},
		{"killed by a signal", []string{"sh", "-c", "echo ready; exec sleep 30"}, []os.Signal{syscall.SIGTERM}, false, 128 + 15, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			signals := make(chan os.Signal)
			out := newLineWriter()
			var stderr bytes.Buffer
			ended := make(chan struct{})
			var err error
			go func() {
				defer close(ended)
				err = execCmd(append([]string{"--"}, tc.argv...), execIO{stdin: strings.NewReader(""), stdout: out, stderr: &stderr,
					environ: baseEnviron("BATON_TEST_SIGNAL_CATCHER=1"), signals: signals,
					terminalSent: func(sig os.Signal) bool { return tc.terminalSent && sig == syscall.SIGINT }})
			}()
			if !out.waitLine("ready", ended) {
				t.Fatalf("the command ended before it was ready: %v\n%s", err, stderr.String())
			}
			// One at a time: each signal the command is to print is
			// printed before the next is sent, so that none overtakes another.
			for _, sig := range tc.send {
				signals <- sig
				if slices.Contains(tc.want, sig.String()) && sig != syscall.SIGTERM {
					out.waitLine(sig.String(), ended)
				}
			}
			<-ended
			if exitCode(err) != tc.code {
				t.Errorf("error %v (exit %d), want exit %d; output %q", err, exitCode(err), tc.code, out.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			for _, w := range tc.want {
				if !slices.Contains(lines, w) {
					t.Errorf("output %q lacks %q", out.String(), w)
				}
			}
			for _, n := range tc.not {
				if slices.Contains(lines, n) {
					t.Errorf("output %q has %q", out.String(), n)
				}
			}
		})
	}
}

func TestExecUsage(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"--help"}, &stdout, &stderr, noEnv); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"baton exec [--egress ADDR]", "-- CMD [ARGS...]", "instrumentation.md"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("baton --help lacks %q", s)
		}
	}
	if out, _, err := runExec(t, baseEnviron(), "", "-h"); err != nil || !strings.HasPrefix(out, "Usage:\n  baton exec") {
		t.Errorf("exec -h: %q, %v", out, err)
	}
}

func TestExecErrors(t *testing.T) {
	t.Parallel()
	pyDir := otelDir(t, agentenv.LangPython)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", []string{"--agent", "scout"}, "no command given"},
		{"no command after --", []string{"--"}, "no command given"},
		{"unknown instrument", []string{"--instrument", "ruby", "--", "true"}, `--instrument: must be nodejs, python, java or dotnet, got "ruby"`},
		{"python without its directory", []string{"--instrument", "python", "--", "true"}, "--instrument python needs --otel-path DIR"},
		{"a directory without the instrumentation", []string{"--instrument", "java", "--otel-path", pyDir, "--", "true"}, "holds no java instrumentation"},
		{"a directory without a language", []string{"--otel-path", pyDir, "--", "true"}, "--otel-path needs --instrument"},
		{"bad egress", []string{"--egress", "localhost", "--", "true"}, `egress "localhost": must be HOST:PORT`},
		{"missing config", []string{"--config", "/nonexistent/baton.yaml", "--", "true"}, "--config"},
		{"unknown flag", []string{"--proxy", "x", "--", "true"}, "flag provided but not defined"},
		{"a command that cannot start", []string{"--", "/nonexistent/agent"}, "cannot start /nonexistent/agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := runExec(t, baseEnviron(), "", tc.args...)
			if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v (exit %d), want exit 2 naming %q", err, exitCode(err), tc.want)
			}
		})
	}
}

// TestExecNodePreload: a real Node.js loads the instrumentation's
// autoinstrumentation.js from --otel-path before the app runs, with the
// propagation variables set.
func TestExecNodePreload(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the preload test needs node (.ci/run installs it: apt-get install nodejs)")
		}
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	preload := `process.stdout.write("preloaded " + process.env.OTEL_PROPAGATORS + " " + process.env.OTEL_SERVICE_NAME + "\n");` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "autoinstrumentation.js"), []byte(preload), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runExec(t, baseEnviron(), "", "--agent", "scout", "--instrument", "nodejs", "--otel-path", dir,
		"--", node, "-e", `console.log("app " + process.env.HTTP_PROXY)`)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if want := "preloaded tracecontext,baggage scout\napp http://127.0.0.1:15001\n"; stdout != want {
		t.Errorf("stdout %q, want %q (stderr %q)", stdout, want, stderr)
	}
}

// TestExecMain runs baton exec as a process of its own (the test binary
// standing in for baton): its command's status is baton's, with nothing
// printed of baton's own, and a SIGTERM to baton reaches the command.
func TestExecMain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	baton := func(args string) *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "BATON_TEST_AS_MAIN=1", "BATON_TEST_ARGS=exec -- "+args)
		return cmd
	}

	cmd := baton(script("three.sh", "exit 3"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 3 || stderr.Len() != 0 {
		t.Errorf("exit %d (%v), stderr %q; want 3 and nothing", cmd.ProcessState.ExitCode(), err, stderr.String())
	}

	cmd = baton(script("sleeper.sh", "echo ready\nexec sleep 30"))
	out := newLineWriter()
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_ = cmd.Wait()
	}()
	if !out.waitLine("ready", ended) {
		t.Fatalf("baton exec ended: %s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-ended
	if code := cmd.ProcessState.ExitCode(); code != 128+15 {
		t.Errorf("exit %d, want 143: the command ended by the SIGTERM baton passed on (stderr %q)", code, stderr.String())
	}
}

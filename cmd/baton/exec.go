package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/batonproxy/baton/inject/agentenv"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/batonproxy/baton/config"
)

// execUsage is the exec part of baton's usage text.
const execUsage = `  baton exec [--egress ADDR] [--config FILE] [--agent NAME]
         [--instrument nodejs|python|java|dotnet] [--otel-path DIR] -- CMD [ARGS...]
                                 run an agent with the environment that sends its
                                 calls through its Baton and forwards trace context,
                                 unchanged: HTTP_PROXY and http_proxy (the egress:
                                 --egress, else the config's listen.egress, else
                                 127.0.0.1:15001), NO_PROXY, NODE_USE_ENV_PROXY=1,
                                 OTEL_PROPAGATORS=tracecontext,baggage, export off,
                                 OTEL_SERVICE_NAME (--agent, else the config's agent),
                                 and for each of the config's external.routes that
                                 a model SDK knows, its base URL (OPENAI_BASE_URL,
                                 ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL,
                                 AZURE_OPENAI_ENDPOINT); with intercept.tls, HTTPS_PROXY
                                 and https_proxy, and SSL_CERT_FILE, REQUESTS_CA_BUNDLE,
                                 NODE_EXTRA_CA_CERTS and CURL_CA_BUNDLE naming the CA
                                 bundle Baton publishes; a variable already set is kept. --instrument loads
                                 zero-code OpenTelemetry: nodejs from the app's
                                 node_modules, or any language from --otel-path DIR
                                 (laid out as the OpenTelemetry Operator's images).
                                 Signals are passed on; exits with CMD's status
`

// noProxyValue is what NO_PROXY holds for an agent beside its Baton: loopback
// stays direct.
const noProxyValue = "localhost,127.0.0.1,::1"

// exitStatus is the status of the command `baton exec` ran: main exits
// with it, and prints nothing of its own.
type exitStatus int

func (e exitStatus) Error() string { return "exit status " + strconv.Itoa(int(e)) }

// execIO is what `baton exec` runs its command with.
type execIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// environ is the environment the command starts from (os.Environ()).
	environ []string
	// signals are passed on to the command; nil: this process's SIGINT,
	// SIGTERM and SIGHUP.
	signals <-chan os.Signal
	// terminalSent tells whether the terminal delivered sig to the
	// command already; nil: terminalSentToGroup.
	terminalSent func(sig os.Signal) bool
}

// execFlags are `baton exec`'s flags.
type execFlags struct {
	egress, config, agent, instrument, otelPath string
}

// execCmd runs `baton exec`: the command in args, with the environment of
// an agent beside its Baton, until it exits.
func execCmd(args []string, p execIO) error {
	fl := flag.NewFlagSet("exec", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var f execFlags
	fl.StringVar(&f.egress, "egress", "", "Baton's egress listener, HOST:PORT (default: the config's listen.egress, else 127.0.0.1:15001)")
	fl.StringVar(&f.config, "config", "", "Baton's configuration file, for listen.egress and agent")
	fl.StringVar(&f.agent, "agent", "", "the agent's name, for OTEL_SERVICE_NAME (default: the config's agent)")
	fl.StringVar(&f.instrument, "instrument", "", "load zero-code OpenTelemetry instrumentation: nodejs, python, java or dotnet")
	fl.StringVar(&f.otelPath, "otel-path", "", "the instrumentation's directory, laid out as the OpenTelemetry Operator's image for the language")
	bad := func(msg string) error {
		fmt.Fprint(p.stderr, "Usage:\n"+execUsage)
		return usageError{msg: "exec: " + msg}
	}
	switch err := fl.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(p.stdout, "Usage:\n"+execUsage)
		return nil
	case err != nil:
		return bad(err.Error())
	case fl.NArg() == 0:
		return bad("no command given: baton exec [flags] -- CMD [ARGS...]")
	}
	env, err := execEnv(f, p.environ)
	if err != nil {
		return bad(err.Error())
	}
	for _, name := range []string{"HTTP_PROXY", "http_proxy"} {
		if v, ok := lookupEnviron(p.environ, name); ok && v != "" && v != env.proxy {
			fmt.Fprintf(p.stderr, "baton exec: %s is set already (%s) and kept: the calls it carries do not go through Baton\n", name, v)
		}
	}
	return runChild(fl.Args(), env.environ, p)
}

// childEnv is the command's environment, and the proxy URL in it.
type childEnv struct {
	environ []string
	proxy   string
}

// execEnv builds the command's environment from environ and the flags.
func execEnv(f execFlags, environ []string) (childEnv, error) {
	if f.otelPath != "" && f.instrument == "" {
		return childEnv{}, errors.New("--otel-path needs --instrument LANG")
	}
	lookup := func(name string) (string, bool) { return lookupEnviron(environ, name) }
	egress, agent := config.DefaultEgress, f.agent
	var routes []config.Route
	var tlsi config.InterceptTLS
	if f.config != "" {
		c, err := readExecConfig(f.config, lookup)
		if err != nil {
			return childEnv{}, err
		}
		if c.Listen.Egress != "" {
			egress = c.Listen.Egress
		}
		if agent == "" {
			agent = c.Agent
		}
		routes = c.External.Routes
		tlsi = c.Intercept.TLS
	}
	if f.egress != "" {
		egress = f.egress
	}
	proxy, err := proxyURL(egress)
	if err != nil {
		return childEnv{}, err
	}

	var vars []agentenv.EnvVar
	set := func(name, value string) {
		if _, ok := lookup(name); !ok {
			vars = append(vars, agentenv.EnvVar{Name: name, Value: value})
		}
	}
	set("HTTP_PROXY", proxy)
	set("http_proxy", proxy)
	set("NO_PROXY", noProxyValue)
	set("no_proxy", noProxyValue)
	// Node.js 22.21 and 24 or later honour the proxy variables with it;
	// older Node ignores both.
	set("NODE_USE_ENV_PROXY", "1")
	// HTTPS through Baton when it terminates some destinations' TLS, and
	// its CA's bundle (with the system roots) as every runtime's trust.
	if tlsi.Enabled() {
		set("HTTPS_PROXY", proxy)
		set("https_proxy", proxy)
		bundle := tlsi.Bundle
		if bundle == "" {
			bundle = config.DefaultInterceptBundle
		}
		for _, name := range agentenv.TrustBundleVars {
			set(name, bundle)
		}
	}
	// The model SDKs' base URLs, for the config's base-URL routes.
	for _, r := range routes {
		if name, value, ok := config.RouteEnv(proxy, r.Name); ok {
			set(name, value)
		}
	}
	if f.instrument != "" {
		load, err := instrumentEnv(f.instrument, f.otelPath, lookup)
		if err != nil {
			return childEnv{}, err
		}
		vars = append(vars, load...)
	}
	vars = append(vars, agentenv.TelemetryEnv(agent, "", lookup)...)
	return childEnv{environ: withEnv(environ, vars), proxy: proxy}, nil
}

// instrumentEnv checks the instrumentation asked for and returns the
// variables that load it.
func instrumentEnv(lang, dir string, lookup agentenv.EnvLookup) ([]agentenv.EnvVar, error) {
	if err := agentenv.CheckLanguage(lang); err != nil {
		return nil, fmt.Errorf("--instrument: %w", err)
	}
	if dir == "" && lang != agentenv.LangNodeJS {
		return nil, fmt.Errorf("--instrument %s needs --otel-path DIR: a directory holding %s, as the "+
			"OpenTelemetry Operator's autoinstrumentation-%s image lays it out", lang, agentenv.InstrumentationMarker(lang), lang)
	}
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("--otel-path: %w", err)
		}
		if strings.ContainsAny(abs, " \t\n\"':;") {
			return nil, fmt.Errorf("--otel-path: %q has a space, quote, ':' or ';', which the variables that load it cannot hold", abs)
		}
		if _, err := os.Stat(filepath.Join(abs, agentenv.InstrumentationMarker(lang))); err != nil {
			return nil, fmt.Errorf("--otel-path: %s holds no %s instrumentation: %w", abs, lang, err)
		}
		dir = abs
	}
	vars, err := agentenv.LoadEnv(lang, dir, lookup)
	if err != nil {
		return nil, fmt.Errorf("--instrument: %w", err)
	}
	return vars, nil
}

// readExecConfig reads the configuration for its egress and agent only: a
// file `baton serve` would refuse for other reasons (a missing upstream or
// admin token in this environment) still names them.
func readExecConfig(path string, lookup agentenv.EnvLookup) (*config.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	c, err := config.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	c.ApplyEnv(func(name string) string { v, _ := lookup(name); return v })
	return c, nil
}

// proxyURL is the HTTP_PROXY value for the egress address: a wildcard host
// is reached on loopback.
func proxyURL(egress string) (string, error) {
	host, port, err := net.SplitHostPort(egress)
	if err != nil {
		return "", fmt.Errorf("egress %q: must be HOST:PORT: %w", egress, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("egress %q: the port must be 1 to 65535", egress)
	}
	if host == "" {
		host = "127.0.0.1"
	} else if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.Is6() {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// lookupEnviron finds name in environ; the last entry wins, as os/exec has
// it.
func lookupEnviron(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// withEnv returns environ with vars set: earlier entries of their names
// dropped, the new ones appended.
func withEnv(environ []string, vars []agentenv.EnvVar) []string {
	set := make(map[string]bool, len(vars))
	for _, v := range vars {
		set[v.Name] = true
	}
	out := make([]string, 0, len(environ)+len(vars))
	for _, e := range environ {
		if k, _, _ := strings.Cut(e, "="); !set[k] {
			out = append(out, e)
		}
	}
	for _, v := range vars {
		out = append(out, v.Name+"="+v.Value)
	}
	return out
}

// runChild starts argv with environ, passes signals on until it exits, and
// returns its status: nil for 0, else exitStatus (128+n for a signal n).
func runChild(argv []string, environ []string, p execIO) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = environ
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.stdin, p.stdout, p.stderr
	signals := p.signals
	if signals == nil {
		ch := make(chan os.Signal, 8)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(ch)
		signals = ch
	}
	terminalSent := p.terminalSent
	if terminalSent == nil {
		terminalSent = terminalSentToGroup
	}
	if err := cmd.Start(); err != nil {
		return usageError{msg: fmt.Sprintf("exec: cannot start %s: %v", argv[0], err)}
	}
	done := make(chan struct{})
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case <-done:
				return
			case sig, ok := <-signals:
				if !ok {
					signals = nil // closed: nothing more to pass on
					continue
				}
				if !terminalSent(sig) {
					// The command may have exited meanwhile: nothing to do.
					_ = cmd.Process.Signal(sig)
				}
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	<-forwarded
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitStatus(128 + int(ws.Signal()))
		}
		return exitStatus(ee.ExitCode())
	}
	return fmt.Errorf("exec: %s: %w", argv[0], err)
}

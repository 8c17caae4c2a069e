// Command baton is the Baton sidecar: it runs beside an agent and carries
// its handoffs to other agents' Batons with trace context, identity, hop
// count and idempotency keys. main only wires signals to run, which does the
// work and is tested directly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is stamped at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOGC") == "" {
		// Fewer, larger collections: a proxy's heap is mostly short-lived
		// buffers, and its memory is bounded by its limits, not by GC.
		debug.SetGCPercent(400)
	}
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil {
		var ue usageError
		var es exitStatus // baton exec's command's own status: it spoke for itself
		if !errors.As(err, &es) && (!errors.As(err, &ue) || ue.msg != "") {
			fmt.Fprintln(os.Stderr, "baton:", err)
		}
		os.Exit(exitCode(err))
	}
}

// usageError is a command-line mistake: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var es exitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

const usage = `baton: a sidecar proxy that makes handoffs between AI agents reliable.

Usage:
  baton serve --config FILE      run the sidecar: egress, ingress and admin listeners
  baton validate --config FILE   check a configuration file; exit 0 when good, 1 with
                                 one line per problem (path: expected, got value)
  baton trace TRACE_ID [--verify] [--admin HOST:PORT]... [--json]
                                 print a trace's handoff records as a tree (from one or
                                 more Batons); --verify checks each hash chain, exit 1
                                 when one is broken
  baton dlq ls [--edge FROM→TO] [--offset N] [--limit N] [--admin HOST:PORT]
  baton dlq show|replay|drop ID [--admin HOST:PORT]
                                 list, inspect, replay or drop the dead letters of that
                                 Baton's agent (another agent's are refused, naming it)
` + approveUsage + budgetUsage + abandonUsage + topUsage + `  baton envelope validate [flags] FILE...
                                 check handoff envelopes (bare, or inside an A2A
                                 request): ok with completeness, or every violation
                                 with its JSON pointer; exit 1 if any file has one
  baton envelope example         print a complete, valid envelope
` + keygenUsage + keygenTLSUsage + iptablesUsage + execUsage + toolsUsage + `  baton version                  print the version
  baton help                     this text

serve
  Loads FILE (YAML, strict: unknown keys are errors), applies BATON_AGENT,
  BATON_UPSTREAM, BATON_LOG_LEVEL, BATON_SHUTDOWN_GRACE, BATON_REDIS_PASSWORD and
  BATON_ADMIN_TOKEN, validates, and listens on listen.egress (the agent's outbound calls: Host
  routing or HTTP_PROXY), listen.ingress (handoffs from peers' Batons, delivered
  to upstream) and listen.admin (/healthz, /readyz, and the records API under
  /v1/, which needs admin_token when the admin listener is not on loopback).
  With identity.key_file (or key_env) every handoff is signed; with trust.peers
  every inbound handoff must be signed by a listed key. With no store.redis the
  in-memory store is used. SIGTERM or SIGINT stops accepting, lets in-flight
  requests finish within shutdown_grace, and exits 0. BATON_CONFIG may name
  FILE instead of --config.

trace, dlq, approvals, approve, deny, budget, abandon and top
  Talk to a Baton's admin listener (default 127.0.0.1:15000); BATON_ADMIN_TOKEN is
  sent as a bearer token when set.

Tracing
  Spans are exported over OTLP only when the standard variables ask for it:
  OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or
  OTEL_TRACES_EXPORTER=otlp), with OTEL_EXPORTER_OTLP_PROTOCOL (or
  ..._TRACES_PROTOCOL) grpc or http/protobuf (the default).
  OTEL_TRACES_EXPORTER=none turns export off. OTEL_SERVICE_NAME,
  OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER are honoured.

Metrics
  GET /metrics on the admin listener (Prometheus text, no token needed), and
  OTLP push when OTEL_EXPORTER_OTLP_ENDPOINT or ..._METRICS_ENDPOINT is set
  (..._METRICS_PROTOCOL as above). OTEL_METRICS_EXPORTER lists otlp,
  prometheus or none. Series: docs/metrics.md.

Documentation: README.md and docs/ (config.md, idempotency.md, records.md,
resilience.md, envelope.md, problems.md, interception.md, gates.md, chaos.md,
broadcast.md, context.md, compensation.md, tls.md, instrumentation.md).
`

// run executes one baton command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{msg: "no command given"}
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, stderr, env)
	case "validate":
		return validate(rest, stdout, env)
	case "envelope":
		return envelopeCmd(rest, stdout, stderr)
	case "keygen":
		return keygenCmd(rest, stdout, stderr)
	case "trace":
		return traceCmd(rest, stdout, env)
	case "dlq":
		return dlqCmd(rest, stdout, env)
	case "approvals":
		return approvalsCmd(rest, stdout, env)
	case "approve", "deny":
		return decideCmd(cmd == "approve", rest, stdout, env)
	case "budget":
		return budgetCmd(rest, stdout, env)
	case "abandon":
		return abandonCmd(rest, stdout, env)
	case "top":
		return topCmd(ctx, rest, stdout, env)
	case "demo", "chaos", "inject", "inject-webhook":
		return toolCmd(ctx, cmd, rest, stdout, stderr, env) // not in the sidecar's build (tools.go)
	case "iptables":
		return iptablesCmd(ctx, rest, stdout, stderr)
	case "exec":
		return execCmd(rest, execIO{stdin: os.Stdin, stdout: stdout, stderr: stderr, environ: os.Environ()})
	case "version", "--version":
		fmt.Fprintln(stdout, "baton", version)
		return nil
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return usageError{msg: fmt.Sprintf("unknown command %q", cmd)}
	}
}

// parseCommand parses a subcommand's flags and allows no other arguments.
// -h prints usage to stdout and reports done; a mistake prints usage to
// stderr and is a usageError naming the command. bad reports the mistakes
// the command finds later in the same way.
func parseCommand(fl *flag.FlagSet, args []string, name, usage string, stdout, stderr io.Writer) (bad func(string) error, done bool, err error) {
	bad = func(msg string) error {
		fmt.Fprint(stderr, "Usage:\n"+usage)
		return usageError{msg: name + ": " + msg}
	}
	switch err := fl.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, "Usage:\n"+usage)
		return bad, true, nil
	case err != nil:
		return bad, false, bad(err.Error())
	case fl.NArg() > 0:
		return bad, false, bad(fmt.Sprintf("unexpected argument %q", fl.Arg(0)))
	}
	return bad, false, nil
}

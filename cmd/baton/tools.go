//go:build !sidecar

package main

// The commands the sidecar's image leaves out (tools_sidecar.go): the demo,
// chaos, and the injector (offline and as a webhook), with what they link
// (Kubernetes' API types, the load generator). This file is in every build
// but the sidecar's: `go run ./cmd/baton demo`, make demo and the injector's
// image have them.

import (
	"context"
	"io"
	"os"
)

// toolsUsage is the part of baton's usage text these commands add.
const toolsUsage = `  baton demo [-v]                run a four-agent workflow, each agent with its Baton
                                 on loopback: a chain that stops at a dead letter and
                                 resumes there (replayed, then re-sent with its key)
                                 with no step run twice, the trace tree, a retry
                                 answered from the dedupe window, a stream, copied web
                                 text labelled untrusted and spotlighted, a refund
                                 held by a confirmation gate and approved from the CLI,
                                 a failed trip abandoned: its charge refunded, then
                                 its room cancelled; a 2 MB transcript passed by
                                 reference, an envelope trimmed to a token budget, what
                                 the chain's model calls cost per agent, and a runaway
                                 agent stopped by its chain's budget, then resumed
                                 (-v: the Batons' JSON logs on stderr)
` + chaosUsage + injectUsage

// toolCmd runs one of the commands of this file.
func toolCmd(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer, env func(string) string) error {
	switch cmd {
	case "demo":
		return demo(ctx, args, stdout, stderr)
	case "chaos":
		return chaosCmd(ctx, args, stdout, stderr)
	case "inject":
		return injectCmd(args, os.Stdin, stdout, stderr)
	default:
		return injectWebhookCmd(ctx, args, stdout, stderr, env)
	}
}
